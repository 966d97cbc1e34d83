#include "platform/file_lock.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

void close_lock_handle(std::intptr_t handle) {
  if (handle != -1) CloseHandle(reinterpret_cast<HANDLE>(handle));
}

}  // namespace

// LockFileEx locks belong to the handle, so a second handle on the same file, even in this
// process, is refused too (LockFileEx, learn.microsoft.com).
Result<FileLock> FileLock::try_lock(const std::filesystem::path& path) {
  UniqueHandle file(CreateFileW(path.wstring().c_str(), GENERIC_READ | GENERIC_WRITE,
                                FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_ALWAYS,
                                FILE_ATTRIBUTE_NORMAL, nullptr));
  if (!file.valid()) {
    Error error = win32_error("opening lock file " + path.string(), GetLastError());
    error.code = ErrorCode::io_error;
    return std::unexpected(std::move(error));
  }
  OVERLAPPED whole_file{};
  if (!LockFileEx(file.get(), LOCKFILE_EXCLUSIVE_LOCK | LOCKFILE_FAIL_IMMEDIATELY, 0, MAXDWORD, MAXDWORD,
                  &whole_file)) {
    DWORD code = GetLastError();
    if (code == ERROR_LOCK_VIOLATION || code == ERROR_IO_PENDING)
      return make_error(ErrorCode::unavailable, "another gpuhost run holds " + path.string());
    Error error = win32_error("locking " + path.string(), code);
    error.code = ErrorCode::io_error;
    return std::unexpected(std::move(error));
  }
  return FileLock(reinterpret_cast<std::intptr_t>(file.release()));
}

FileLock::FileLock(FileLock&& other) noexcept : m_handle(other.m_handle) {
  other.m_handle = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    close_lock_handle(m_handle);
    m_handle = other.m_handle;
    other.m_handle = -1;
  }
  return *this;
}

// Closing the handle releases the lock.
FileLock::~FileLock() {
  close_lock_handle(m_handle);
}

}  // namespace gpuhost::platform
