#pragma once

#include <cstdint>
#include <filesystem>

#include "base/error.h"

namespace gpuhost::platform {

// An exclusive advisory lock on a file (created if absent), held until destruction or until the
// process dies (flock / LockFileEx: the OS releases it even after SIGKILL). Used so that two
// supervisors never run the same job. Move-only.
class FileLock {
 public:
  // Errors: unavailable when another process holds the lock; io_error otherwise.
  [[nodiscard]] static Result<FileLock> try_lock(const std::filesystem::path& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

 private:
  explicit FileLock(std::intptr_t handle) : m_handle(handle) {}
  std::intptr_t m_handle = -1;
};

}  // namespace gpuhost::platform
