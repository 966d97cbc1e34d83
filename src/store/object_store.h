#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "platform/https_client.h"

namespace gpuhost::store {

// The bytes of an upload: caller-owned memory or a byte range of a file (streamed, never read
// whole into memory). Memory must outlive the call.
using Payload = platform::RequestBody;

struct ByteRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;  // > 0
};

struct ObjectInfo {
  std::string key;  // relative to the store's prefix
  std::uint64_t size = 0;
  std::string etag;           // as the server gives it, quotes removed
  std::string last_modified;  // as the server gives it
};

struct ListPage {
  std::vector<ObjectInfo> objects;  // in key order
  std::optional<std::string> next;  // pass back to list() for the next page; nullopt: last page
};

struct PartInfo {
  int number = 0;  // 1..10,000
  std::string etag;
  std::uint64_t size = 0;
  std::string sha256;  // hex SHA-256 of the part as sent (the server checked it); empty when unknown
};

struct UploadInfo {
  std::string key;  // relative to the store's prefix
  std::string upload_id;
  std::string initiated;  // RFC 3339 as the server gives it
};

struct ReadOptions {
  std::optional<ByteRange> range;  // whole object when absent
  std::string if_match;            // an ETag: fail (precondition) when the object changed since
};

// An object store: S3-compatible (s3_store.h) or a directory on a mounted share (file_store.h).
// Keys are relative to the store's prefix and use '/' as separator. Every method is blocking
// and thread-safe; S3 calls retry transient failures themselves (retry.h). Errors read
// "<operation> <s3://bucket/key>: <why>"; not_found for a missing object or upload.
class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // "s3://bucket/prefix/ (https://s3.us-east-1.amazonaws.com, aws)" or "file:///mnt/share".
  [[nodiscard]] virtual std::string describe() const = 0;

  // Stores an object in one request (S3 allows up to 5 GiB); returns its ETag.
  [[nodiscard]] virtual Result<std::string> put(std::string_view key, const Payload& payload) = 0;
  // The object (or a range of it) in memory, up to max_bytes.
  [[nodiscard]] virtual Result<std::string> get(std::string_view key, const ReadOptions& options = {},
                                                std::uint64_t max_bytes = 64u << 20) = 0;
  // The object (or a range) written into `file` at `file_offset` (created when absent; other
  // bytes untouched, so parallel ranges can fill one file). Returns the bytes written.
  [[nodiscard]] virtual Result<std::uint64_t> get_to_file(std::string_view key,
                                                          const std::filesystem::path& file,
                                                          std::uint64_t file_offset,
                                                          const ReadOptions& options = {}) = 0;
  [[nodiscard]] virtual Result<ObjectInfo> head(std::string_view key) = 0;
  // One page of the objects whose keys start with `prefix`; `after` is a previous page's next.
  [[nodiscard]] virtual Result<ListPage> list(std::string_view prefix,
                                              const std::optional<std::string>& after = {},
                                              int max_keys = 1000) = 0;
  // Deleting a missing object succeeds (as in S3).
  [[nodiscard]] virtual Result<void> remove(std::string_view key) = 0;

  // Multipart upload: create, upload parts (any order, in parallel), complete with the parts in
  // ascending order; abort discards. Non-last parts must be at least 5 MiB on S3.
  [[nodiscard]] virtual Result<std::string> create_multipart(std::string_view key) = 0;
  [[nodiscard]] virtual Result<PartInfo> upload_part(std::string_view key, std::string_view upload_id,
                                                     int number, const Payload& payload) = 0;
  [[nodiscard]] virtual Result<std::vector<PartInfo>> list_parts(std::string_view key,
                                                                 std::string_view upload_id) = 0;
  // Returns the object's ETag. Each part's size (and ETag, as upload_part or list_parts gave it)
  // must be right: when the answer is lost, S3 stores compare them with the object by HEAD
  // before calling the upload complete (s3_store.h).
  [[nodiscard]] virtual Result<std::string> complete_multipart(std::string_view key,
                                                               std::string_view upload_id,
                                                               std::span<const PartInfo> parts) = 0;
  // Aborting an upload that no longer exists succeeds.
  [[nodiscard]] virtual Result<void> abort_multipart(std::string_view key, std::string_view upload_id) = 0;
  // Uploads in progress (created, neither completed nor aborted) under `prefix`.
  [[nodiscard]] virtual Result<std::vector<UploadInfo>> list_multipart_uploads(std::string_view prefix) = 0;
};

}  // namespace gpuhost::store
