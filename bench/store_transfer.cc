// One timed transfer through src/store/transfer.h, for bench/store_throughput.py:
//
//   store_transfer URL upload KEY FILE PART_SIZE CONCURRENCY
//   store_transfer URL download KEY OUT RANGE_SIZE CONCURRENCY
//
// Prints "bytes=N" and "seconds=S" (wall time of the transfer call alone: opening the store and
// process start-up are outside it). Errors to stderr, exit code 1.

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "base/strings.h"
#include "store/store.h"
#include "store/transfer.h"

namespace {

using namespace gpuhost;
using namespace gpuhost::store;

int fail(const std::string& message) {
  std::fprintf(stderr, "store_transfer: %s\n", message.c_str());
  return 1;
}

std::uint64_t number(const std::string& text) { return static_cast<std::uint64_t>(parse_int(text).value_or(0)); }

int run(const std::vector<std::string>& args) {
  if (args.size() != 6) return fail("usage: store_transfer URL upload|download KEY FILE SIZE CONCURRENCY");
  // moto assembles a completed multipart object before it answers and sends nothing meanwhile
  // (S3 itself sends whitespace while it works: "CompleteMultipartUpload", S3 API Reference); for
  // 2 GiB on a busy host that silence outlasts the default 30 s stall timeout, and the retried
  // Complete then fails (moto answers 500 for an upload it already completed). Throughput is what
  // this program measures, so it waits.
  OpenOptions open;
  open.s3.stall_timeout = std::chrono::minutes(5);
  auto opened = open_store(args[0], open);
  if (!opened) return fail(opened.error().message);
  ObjectStore& store = **opened;
  auto start = std::chrono::steady_clock::now();
  std::uint64_t bytes = 0;
  if (args[1] == "upload") {
    UploadOptions options;
    options.part_size = number(args[4]);
    options.multipart_threshold = options.part_size;
    options.concurrency = static_cast<unsigned>(number(args[5]));
    auto result = upload_file(store, args[2], args[3], options);
    if (!result) return fail(result.error().message);
    bytes = result->bytes;
  } else if (args[1] == "download") {
    DownloadOptions options;
    options.range_size = number(args[4]);
    options.concurrency = static_cast<unsigned>(number(args[5]));
    auto size = download_file(store, args[2], args[3], options);
    if (!size) return fail(size.error().message);
    bytes = *size;
  } else {
    return fail("unknown command " + args[1]);
  }
  std::chrono::duration<double> seconds = std::chrono::steady_clock::now() - start;
  std::printf("bytes=%llu\nseconds=%.3f\n", static_cast<unsigned long long>(bytes), seconds.count());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(std::vector<std::string>(argv + 1, argv + argc)); }
