#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

// Reads a whole file. not_found / permission_denied are distinct from other failures. Files
// larger than max_bytes are an io_error (a guard against reading a device or a huge log).
[[nodiscard]] Result<std::string> read_file(const std::filesystem::path& path,
                                            std::size_t max_bytes = 64u << 20);

// Replaces `path` with `contents` atomically: temp file in the same directory, write, flush,
// fsync (FlushFileBuffers), rename (MoveFileExW REPLACE_EXISTING | WRITE_THROUGH), fsync the
// directory (POSIX). On failure the old file is untouched and the temp file removed.
[[nodiscard]] Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view contents);

// For a symbolic link, is_directory and size describe its target on POSIX; on Windows they are
// the link's own attributes (a directory link is a directory, size 0).
struct DirectoryEntry {
  std::string name;
  bool is_directory = false;
  bool is_symlink = false;
  std::uint64_t size = 0;
};

// Entries of a directory except "." and "..", sorted by name.
[[nodiscard]] Result<std::vector<DirectoryEntry>> list_directory(const std::filesystem::path& path);

struct DiskSpace {
  std::uint64_t capacity_bytes = 0;
  std::uint64_t free_bytes = 0;       // free for the superuser
  std::uint64_t available_bytes = 0;  // free for this user
};

[[nodiscard]] Result<DiskSpace> disk_space(const std::filesystem::path& path);

// Target of a symbolic link (not resolved further).
[[nodiscard]] Result<std::string> read_symlink(const std::filesystem::path& path);

}  // namespace gpuhost::platform
