#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
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

// When a file or directory was last written, at the file system's full resolution (stat's
// st_mtim; GetFileAttributesExW's 100 ns FILETIME). std::filesystem::last_write_time is not used
// for this: MinGW's libstdc++ reads it through _wstat64, whole seconds only. not_found for a
// missing path.
[[nodiscard]] Result<std::chrono::system_clock::time_point> modified_time(const std::filesystem::path& path);

// Target of a symbolic link (not resolved further).
[[nodiscard]] Result<std::string> read_symlink(const std::filesystem::path& path);

}  // namespace gpuhost::platform

namespace gpuhost::platform {

// A file that only grows at its end, for journals. POSIX: O_APPEND; Windows: FILE_APPEND_DATA
// without FILE_WRITE_DATA, so every write lands at the current end whoever else wrote. Others may
// read the file while it is open (Windows: shared for reading, writing and deletion). Move-only;
// not thread-safe.
class AppendFile {
 public:
  // Opens `path` for appending, creating it (empty) when absent. Does not sync the directory:
  // call sync_directory() after creating a file that must survive a crash.
  [[nodiscard]] static Result<AppendFile> open(const std::filesystem::path& path);

  AppendFile(AppendFile&& other) noexcept;
  AppendFile& operator=(AppendFile&& other) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  ~AppendFile();

  // Writes all of `data` at the end of the file (retrying short writes). Not durable until sync().
  [[nodiscard]] Result<void> append(std::string_view data);
  // Makes everything appended so far durable: fsync / FlushFileBuffers.
  [[nodiscard]] Result<void> sync();
  // Cuts the file to `size` bytes (which must not exceed its size) and syncs it.
  [[nodiscard]] Result<void> truncate(std::uint64_t size);
  // The file's current size in bytes.
  [[nodiscard]] Result<std::uint64_t> size() const;

  [[nodiscard]] const std::filesystem::path& path() const;

 private:
  struct State;
  explicit AppendFile(std::unique_ptr<State> state);
  std::unique_ptr<State> m_state;
};

// Makes the entries of directory `dir` durable (a file just created or renamed in it): fsync of
// the directory on POSIX. Windows has no such call for directories; NTFS journals its metadata,
// so this is a successful no-op there.
[[nodiscard]] Result<void> sync_directory(const std::filesystem::path& dir);

}  // namespace gpuhost::platform
