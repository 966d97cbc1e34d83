#pragma once
// Helpers shared by the *_posix.cc files only. Never include from a header outside platform/.

#include <dirent.h>

#include <cerrno>
#include <string>
#include <string_view>

#include "base/error.h"

namespace gpuhost::platform {

// "<context>: <strerror>", with ENOENT / ENOTDIR mapped to not_found and EACCES / EPERM to
// permission_denied.
[[nodiscard]] Error posix_error(std::string_view context, int error_number);

// Owns a file descriptor; closes it on destruction. -1 means empty.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : m_fd(fd) {}
  UniqueFd(UniqueFd&& o) noexcept : m_fd(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  [[nodiscard]] int get() const { return m_fd; }
  [[nodiscard]] bool valid() const { return m_fd >= 0; }
  int release() {
    int fd = m_fd;
    m_fd = -1;
    return fd;
  }
  void reset(int fd = -1);

 private:
  int m_fd = -1;
};

// Reads a small text file (procfs, sysfs) whole; empty when it cannot be read.
[[nodiscard]] std::string read_text_file_or_empty(const char* path);

// Owns a DIR* from opendir; closes it on destruction. nullptr means empty.
class DirStream {
 public:
  explicit DirStream(DIR* dir) : m_dir(dir) {}
  DirStream(const DirStream&) = delete;
  DirStream& operator=(const DirStream&) = delete;
  ~DirStream() {
    if (m_dir) ::closedir(m_dir);
  }
  [[nodiscard]] DIR* get() const { return m_dir; }

 private:
  DIR* m_dir;
};

}  // namespace gpuhost::platform
