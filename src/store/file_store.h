#pragma once

#include <filesystem>

#include "store/object_store.h"

namespace gpuhost::store {

// ObjectStore on a directory (file:// — a mounted NFS/SMB share, or a local disk). A key is a
// relative path under the root; objects are written to a temp file, synced and renamed into
// place, so a reader sees an old or a new object, never half of one. ETags are
// "<size hex>-<mtime ns hex>": cheap, and they change whenever the file does. Multipart uploads
// live in <root>/.gpuhost-uploads/<id>/ (the key, the start time, one file per part) until
// complete concatenates them into the object or abort removes them. Keys with "." or ".."
// segments, backslashes, ':' or NUL are refused. Thread-safe for distinct keys; parallel parts
// of one upload are distinct files.
class FileStore final : public ObjectStore {
 public:
  explicit FileStore(std::filesystem::path root);

  std::string describe() const override;
  Result<std::string> put(std::string_view key, const Payload& payload) override;
  Result<std::string> get(std::string_view key, const ReadOptions& options, std::uint64_t max_bytes) override;
  Result<std::uint64_t> get_to_file(std::string_view key, const std::filesystem::path& file,
                                    std::uint64_t file_offset, const ReadOptions& options) override;
  Result<ObjectInfo> head(std::string_view key) override;
  Result<ListPage> list(std::string_view prefix, const std::optional<std::string>& after,
                        int max_keys) override;
  Result<void> remove(std::string_view key) override;
  Result<std::string> create_multipart(std::string_view key) override;
  Result<PartInfo> upload_part(std::string_view key, std::string_view upload_id, int number,
                               const Payload& payload) override;
  Result<std::vector<PartInfo>> list_parts(std::string_view key, std::string_view upload_id) override;
  Result<std::string> complete_multipart(std::string_view key, std::string_view upload_id,
                                         std::span<const PartInfo> parts) override;
  Result<void> abort_multipart(std::string_view key, std::string_view upload_id) override;
  Result<std::vector<UploadInfo>> list_multipart_uploads(std::string_view prefix) override;

 private:
  [[nodiscard]] Result<std::filesystem::path> path_of(std::string_view key) const;
  [[nodiscard]] Result<std::filesystem::path> upload_dir(std::string_view key,
                                                         std::string_view upload_id) const;

  const std::filesystem::path m_root;
};

}  // namespace gpuhost::store
