#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "platform/file_lock.h"
#include "platform/posix_util.h"

namespace gpuhost::platform {

// flock locks belong to the open file description, so a second open() of the same file, even in
// this process, is refused too (flock(2)).
Result<FileLock> FileLock::try_lock(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    Error error = posix_error("opening lock file " + path.string(), errno);
    error.code = ErrorCode::io_error;
    return std::unexpected(std::move(error));
  }
  for (;;) {
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) == 0) break;
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK)
      return make_error(ErrorCode::unavailable, "another gpuhost run holds " + path.string());
    Error error = posix_error("locking " + path.string(), errno);
    error.code = ErrorCode::io_error;
    return std::unexpected(std::move(error));
  }
  return FileLock(fd.release());
}

FileLock::FileLock(FileLock&& other) noexcept : m_handle(other.m_handle) {
  other.m_handle = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (m_handle >= 0) ::close(static_cast<int>(m_handle));
    m_handle = other.m_handle;
    other.m_handle = -1;
  }
  return *this;
}

FileLock::~FileLock() {
  if (m_handle >= 0) ::close(static_cast<int>(m_handle));
}

}  // namespace gpuhost::platform
