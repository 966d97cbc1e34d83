#include "store/transfer.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

#include "platform/files.h"
#include "store/s3_protocol.h"

namespace gpuhost::store {
namespace {

namespace fs = std::filesystem;

bool cancelled(const std::atomic<bool>* cancel) {
  return cancel && cancel->load();
}

// Runs job(i) for i in [0, count) on up to `threads` threads; stops handing out work after the
// first error (or a cancel) and returns that error. Threads are joined before returning.
Result<void> run_parallel(std::size_t count, unsigned threads, const std::atomic<bool>* cancel,
                          const std::function<Result<void>(std::size_t)>& job) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex mutex;
  std::optional<Error> first_error;  // guarded by mutex
  auto worker = [&] {
    for (;;) {
      if (failed.load() || cancelled(cancel)) return;
      std::size_t i = next.fetch_add(1);
      if (i >= count) return;
      auto done = job(i);
      if (!done) {
        std::lock_guard lock(mutex);
        if (!first_error) first_error = done.error();
        failed = true;
      }
    }
  };
  std::size_t n = std::clamp<std::size_t>(threads, 1, std::max<std::size_t>(count, 1));
  std::vector<std::thread> pool;
  for (std::size_t t = 1; t < n; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (first_error) return std::unexpected(*first_error);
  if (cancelled(cancel) && next.load() < count) return make_error(ErrorCode::timeout, "cancelled");
  return {};
}

}  // namespace

std::uint64_t choose_part_size(std::uint64_t file_size, std::uint64_t wanted) {
  std::uint64_t part = std::clamp(wanted, k_min_part_size, k_max_part_size);
  std::uint64_t needed = (file_size + k_max_parts - 1) / k_max_parts;
  if (part < needed) {
    constexpr std::uint64_t mib = 1ull << 20;
    part = std::min(k_max_part_size, (needed + mib - 1) / mib * mib);
  }
  return part;
}

Result<UploadResult> upload_file(ObjectStore& store, std::string_view key, const fs::path& file,
                                 const UploadOptions& options) {
  std::string what = "uploading " + file.string() + " to " + store.describe() + " key " + std::string(key);
  std::error_code ec;
  std::uint64_t size = fs::file_size(file, ec);
  if (ec)
    return make_error(ec == std::errc::no_such_file_or_directory ? ErrorCode::not_found : ErrorCode::io_error,
                      what + ": " + ec.message());

  UploadResult result;
  result.bytes = size;
  if (options.resume_upload_id.empty() && (size <= options.multipart_threshold || size == 0)) {
    auto etag = store.put(key, Payload::from_file(file, 0, size));
    if (!etag) return std::unexpected(with_context(etag.error(), what));
    result.etag = *etag;
    return result;
  }

  std::uint64_t part_size = choose_part_size(size, options.part_size);
  int count = static_cast<int>((size + part_size - 1) / part_size);
  if (count > k_max_parts)  // only past 48.8 TiB (10,000 x 5 GiB)
    return make_error(ErrorCode::invalid_argument, what + ": the file is larger than S3's multipart limit");
  auto expected_size = [&](int number) {
    std::uint64_t offset = static_cast<std::uint64_t>(number - 1) * part_size;
    return std::min(part_size, size - offset);
  };

  std::vector<std::optional<PartInfo>> parts(static_cast<std::size_t>(count));
  if (!options.resume_upload_id.empty()) {
    result.upload_id = options.resume_upload_id;
    auto existing = store.list_parts(key, result.upload_id);
    if (!existing)
      return std::unexpected(
          with_context(existing.error(), what + " (resuming upload " + result.upload_id + ")"));
    std::map<int, std::string> known;
    for (const PartInfo& p : options.known_parts) known[p.number] = p.etag;
    for (const PartInfo& p : *existing) {
      if (p.number < 1 || p.number > count || p.size != expected_size(p.number)) continue;
      if (!known.empty() && (!known.contains(p.number) || known[p.number] != p.etag)) continue;
      parts[static_cast<std::size_t>(p.number - 1)] = p;
      ++result.parts_reused;
    }
  } else {
    auto id = store.create_multipart(key);
    if (!id) return std::unexpected(with_context(id.error(), what));
    result.upload_id = *id;
  }
  if (options.on_started) options.on_started(result.upload_id);

  std::vector<int> todo;
  for (int number = 1; number <= count; ++number)
    if (!parts[static_cast<std::size_t>(number - 1)]) todo.push_back(number);
  std::mutex callback_mutex;
  auto uploaded =
      run_parallel(todo.size(), options.concurrency, options.cancel, [&](std::size_t i) -> Result<void> {
        int number = todo[i];
        std::uint64_t offset = static_cast<std::uint64_t>(number - 1) * part_size;
        PartInfo part = GPUHOST_TRY(store.upload_part(
            key, result.upload_id, number, Payload::from_file(file, offset, expected_size(number))));
        std::lock_guard lock(callback_mutex);
        parts[static_cast<std::size_t>(number - 1)] = part;
        if (options.on_part_done) options.on_part_done(part);
        return {};
      });
  if (!uploaded)
    return std::unexpected(with_context(
        uploaded.error(), what + " (upload " + result.upload_id + " is left in place and can be resumed)"));

  std::vector<PartInfo> ordered;
  for (auto& p : parts) ordered.push_back(std::move(*p));
  auto etag = store.complete_multipart(key, result.upload_id, ordered);
  if (!etag) return std::unexpected(with_context(etag.error(), what));
  result.etag = *etag;
  result.parts = count;
  return result;
}

Result<std::uint64_t> download_file(ObjectStore& store, std::string_view key, const fs::path& file,
                                    const DownloadOptions& options) {
  std::string what = "downloading " + store.describe() + " key " + std::string(key) + " to " + file.string();
  auto info = store.head(key);
  if (!info) return std::unexpected(with_context(info.error(), what));
  fs::path partial = file;
  partial += ".partial";
  {
    // Not fs::resize_file: on Windows it goes through MinGW's ftruncate64, which walks every volume
    // to check free space first and fails with EFBIG when that walk stumbles, though the disk has room.
    auto sized = platform::AppendFile::open(partial);
    if (!sized) return std::unexpected(with_context(sized.error(), what));
    if (auto done = sized->truncate(info->size); !done)
      return std::unexpected(with_context(done.error(), what));
  }
  std::error_code ec;

  std::uint64_t range = std::max<std::uint64_t>(options.range_size, 1);
  std::size_t count = static_cast<std::size_t>((info->size + range - 1) / range);
  auto fetched = run_parallel(count, options.concurrency, options.cancel, [&](std::size_t i) -> Result<void> {
    ByteRange r{i * range, std::min(range, info->size - i * range)};
    ReadOptions read;
    read.range = r;
    read.if_match = info->etag;  // a concurrent overwrite fails the download instead of mixing versions
    std::uint64_t got = GPUHOST_TRY(store.get_to_file(key, partial, r.offset, read));
    if (got != r.length)
      return make_error(ErrorCode::io_error, "bytes " + std::to_string(r.offset) + "+" +
                                                 std::to_string(r.length) + ": got " + std::to_string(got));
    return {};
  });
  if (!fetched) {
    fs::remove(partial, ec);
    return std::unexpected(with_context(fetched.error(), what));
  }
  {
    auto synced = platform::AppendFile::open(partial);
    if (!synced) return std::unexpected(with_context(synced.error(), what));
    if (auto done = synced->sync(); !done) return std::unexpected(done.error());
  }
  fs::rename(partial, file, ec);
  if (ec)
    return make_error(ErrorCode::io_error, what + ": renaming " + partial.string() + ": " + ec.message());
  auto parent = file.parent_path();
  if (auto done = platform::sync_directory(parent.empty() ? fs::path(".") : parent); !done)
    return std::unexpected(done.error());
  return info->size;
}

Result<int> abort_stale_uploads(ObjectStore& store, std::string_view prefix, std::chrono::seconds older_than,
                                std::chrono::system_clock::time_point now) {
  auto uploads = store.list_multipart_uploads(prefix);
  if (!uploads)
    return std::unexpected(with_context(uploads.error(), "finding stale uploads in " + store.describe()));
  int aborted = 0;
  for (const UploadInfo& upload : *uploads) {
    auto initiated = parse_iso8601_utc(upload.initiated);
    if (!initiated || now - *initiated < older_than) continue;  // unknown age: leave it alone
    auto done = store.abort_multipart(upload.key, upload.upload_id);
    if (!done)
      return std::unexpected(
          with_context(done.error(), "aborting stale upload " + upload.upload_id + " of " + upload.key));
    ++aborted;
  }
  return aborted;
}

}  // namespace gpuhost::store
