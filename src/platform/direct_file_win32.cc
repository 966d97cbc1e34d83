#include <windows.h>

#include <malloc.h>

#include <new>

#include "platform/direct_file.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {

AlignedBuffer::AlignedBuffer(std::size_t bytes) {
  m_size = (bytes + k_direct_io_alignment - 1) / k_direct_io_alignment * k_direct_io_alignment;
  void* p = _aligned_malloc(m_size == 0 ? k_direct_io_alignment : m_size, k_direct_io_alignment);
  if (!p) throw std::bad_alloc();
  m_data.reset(static_cast<std::byte*>(p));
}

void AlignedBuffer::Free::operator()(std::byte* p) const { _aligned_free(p); }

namespace {

HANDLE handle_of(std::intptr_t h) { return reinterpret_cast<HANDLE>(h); }

// One positioned transfer on an overlapped handle, waited for on a private event so that several
// threads can have transfers in flight on the same handle.
Result<void> transfer(std::intptr_t handle, void* data, std::size_t bytes, std::uint64_t offset, bool write,
                      const std::filesystem::path& path) {
  auto* p = static_cast<char*>(data);
  HANDLE event = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  if (!event) return std::unexpected(win32_error("CreateEventW", GetLastError()));
  Result<void> result;
  while (bytes > 0) {
    OVERLAPPED ov{};
    ov.Offset = static_cast<DWORD>(offset & 0xffffffffu);
    ov.OffsetHigh = static_cast<DWORD>(offset >> 32);
    ov.hEvent = event;
    DWORD chunk = bytes > (1u << 30) ? (1u << 30) : static_cast<DWORD>(bytes);
    DWORD done = 0;
    BOOL ok = write ? WriteFile(handle_of(handle), p, chunk, nullptr, &ov) : ReadFile(handle_of(handle), p, chunk, nullptr, &ov);
    if (!ok && GetLastError() != ERROR_IO_PENDING) {
      result = std::unexpected(win32_error((write ? "writing " : "reading ") + path.string(), GetLastError()));
      break;
    }
    if (!GetOverlappedResult(handle_of(handle), &ov, &done, TRUE)) {
      result = std::unexpected(win32_error((write ? "writing " : "reading ") + path.string(), GetLastError()));
      break;
    }
    if (done == 0) {
      result = make_error(ErrorCode::io_error, (write ? "writing " : "reading ") + path.string() + ": no progress");
      break;
    }
    p += done;
    bytes -= done;
    offset += done;
  }
  CloseHandle(event);
  return result;
}

}  // namespace

Result<DirectFile> DirectFile::open(const std::filesystem::path& path, DirectFileOptions options) {
  DirectFile file;
  file.m_path = path;
  DWORD disposition = (options.create_new && !options.read_only) ? CREATE_NEW : OPEN_EXISTING;
  DWORD access = options.read_only ? GENERIC_READ : (GENERIC_READ | GENERIC_WRITE);
  DWORD share = options.read_only ? (FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE)
                                  : (FILE_SHARE_READ | FILE_SHARE_DELETE);
  DWORD flags = FILE_FLAG_OVERLAPPED;
  if (options.preferred == IoMode::direct) flags |= FILE_FLAG_NO_BUFFERING | FILE_FLAG_WRITE_THROUGH;
  HANDLE h = CreateFileW(path.wstring().c_str(), access, share, nullptr, disposition, FILE_ATTRIBUTE_NORMAL | flags,
                         nullptr);
  file.m_mode = options.preferred;
  if (h == INVALID_HANDLE_VALUE && GetLastError() == ERROR_INVALID_PARAMETER && options.preferred == IoMode::direct) {
    h = CreateFileW(path.wstring().c_str(), access, share, nullptr, disposition,
                    FILE_ATTRIBUTE_NORMAL | FILE_FLAG_OVERLAPPED, nullptr);
    file.m_mode = IoMode::buffered;
  }
  if (h == INVALID_HANDLE_VALUE) return std::unexpected(win32_error("opening " + path.string(), GetLastError()));
  file.m_handle = reinterpret_cast<std::intptr_t>(h);
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
  if (m_handle != -1) CloseHandle(handle_of(m_handle));
  m_handle = -1;
}

Result<void> DirectFile::read_at(void* data, std::size_t bytes, std::uint64_t offset) const {
  return transfer(m_handle, data, bytes, offset, false, m_path);
}

Result<void> DirectFile::write_at(const void* data, std::size_t bytes, std::uint64_t offset) const {
  return transfer(m_handle, const_cast<void*>(data), bytes, offset, true, m_path);
}

Result<void> DirectFile::reserve(std::uint64_t bytes) const {
  FILE_ALLOCATION_INFO info{};
  info.AllocationSize.QuadPart = static_cast<LONGLONG>(bytes);
  if (!SetFileInformationByHandle(handle_of(m_handle), FileAllocationInfo, &info, sizeof info)) {
    DWORD error = GetLastError();
    if (error == ERROR_INVALID_PARAMETER || error == ERROR_NOT_SUPPORTED || error == ERROR_CALL_NOT_IMPLEMENTED) return {};
    return std::unexpected(win32_error("reserving space for " + m_path.string(), error));
  }
  return {};
}

Result<void> DirectFile::sync() const {
  if (!FlushFileBuffers(handle_of(m_handle)))
    return std::unexpected(win32_error("flushing " + m_path.string(), GetLastError()));
  return {};
}

Result<bool> filesystem_is_read_only(const std::filesystem::path& path) {
  std::error_code ec;
  auto absolute = std::filesystem::absolute(path, ec);
  std::wstring root = (ec ? path : absolute).root_path().wstring();
  if (root.empty()) root = L"\\";
  DWORD flags = 0;
  if (!GetVolumeInformationW(root.c_str(), nullptr, 0, nullptr, nullptr, &flags, nullptr, 0))
    return std::unexpected(win32_error("reading volume information of " + path.string(), GetLastError()));
  return (flags & FILE_READ_ONLY_VOLUME) != 0;
}

}  // namespace gpuhost::platform
