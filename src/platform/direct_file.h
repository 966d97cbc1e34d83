#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>

#include "base/error.h"

namespace gpuhost::platform {

// How a DirectFile reaches the disk. `direct` bypasses the OS page cache (O_DIRECT on Linux,
// FILE_FLAG_NO_BUFFERING on Windows): offsets, sizes and buffer addresses must be multiples of
// k_direct_io_alignment. `buffered` is the fallback on filesystems that refuse direct I/O
// (tmpfs, some network and FUSE filesystems); measurements through it include cache effects.
enum class IoMode { direct, buffered };

// Alignment that satisfies direct I/O on every sector size in use (512 B and 4 KiB).
inline constexpr std::size_t k_direct_io_alignment = 4096;

// A heap buffer aligned for direct I/O. Move-only; frees on destruction.
class AlignedBuffer {
 public:
  // `bytes` is rounded up to k_direct_io_alignment. Throws std::bad_alloc like new.
  explicit AlignedBuffer(std::size_t bytes);
  [[nodiscard]] std::byte* data() const { return m_data.get(); }
  [[nodiscard]] std::size_t size() const { return m_size; }

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  std::unique_ptr<std::byte, Free> m_data;
  std::size_t m_size = 0;
};

struct DirectFileOptions {
  IoMode preferred = IoMode::direct;  // direct falls back to buffered when the filesystem refuses
  bool create_new = true;             // create the file; fail when it exists
  // Open an existing file for reading only (create_new is ignored). Windows shares it for read,
  // write and delete, so a writer replacing or deleting the file (a trainer rewriting its
  // checkpoint) is never blocked by our reading it.
  bool read_only = false;
};

// A file opened for positioned reads and writes that bypass the page cache where the filesystem
// allows. Read and write calls are independent (pread/pwrite; ReadFile/WriteFile with an
// OVERLAPPED offset on a handle opened with FILE_FLAG_OVERLAPPED), so several threads may issue
// them at once: that is how callers get queue depth without an async I/O library. Move-only;
// closes on destruction but never deletes the file.
class DirectFile {
 public:
  [[nodiscard]] static Result<DirectFile> open(const std::filesystem::path& path, DirectFileOptions options);

  DirectFile(DirectFile&& other) noexcept;
  DirectFile& operator=(DirectFile&& other) noexcept;
  DirectFile(const DirectFile&) = delete;
  DirectFile& operator=(const DirectFile&) = delete;
  ~DirectFile();

  [[nodiscard]] IoMode mode() const { return m_mode; }

  // REQUIRES (direct mode): `data`, `bytes` and `offset` aligned to k_direct_io_alignment.
  // Thread-safe. Short transfers are an io_error (callers never read past the end).
  [[nodiscard]] Result<void> read_at(void* data, std::size_t bytes, std::uint64_t offset) const;
  [[nodiscard]] Result<void> write_at(const void* data, std::size_t bytes, std::uint64_t offset) const;
  // Reserves `bytes` of disk space for the file (posix_fallocate; on Windows FileAllocationInfo),
  // so later writes do not pay for block allocation, as fio lays out its files
  // (fio's fallocate=native default). Filesystems without the call are not an error.
  [[nodiscard]] Result<void> reserve(std::uint64_t bytes) const;
  // Flushes written data to the device (fdatasync / FlushFileBuffers).
  [[nodiscard]] Result<void> sync() const;

 private:
  DirectFile() = default;
  void close();

  std::intptr_t m_handle = -1;  // fd on POSIX, HANDLE on Windows; -1 when closed
  IoMode m_mode = IoMode::direct;
  std::filesystem::path m_path;
};

// Whether the filesystem holding `path` is mounted read-only (statvfs ST_RDONLY; on Windows
// GetVolumeInformationW FILE_READ_ONLY_VOLUME).
[[nodiscard]] Result<bool> filesystem_is_read_only(const std::filesystem::path& path);

}  // namespace gpuhost::platform
