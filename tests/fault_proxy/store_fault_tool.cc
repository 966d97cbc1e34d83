// Drives src/store/ for tests/fault_proxy/test_store_faults.py: one store operation per run
// against the store URL, with the retry and stall settings the fault tests need (short stall
// timeout, fast backoff) given as leading flags. Results go to stdout as "name=value" lines;
// errors to stderr with exit code 1. tests/integration/store_tool.cc is the same idea without
// the knobs; this one is separate so the fault tests can shorten timeouts.
//
//   store_fault_tool [--stall-timeout-ms N] [--attempts N] [--base-delay-ms N] URL COMMAND ...
//     put KEY FILE
//     upload KEY FILE PART_SIZE CONCURRENCY
//     resume KEY FILE PART_SIZE CONCURRENCY UPLOAD_ID [N:ETAG,...]   (the parts a journal lists)
//     download KEY OUT RANGE_SIZE CONCURRENCY
//     get KEY OUT
//     uploads PREFIX

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "base/strings.h"
#include "store/store.h"
#include "store/transfer.h"

namespace {

using namespace gpuhost;
using namespace gpuhost::store;

int fail(const std::string& message) {
  std::fprintf(stderr, "store_fault_tool: %s\n", message.c_str());
  return 1;
}

std::uint64_t number(const std::string& text) { return static_cast<std::uint64_t>(parse_int(text).value_or(0)); }

int run(std::vector<std::string> args) {
  OpenOptions open;
  while (args.size() >= 2 && args[0].starts_with("--")) {
    auto value = std::chrono::milliseconds(number(args[1]));
    if (args[0] == "--stall-timeout-ms") open.s3.stall_timeout = value;
    else if (args[0] == "--base-delay-ms") open.s3.retry.base_delay = value;
    else if (args[0] == "--attempts") open.s3.retry.max_attempts = static_cast<int>(number(args[1]));
    else return fail("unknown flag " + args[0]);
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.size() < 2) return fail("usage: store_fault_tool [flags] URL COMMAND ...");
  auto opened = open_store(args[0], open);
  if (!opened) return fail(opened.error().message);
  ObjectStore& store = **opened;
  const std::string& command = args[1];
  auto arg = [&](std::size_t i) -> std::string { return i + 2 < args.size() ? args[i + 2] : std::string(); };

  if (command == "put") {
    std::error_code ec;
    auto size = std::filesystem::file_size(arg(1), ec);
    if (ec) return fail("reading " + arg(1) + ": " + ec.message());
    auto etag = store.put(arg(0), Payload::from_file(arg(1), 0, size));
    if (!etag) return fail(etag.error().message);
    std::printf("etag=%s\n", etag->c_str());
    return 0;
  }
  if (command == "upload" || command == "resume") {
    UploadOptions options;
    options.part_size = number(arg(2));
    options.multipart_threshold = options.part_size;
    options.concurrency = static_cast<unsigned>(number(arg(3)));
    if (command == "resume") {
      options.resume_upload_id = arg(4);
      for (std::string_view item : split(arg(5), ',')) {
        auto colon = item.find(':');
        if (colon == std::string_view::npos) continue;
        PartInfo part;
        part.number = static_cast<int>(number(std::string(item.substr(0, colon))));
        part.etag = std::string(item.substr(colon + 1));
        options.known_parts.push_back(part);
      }
    }
    options.on_started = [](const std::string& id) {
      std::printf("upload_id=%s\n", id.c_str());
      std::fflush(stdout);
    };
    options.on_part_done = [](const PartInfo& part) {
      std::printf("part=%d:%s\n", part.number, part.etag.c_str());
      std::fflush(stdout);
    };
    auto result = upload_file(store, arg(0), arg(1), options);
    if (!result) return fail(result.error().message);
    std::printf("etag=%s\nparts=%d\nparts_reused=%d\n", result->etag.c_str(), result->parts, result->parts_reused);
    return 0;
  }
  if (command == "download") {
    DownloadOptions options;
    options.range_size = number(arg(2));
    options.concurrency = static_cast<unsigned>(number(arg(3)));
    auto size = download_file(store, arg(0), arg(1), options);
    if (!size) return fail(size.error().message);
    std::printf("size=%llu\n", static_cast<unsigned long long>(*size));
    return 0;
  }
  if (command == "get") {
    auto n = store.get_to_file(arg(0), arg(1), 0, {});
    if (!n) return fail(n.error().message);
    std::printf("bytes=%llu\n", static_cast<unsigned long long>(*n));
    return 0;
  }
  if (command == "uploads") {
    auto uploads = store.list_multipart_uploads(arg(0));
    if (!uploads) return fail(uploads.error().message);
    for (const UploadInfo& u : *uploads) std::printf("upload=%s id=%s\n", u.key.c_str(), u.upload_id.c_str());
    return 0;
  }
  return fail("unknown command " + command);
}

}  // namespace

int main(int argc, char** argv) { return run(std::vector<std::string>(argv + 1, argv + argc)); }
