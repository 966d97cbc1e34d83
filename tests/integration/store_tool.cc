// Drives src/store/ for the object-store tests: tests/integration/test_store_s3.py (moto_server)
// and tests/fault_proxy/test_store_faults.py (moto_server behind a fault-injecting proxy). One
// store operation per run against the store URL; leading flags change the client's timeouts and
// retries (the fault tests shorten them). Results go to stdout as "name=value" lines; errors to
// stderr with exit code 1. Not part of gpuhost (the CLI wiring is separate).
//
//   store_tool [FLAGS] URL COMMAND ...
//     --stall-timeout-ms N      S3Options::stall_timeout
//     --complete-timeout-ms N   S3Options::complete_timeout
//     --attempts N              RetryPolicy::max_attempts
//     --base-delay-ms N         RetryPolicy::base_delay
//   commands:
//     put KEY FILE
//     upload KEY FILE PART_SIZE CONCURRENCY [STOP_AFTER_PARTS]
//     resume KEY FILE PART_SIZE CONCURRENCY UPLOAD_ID [N:ETAG,...]   (the parts a journal lists)
//     download KEY OUT RANGE_SIZE CONCURRENCY
//     get KEY OUT [OFFSET LENGTH]
//     head KEY
//     list PREFIX
//     delete KEY
//     uploads PREFIX
//     abort-stale PREFIX SECONDS

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/strings.h"
#include "store/store.h"
#include "store/transfer.h"

namespace {

using namespace gpuhost;
using namespace gpuhost::store;

int fail(const std::string& message) {
  std::fprintf(stderr, "store_tool: %s\n", message.c_str());
  return 1;
}

std::uint64_t number(const std::string& text) {
  return static_cast<std::uint64_t>(parse_int(text).value_or(0));
}

// "1:etag1,2:etag2" -> parts with number and ETag (what a journal lists).
std::vector<PartInfo> parse_known_parts(const std::string& text) {
  std::vector<PartInfo> parts;
  for (std::string_view item : split(text, ',')) {
    auto colon = item.find(':');
    if (colon == std::string_view::npos) continue;
    PartInfo part;
    part.number = static_cast<int>(number(std::string(item.substr(0, colon))));
    part.etag = std::string(item.substr(colon + 1));
    parts.push_back(part);
  }
  return parts;
}

int run(std::vector<std::string> args) {
  OpenOptions open;
  while (args.size() >= 2 && args[0].starts_with("--")) {
    auto ms = std::chrono::milliseconds(number(args[1]));
    if (args[0] == "--stall-timeout-ms")
      open.s3.stall_timeout = ms;
    else if (args[0] == "--complete-timeout-ms")
      open.s3.complete_timeout = ms;
    else if (args[0] == "--base-delay-ms")
      open.s3.retry.base_delay = ms;
    else if (args[0] == "--attempts")
      open.s3.retry.max_attempts = static_cast<int>(number(args[1]));
    else
      return fail("unknown flag " + args[0]);
    args.erase(args.begin(), args.begin() + 2);
  }
  if (args.size() < 2) return fail("usage: store_tool [FLAGS] URL COMMAND ...");
  auto opened = open_store(args[0], open);
  if (!opened) return fail(opened.error().message);
  ObjectStore& store = **opened;
  const std::string& command = args[1];
  auto arg = [&](std::size_t i) -> const std::string& {
    static const std::string empty;
    return i + 2 < args.size() ? args[i + 2] : empty;
  };

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
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> done{0};
    std::uint64_t stop_after = command == "upload" ? number(arg(4)) : 0;
    if (command == "resume") {
      options.resume_upload_id = arg(4);
      options.known_parts = parse_known_parts(arg(5));
    }
    options.on_started = [&](const std::string& id) {
      std::printf("upload_id=%s\n", id.c_str());
      std::fflush(stdout);
    };
    options.on_part_done = [&](const PartInfo& part) {
      std::printf("part=%d size=%llu etag=%s sha256=%s\n", part.number,
                  static_cast<unsigned long long>(part.size), part.etag.c_str(), part.sha256.c_str());
      std::fflush(stdout);
      if (stop_after && ++done >= stop_after) stop = true;  // a crash after N parts, for resume tests
    };
    options.cancel = &stop;
    auto result = upload_file(store, arg(0), arg(1), options);
    if (!result) return fail(result.error().message);
    std::printf("etag=%s\nparts=%d\nparts_reused=%d\n", result->etag.c_str(), result->parts,
                result->parts_reused);
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
    ReadOptions read;
    if (!arg(2).empty()) read.range = ByteRange{number(arg(2)), number(arg(3))};
    auto n = store.get_to_file(arg(0), arg(1), 0, read);
    if (!n) return fail(n.error().message);
    std::printf("bytes=%llu\n", static_cast<unsigned long long>(*n));
    return 0;
  }
  if (command == "head") {
    auto info = store.head(arg(0));
    if (!info) return fail(info.error().message);
    std::printf("size=%llu\netag=%s\n", static_cast<unsigned long long>(info->size), info->etag.c_str());
    return 0;
  }
  if (command == "list") {
    std::optional<std::string> next;
    do {
      auto page = store.list(arg(0), next, 2);  // small pages: the continuation is exercised
      if (!page) return fail(page.error().message);
      for (const ObjectInfo& o : page->objects)
        std::printf("object=%s size=%llu\n", o.key.c_str(), static_cast<unsigned long long>(o.size));
      next = page->next;
    } while (next);
    return 0;
  }
  if (command == "delete") {
    auto done = store.remove(arg(0));
    if (!done) return fail(done.error().message);
    return 0;
  }
  if (command == "uploads") {
    auto uploads = store.list_multipart_uploads(arg(0));
    if (!uploads) return fail(uploads.error().message);
    for (const UploadInfo& u : *uploads) std::printf("upload=%s id=%s\n", u.key.c_str(), u.upload_id.c_str());
    return 0;
  }
  if (command == "abort-stale") {
    auto aborted = abort_stale_uploads(store, arg(0), std::chrono::seconds(number(arg(1))),
                                       std::chrono::system_clock::now());
    if (!aborted) return fail(aborted.error().message);
    std::printf("aborted=%d\n", *aborted);
    return 0;
  }
  return fail("unknown command " + command);
}

}  // namespace

int main(int argc, char** argv) {
  return run(std::vector<std::string>(argv + 1, argv + argc));
}
