#include <algorithm>
#include <atomic>
#include <random>

#include "platform/files.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

// Messages and results are UTF-8, whatever the narrow encoding of path::string() is.
std::string utf8(const std::filesystem::path& path) {
  return to_utf8(path.wstring());
}

// A temp file that is deleted unless committed (moved into place).
class TempFile {
 public:
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile() {
    m_handle.reset();
    if (!m_path.empty()) DeleteFileW(m_path.c_str());
  }

  Result<void> create(const std::filesystem::path& target) {
    static std::atomic<unsigned> counter{0};
    std::random_device random;
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::wstring name = L"." + target.filename().wstring() + L".tmp-" +
                          std::to_wstring(GetCurrentProcessId()) + L"-" + std::to_wstring(counter++) + L"-" +
                          std::to_wstring(random() % 1000000);
      std::wstring path = (target.parent_path() / name).wstring();
      HANDLE h =
          CreateFileW(path.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr);
      if (h != INVALID_HANDLE_VALUE) {
        m_handle.reset(h);
        m_path = path;
        return {};
      }
      DWORD error = GetLastError();
      if (error != ERROR_FILE_EXISTS && error != ERROR_ALREADY_EXISTS)
        return std::unexpected(win32_error("creating a temp file next to " + utf8(target), error));
    }
    return make_error(ErrorCode::io_error,
                      "creating a temp file next to " + utf8(target) + ": too many collisions");
  }

  [[nodiscard]] HANDLE handle() const { return m_handle.get(); }
  [[nodiscard]] const std::wstring& path() const { return m_path; }
  [[nodiscard]] std::string name() const { return to_utf8(m_path); }
  void close() { m_handle.reset(); }
  void committed() { m_path.clear(); }

 private:
  UniqueHandle m_handle;
  std::wstring m_path;
};

class FindHandle {
 public:
  explicit FindHandle(HANDLE h) : m_handle(h) {}
  FindHandle(const FindHandle&) = delete;
  FindHandle& operator=(const FindHandle&) = delete;
  ~FindHandle() {
    if (m_handle != INVALID_HANDLE_VALUE) FindClose(m_handle);
  }
  [[nodiscard]] HANDLE get() const { return m_handle; }

 private:
  HANDLE m_handle;
};

}  // namespace

Result<std::string> read_file(const std::filesystem::path& path, std::size_t max_bytes) {
  const std::string what = "reading " + utf8(path);
  DWORD attributes = GetFileAttributesW(path.c_str());
  if (attributes != INVALID_FILE_ATTRIBUTES && (attributes & FILE_ATTRIBUTE_DIRECTORY))
    return make_error(ErrorCode::io_error, what + ": is a directory");
  UniqueHandle file(CreateFileW(path.c_str(), GENERIC_READ,
                                FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr));
  if (!file.valid()) return std::unexpected(win32_error(what, GetLastError()));
  LARGE_INTEGER size{};
  if (GetFileSizeEx(file.get(), &size) && static_cast<std::uint64_t>(size.QuadPart) > max_bytes)
    return make_error(ErrorCode::io_error, what + ": larger than " + std::to_string(max_bytes) + " bytes");
  std::string contents;
  contents.reserve(static_cast<std::size_t>(size.QuadPart));
  char buffer[65536];
  for (;;) {
    DWORD got = 0;
    if (!ReadFile(file.get(), buffer, sizeof buffer, &got, nullptr))
      return std::unexpected(win32_error(what, GetLastError()));
    if (got == 0) break;
    if (contents.size() + got > max_bytes)
      return make_error(ErrorCode::io_error, what + ": larger than " + std::to_string(max_bytes) + " bytes");
    contents.append(buffer, got);
  }
  return contents;
}

Result<void> write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  const std::filesystem::path target = path.has_parent_path() ? path : std::filesystem::path(".") / path;
  TempFile temp;
  if (auto created = temp.create(target); !created) return created;
  while (!contents.empty()) {
    DWORD chunk = static_cast<DWORD>(std::min<std::size_t>(contents.size(), 1u << 30));
    DWORD written = 0;
    if (!WriteFile(temp.handle(), contents.data(), chunk, &written, nullptr))
      return std::unexpected(win32_error("writing " + temp.name(), GetLastError()));
    contents.remove_prefix(written);
  }
  if (!FlushFileBuffers(temp.handle()))
    return std::unexpected(win32_error("flushing " + temp.name(), GetLastError()));
  temp.close();
  if (!MoveFileExW(temp.path().c_str(), target.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
    return std::unexpected(win32_error("renaming " + temp.name() + " to " + utf8(target), GetLastError()));
  temp.committed();
  return {};
}

Result<std::vector<DirectoryEntry>> list_directory(const std::filesystem::path& path) {
  const std::string what = "listing " + utf8(path);
  WIN32_FIND_DATAW data;
  FindHandle find(FindFirstFileExW((path / L"*").c_str(), FindExInfoBasic, &data, FindExSearchNameMatch,
                                   nullptr, FIND_FIRST_EX_LARGE_FETCH));
  std::vector<DirectoryEntry> entries;
  if (find.get() == INVALID_HANDLE_VALUE) {
    DWORD error = GetLastError();
    if (error == ERROR_FILE_NOT_FOUND && GetFileAttributesW(path.c_str()) != INVALID_FILE_ATTRIBUTES)
      return entries;  // an empty drive root has not even "." and ".."
    return std::unexpected(win32_error(what, error));
  }
  do {
    std::wstring_view name(data.cFileName);
    if (name == L"." || name == L"..") continue;
    DirectoryEntry entry;
    entry.name = to_utf8(name);
    entry.is_directory = (data.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) != 0;
    entry.is_symlink =
        (data.dwFileAttributes & FILE_ATTRIBUTE_REPARSE_POINT) && data.dwReserved0 == IO_REPARSE_TAG_SYMLINK;
    entry.size =
        entry.is_directory ? 0 : (static_cast<std::uint64_t>(data.nFileSizeHigh) << 32) | data.nFileSizeLow;
    entries.push_back(std::move(entry));
  } while (FindNextFileW(find.get(), &data));
  DWORD error = GetLastError();
  if (error != ERROR_NO_MORE_FILES) return std::unexpected(win32_error(what, error));
  std::sort(entries.begin(), entries.end(),
            [](const DirectoryEntry& a, const DirectoryEntry& b) { return a.name < b.name; });
  return entries;
}

Result<std::chrono::system_clock::time_point> modified_time(const std::filesystem::path& path) {
  WIN32_FILE_ATTRIBUTE_DATA data;
  if (!GetFileAttributesExW(path.c_str(), GetFileExInfoStandard, &data))
    return std::unexpected(win32_error("reading the time of " + utf8(path), GetLastError()));
  // FILETIME: 100 ns ticks since 1601-01-01; 11644473600 s before the Unix epoch.
  const ULONGLONG ticks = (static_cast<ULONGLONG>(data.ftLastWriteTime.dwHighDateTime) << 32) |
                          data.ftLastWriteTime.dwLowDateTime;
  const auto since_1601 = std::chrono::duration<long long, std::ratio<1, 10'000'000>>(static_cast<long long>(ticks));
  const auto since_epoch = since_1601 - std::chrono::seconds(11'644'473'600LL);
  return std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::system_clock::duration>(since_epoch));
}

Result<DiskSpace> disk_space(const std::filesystem::path& path) {
  ULARGE_INTEGER available{}, total{}, free{};
  if (!GetDiskFreeSpaceExW(path.c_str(), &available, &total, &free))
    return std::unexpected(win32_error("measuring free space on " + utf8(path), GetLastError()));
  return DiskSpace{total.QuadPart, free.QuadPart, available.QuadPart};
}

Result<std::string> read_symlink(const std::filesystem::path& path) {
  // Parsing REPARSE_DATA_BUFFER by hand buys nothing over the standard library here.
  std::error_code ec;
  std::filesystem::file_status status = std::filesystem::symlink_status(path, ec);
  if (ec || status.type() == std::filesystem::file_type::not_found)
    return make_error(ErrorCode::not_found, "reading link " + utf8(path) + ": no such file");
  if (status.type() != std::filesystem::file_type::symlink)
    return make_error(ErrorCode::invalid_argument, "reading link " + utf8(path) + ": not a symbolic link");
  std::filesystem::path target = std::filesystem::read_symlink(path, ec);
  if (ec) return make_error(ErrorCode::io_error, "reading link " + utf8(path) + ": " + ec.message());
  return utf8(target);
}

}  // namespace gpuhost::platform

namespace gpuhost::platform {

struct AppendFile::State {
  UniqueHandle handle;
  std::filesystem::path path;
};

AppendFile::AppendFile(std::unique_ptr<State> state) : m_state(std::move(state)) {}
AppendFile::AppendFile(AppendFile&& other) noexcept = default;
AppendFile& AppendFile::operator=(AppendFile&& other) noexcept = default;
AppendFile::~AppendFile() = default;

Result<AppendFile> AppendFile::open(const std::filesystem::path& path) {
  // FILE_APPEND_DATA without FILE_WRITE_DATA makes every WriteFile an append (the CreateFile
  // "File Security and Access Rights" page); Go's os.OpenFile(O_APPEND) opens files the same way
  // and syncs them with FlushFileBuffers, which accepts append-only handles.
  UniqueHandle handle(CreateFileW(path.c_str(), FILE_APPEND_DATA | FILE_READ_ATTRIBUTES | SYNCHRONIZE,
                                  FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                  OPEN_ALWAYS, FILE_ATTRIBUTE_NORMAL, nullptr));
  if (!handle.valid())
    return std::unexpected(win32_error("opening " + utf8(path) + " for appending", GetLastError()));
  return AppendFile(std::make_unique<State>(State{std::move(handle), path}));
}

Result<void> AppendFile::append(std::string_view data) {
  while (!data.empty()) {
    DWORD chunk = static_cast<DWORD>(std::min<std::size_t>(data.size(), 1u << 30));
    DWORD written = 0;
    if (!WriteFile(m_state->handle.get(), data.data(), chunk, &written, nullptr))
      return std::unexpected(win32_error("appending to " + utf8(m_state->path), GetLastError()));
    data.remove_prefix(written);
  }
  return {};
}

Result<void> AppendFile::sync() {
  if (!FlushFileBuffers(m_state->handle.get()))
    return std::unexpected(win32_error("flushing " + utf8(m_state->path), GetLastError()));
  return {};
}

Result<void> AppendFile::truncate(std::uint64_t size) {
  // An append-only handle cannot set the end of file: that needs FILE_WRITE_DATA, so a second
  // handle does it (our own handle shares writing).
  const std::string what = "truncating " + utf8(m_state->path);
  UniqueHandle writer(CreateFileW(m_state->path.c_str(), GENERIC_WRITE,
                                  FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                  OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr));
  if (!writer.valid()) return std::unexpected(win32_error(what, GetLastError()));
  FILE_END_OF_FILE_INFO end{};
  end.EndOfFile.QuadPart = static_cast<LONGLONG>(size);
  if (!SetFileInformationByHandle(writer.get(), FileEndOfFileInfo, &end, sizeof end))
    return std::unexpected(win32_error(what, GetLastError()));
  if (!FlushFileBuffers(writer.get())) return std::unexpected(win32_error(what, GetLastError()));
  return {};
}

Result<std::uint64_t> AppendFile::size() const {
  LARGE_INTEGER size{};
  if (!GetFileSizeEx(m_state->handle.get(), &size))
    return std::unexpected(win32_error("measuring " + utf8(m_state->path), GetLastError()));
  return static_cast<std::uint64_t>(size.QuadPart);
}

const std::filesystem::path& AppendFile::path() const {
  return m_state->path;
}

Result<void> sync_directory(const std::filesystem::path&) {
  return {};
}

}  // namespace gpuhost::platform
