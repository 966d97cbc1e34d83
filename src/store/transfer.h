#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "store/object_store.h"

namespace gpuhost::store {

// S3's multipart limits (docs.aws.amazon.com/AmazonS3/latest/userguide/qfacts.html): parts of
// 5 MiB to 5 GiB (the last may be smaller), at most 10,000 of them.
inline constexpr std::uint64_t k_min_part_size = 5ull << 20;
inline constexpr std::uint64_t k_max_part_size = 5ull << 30;
inline constexpr int k_max_parts = 10000;

// The part size for a file: `wanted` clamped to [5 MiB, 5 GiB] and raised until the file fits
// in 10,000 parts. Pure.
[[nodiscard]] std::uint64_t choose_part_size(std::uint64_t file_size, std::uint64_t wanted);

struct UploadOptions {
  // Files up to this size go in one PUT; larger ones in parts of part_size.
  std::uint64_t multipart_threshold = 64ull << 20;
  std::uint64_t part_size = 64ull << 20;
  unsigned concurrency = 4;  // parts in flight
  // Continue this multipart upload (from a journal) instead of starting one: parts the server
  // already has are kept when their size matches the plan and, when `known_parts` lists them,
  // their ETag matches too. REQUIRES: the same part_size as the first attempt.
  std::string resume_upload_id;
  std::vector<PartInfo> known_parts;
  // Called once the upload id exists (before any part is sent), so the caller can journal it.
  std::function<void(const std::string& upload_id)> on_started;
  // Called after each part is stored (from worker threads, one call at a time).
  std::function<void(const PartInfo& part)> on_part_done;
  const std::atomic<bool>* cancel = nullptr;
};

struct UploadResult {
  std::string etag;
  std::string upload_id;  // empty for a single PUT
  int parts = 0;          // 0 for a single PUT
  int parts_reused = 0;   // parts found on the server when resuming
  std::uint64_t bytes = 0;
};

// Uploads `file` as `key`. Multipart parts go `concurrency` at a time, each hashed (SHA-256,
// sent as x-amz-content-sha256 so the server verifies it). On failure the multipart upload is
// left in place, resumable with its id; abort it or let abort_stale_uploads remove it.
[[nodiscard]] Result<UploadResult> upload_file(ObjectStore& store, std::string_view key,
                                               const std::filesystem::path& file,
                                               const UploadOptions& options = {});

struct DownloadOptions {
  std::uint64_t range_size = 64ull << 20;  // bytes per ranged GET
  unsigned concurrency = 4;
  const std::atomic<bool>* cancel = nullptr;
};

// Downloads `key` into `file` with parallel ranged GETs pinned to the object's ETag (If-Match),
// through "<file>.partial", renamed into place once every range arrived. Returns the size.
[[nodiscard]] Result<std::uint64_t> download_file(ObjectStore& store, std::string_view key,
                                                  const std::filesystem::path& file,
                                                  const DownloadOptions& options = {});

// Aborts the multipart uploads under `prefix` started before `now - older_than` (left behind by
// a crash, or an orphan of a retried CreateMultipartUpload). Returns how many were aborted.
[[nodiscard]] Result<int> abort_stale_uploads(ObjectStore& store, std::string_view prefix,
                                              std::chrono::seconds older_than,
                                              std::chrono::system_clock::time_point now);

}  // namespace gpuhost::store
