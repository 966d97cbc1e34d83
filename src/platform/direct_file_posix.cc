#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <new>

#include "platform/direct_file.h"
#include "platform/posix_util.h"

namespace gpuhost::platform {

AlignedBuffer::AlignedBuffer(std::size_t bytes) {
  m_size = (bytes + k_direct_io_alignment - 1) / k_direct_io_alignment * k_direct_io_alignment;
  void* p = nullptr;
  if (::posix_memalign(&p, k_direct_io_alignment, m_size == 0 ? k_direct_io_alignment : m_size) != 0)
    throw std::bad_alloc();
  m_data.reset(static_cast<std::byte*>(p));
}

void AlignedBuffer::Free::operator()(std::byte* p) const { std::free(p); }

Result<DirectFile> DirectFile::open(const std::filesystem::path& path, DirectFileOptions options) {
  int flags = options.read_only ? (O_RDONLY | O_CLOEXEC)
                                : (O_RDWR | O_CLOEXEC | (options.create_new ? (O_CREAT | O_EXCL) : 0));
  DirectFile file;
  file.m_path = path;
  int fd = -1;
  if (options.preferred == IoMode::direct) {
    fd = ::open(path.c_str(), flags | O_DIRECT, 0600);
    // tmpfs and some FUSE filesystems answer EINVAL to O_DIRECT. With O_EXCL the first attempt
    // may already have created the file, so the retry opens it without O_EXCL.
    if (fd < 0 && errno == EINVAL) {
      fd = ::open(path.c_str(), (flags & ~O_EXCL) & ~O_CREAT, 0600);
      if (fd < 0 && errno == ENOENT) fd = ::open(path.c_str(), flags, 0600);
      file.m_mode = IoMode::buffered;
    } else {
      file.m_mode = IoMode::direct;
    }
  } else {
    fd = ::open(path.c_str(), flags, 0600);
    file.m_mode = IoMode::buffered;
  }
  if (fd < 0) return std::unexpected(posix_error("opening " + path.string(), errno));
  file.m_handle = fd;
  return file;
}

DirectFile::DirectFile(DirectFile&& other) noexcept
    : m_handle(other.m_handle), m_mode(other.m_mode), m_path(std::move(other.m_path)) {
  other.m_handle = -1;
}

DirectFile& DirectFile::operator=(DirectFile&& other) noexcept {
  if (this != &other) {
    close();
    m_handle = other.m_handle;
    m_mode = other.m_mode;
    m_path = std::move(other.m_path);
    other.m_handle = -1;
  }
  return *this;
}

DirectFile::~DirectFile() { close(); }

void DirectFile::close() {
  if (m_handle >= 0) ::close(static_cast<int>(m_handle));
  m_handle = -1;
}

Result<void> DirectFile::read_at(void* data, std::size_t bytes, std::uint64_t offset) const {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pread(static_cast<int>(m_handle), p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(posix_error("reading " + m_path.string(), errno));
    if (n == 0) return make_error(ErrorCode::io_error, "reading " + m_path.string() + ": unexpected end of file");
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

Result<void> DirectFile::write_at(const void* data, std::size_t bytes, std::uint64_t offset) const {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    ssize_t n = ::pwrite(static_cast<int>(m_handle), p, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::unexpected(posix_error("writing " + m_path.string(), errno));
    p += n;
    bytes -= static_cast<std::size_t>(n);
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

Result<void> DirectFile::reserve(std::uint64_t bytes) const {
  int rc = ::posix_fallocate(static_cast<int>(m_handle), 0, static_cast<off_t>(bytes));
  if (rc == EOPNOTSUPP || rc == EINVAL) return {};
  if (rc != 0) return std::unexpected(posix_error("reserving space for " + m_path.string(), rc));
  return {};
}

Result<void> DirectFile::sync() const {
  if (::fdatasync(static_cast<int>(m_handle)) != 0)
    return std::unexpected(posix_error("flushing " + m_path.string(), errno));
  return {};
}

Result<bool> filesystem_is_read_only(const std::filesystem::path& path) {
  struct statvfs st {};
  if (::statvfs(path.c_str(), &st) != 0) return std::unexpected(posix_error("statvfs " + path.string(), errno));
  return (st.f_flag & ST_RDONLY) != 0;
}

}  // namespace gpuhost::platform
