#include "platform/launch_win32.h"

#include <algorithm>
#include <atomic>
#include <set>

#include "base/strings.h"
#include "platform/environment.h"

namespace gpuhost::platform::launch {
namespace {

bool is_file(const std::wstring& path) {
  DWORD attributes = GetFileAttributesW(path.c_str());
  return attributes != INVALID_FILE_ATTRIBUTES && !(attributes & FILE_ATTRIBUTE_DIRECTORY);
}

std::vector<std::wstring> executable_extensions() {
  std::string pathext = get_env("PATHEXT").value_or(".COM;.EXE;.BAT;.CMD");
  std::vector<std::wstring> out;
  for (const std::string& ext : split(pathext, ';'))
    if (!trim(ext).empty()) out.push_back(to_wide(trim(ext)));
  return out;
}

// `base` as given when its file name has an extension, then with each PATHEXT extension (as
// CreateProcess and cmd.exe resolve names).
std::vector<std::wstring> candidates(const std::wstring& base, const std::vector<std::wstring>& extensions) {
  std::vector<std::wstring> out;
  std::size_t name_start = base.find_last_of(L"\\/:");
  name_start = name_start == std::wstring::npos ? 0 : name_start + 1;
  if (base.find(L'.', name_start) != std::wstring::npos) out.push_back(base);
  for (const std::wstring& ext : extensions) out.push_back(base + ext);
  return out;
}

std::wstring full_path(const std::wstring& path) {
  DWORD n = GetFullPathNameW(path.c_str(), 0, nullptr, nullptr);
  if (n == 0) return path;
  std::wstring out(n, L'\0');
  n = GetFullPathNameW(path.c_str(), n, out.data(), nullptr);
  out.resize(n);
  return out;
}

// Quoting that CommandLineToArgvW and the MSVC runtime undo exactly: backslashes are literal
// except before a quote. ("Everyone quotes command line arguments the wrong way", D. Colascione,
// Microsoft Old New Thing / MSDN blogs, 2011.)
std::wstring quote_argument(const std::wstring& arg) {
  if (!arg.empty() && arg.find_first_of(L" \t\n\v\"") == std::wstring::npos) return arg;
  std::wstring out = L"\"";
  for (auto it = arg.begin();; ++it) {
    std::size_t backslashes = 0;
    while (it != arg.end() && *it == L'\\') {
      ++it;
      ++backslashes;
    }
    if (it == arg.end()) {
      out.append(backslashes * 2, L'\\');
      break;
    }
    if (*it == L'"') {
      out.append(backslashes * 2 + 1, L'\\');
    } else {
      out.append(backslashes, L'\\');
    }
    out.push_back(*it);
  }
  out.push_back(L'"');
  return out;
}

std::wstring_view variable_name(std::wstring_view entry) {
  // Skip the first character: hidden entries like "=C:=C:\work" start with '='.
  std::size_t eq = entry.find(L'=', 1);
  return eq == std::wstring_view::npos ? entry : entry.substr(0, eq);
}

int compare_names(std::wstring_view a, std::wstring_view b) {
  return CompareStringOrdinal(a.data(), static_cast<int>(a.size()), b.data(), static_cast<int>(b.size()),
                              TRUE);
}

}  // namespace

std::vector<std::string> search_path(std::string_view name, std::string_view path_value, Matches matches) {
  std::vector<std::string> found;
  if (name.empty()) return found;
  const std::vector<std::wstring> extensions = executable_extensions();
  if (name.find_first_of("\\/:") != std::string_view::npos) {
    for (const std::wstring& candidate : candidates(to_wide(name), extensions)) {
      if (is_file(candidate)) {
        found.push_back(to_utf8(candidate));
        break;
      }
    }
    return found;
  }
  std::set<std::wstring> seen;
  for (std::string dir : split(path_value, ';')) {
    std::erase(dir, '"');
    if (trim(dir).empty()) continue;
    if (dir.back() != '\\' && dir.back() != '/') dir += '\\';
    for (const std::wstring& candidate : candidates(to_wide(dir + std::string(name)), extensions)) {
      if (!is_file(candidate)) continue;
      std::wstring key = full_path(candidate);
      CharLowerBuffW(key.data(), static_cast<DWORD>(key.size()));
      if (seen.insert(key).second) found.push_back(to_utf8(candidate));
      if (matches == Matches::first) return found;
      break;  // one file per directory, as CreateProcess would pick
    }
  }
  return found;
}

Result<std::string> resolve_program(const std::vector<std::string>& argv,
                                    const std::vector<std::pair<std::string, std::string>>& environment) {
  if (argv.empty() || argv[0].empty())
    return make_error(ErrorCode::invalid_argument, "running a process: no program given");
  const std::string& program = argv[0];
  std::string path_value = get_env("PATH").value_or("");
  for (const auto& [name, value] : environment)
    if (iequals(name, "PATH")) path_value = value;
  std::vector<std::string> resolved = search_path(program, path_value, Matches::first);
  if (resolved.empty()) {
    bool has_dir = program.find_first_of("\\/:") != std::string::npos;
    return make_error(ErrorCode::not_found, "running " + program + ": " +
                                                (has_dir ? "no such executable file" : "not found on PATH"));
  }
  return std::move(resolved.front());
}

std::wstring command_line(const std::vector<std::string>& argv) {
  std::wstring line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line.push_back(L' ');
    line += quote_argument(to_wide(arg));
  }
  return line;
}

std::wstring environment_block(const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::wstring> entries;
  if (wchar_t* block = GetEnvironmentStringsW()) {
    for (const wchar_t* entry = block; *entry; entry += wcslen(entry) + 1) entries.emplace_back(entry);
    FreeEnvironmentStringsW(block);
  }
  for (const auto& [name, value] : overrides) {
    std::wstring wide_name = to_wide(name);
    std::erase_if(entries, [&](const std::wstring& e) {
      return compare_names(variable_name(e), wide_name) == CSTR_EQUAL;
    });
    entries.push_back(wide_name + L"=" + to_wide(value));
  }
  std::sort(entries.begin(), entries.end(), [](const std::wstring& a, const std::wstring& b) {
    return compare_names(variable_name(a), variable_name(b)) == CSTR_LESS_THAN;
  });
  std::wstring block;
  for (const std::wstring& entry : entries) {
    block += entry;
    block.push_back(L'\0');
  }
  if (block.empty()) block.push_back(L'\0');
  block.push_back(L'\0');
  return block;
}

Result<UniqueHandle> open_null_input() {
  SECURITY_ATTRIBUTES inheritable{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  UniqueHandle null_input(CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inheritable,
                                      OPEN_EXISTING, 0, nullptr));
  if (!null_input.valid()) return std::unexpected(win32_error("opening NUL", GetLastError()));
  return null_input;
}

Result<UniqueHandle> make_job() {
  UniqueHandle job(CreateJobObjectW(nullptr, nullptr));
  if (!job.valid()) return std::unexpected(win32_error("creating a job object", GetLastError()));
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits{};
  limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
  if (!SetInformationJobObject(job.get(), JobObjectExtendedLimitInformation, &limits, sizeof limits))
    return std::unexpected(win32_error("configuring a job object", GetLastError()));
  return job;
}

Result<void> PipeEnd::create(bool child_writes, UniqueHandle& child_end) {
  static std::atomic<unsigned> counter{0};
  std::wstring name = L"\\\\.\\pipe\\gpuhost-" + std::to_wstring(GetCurrentProcessId()) + L"-" +
                      std::to_wstring(counter++) + L"-" + std::to_wstring(GetTickCount64());
  DWORD open_mode = (child_writes ? PIPE_ACCESS_INBOUND : PIPE_ACCESS_OUTBOUND) | FILE_FLAG_OVERLAPPED |
                    FILE_FLAG_FIRST_PIPE_INSTANCE;
  m_handle.reset(CreateNamedPipeW(
      name.c_str(), open_mode, PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
      1, k_buffer_size, k_buffer_size, 0, nullptr));
  if (!m_handle.valid()) return std::unexpected(win32_error("creating a pipe", GetLastError()));
  SECURITY_ATTRIBUTES inheritable{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  DWORD access = child_writes ? GENERIC_WRITE : (GENERIC_READ | FILE_WRITE_ATTRIBUTES);
  child_end.reset(CreateFileW(name.c_str(), access, 0, &inheritable, OPEN_EXISTING, 0, nullptr));
  if (!child_end.valid()) return std::unexpected(win32_error("opening a pipe", GetLastError()));
  m_event.reset(CreateEventW(nullptr, TRUE, FALSE, nullptr));
  if (!m_event.valid()) return std::unexpected(win32_error("creating an event", GetLastError()));
  m_buffer.resize(k_buffer_size);
  return {};
}

void PipeEnd::start_read() {
  m_overlapped = {};
  m_overlapped.hEvent = m_event.get();
  if (ReadFile(m_handle.get(), m_buffer.data(), k_buffer_size, nullptr, &m_overlapped) ||
      GetLastError() == ERROR_IO_PENDING)
    m_pending = true;
  else
    close();
}

std::optional<std::string_view> PipeEnd::complete_read() {
  DWORD got = 0;
  m_pending = false;
  if (!GetOverlappedResult(m_handle.get(), &m_overlapped, &got, FALSE)) {
    close();  // ERROR_BROKEN_PIPE: every writer, grandchildren included, has gone
    return std::nullopt;
  }
  return std::string_view(m_buffer.data(), got);
}

void PipeEnd::finish_read(std::string& out, std::size_t limit, bool& truncated) {
  std::optional<std::string_view> chunk = complete_read();
  if (!chunk) return;
  std::size_t room = limit > out.size() ? limit - out.size() : 0;
  std::size_t keep = std::min(room, chunk->size());
  out.append(chunk->data(), keep);
  if (keep < chunk->size()) truncated = true;
  start_read();
}

void PipeEnd::start_write(std::string_view data, std::size_t offset) {
  if (offset >= data.size()) {
    close();
    return;
  }
  DWORD chunk = static_cast<DWORD>(std::min<std::size_t>(data.size() - offset, k_buffer_size));
  m_overlapped = {};
  m_overlapped.hEvent = m_event.get();
  if (WriteFile(m_handle.get(), data.data() + offset, chunk, nullptr, &m_overlapped) ||
      GetLastError() == ERROR_IO_PENDING)
    m_pending = true;
  else
    close();  // ERROR_NO_DATA / BROKEN_PIPE: the child closed its stdin
}

std::size_t PipeEnd::finish_write() {
  DWORD put = 0;
  m_pending = false;
  if (!GetOverlappedResult(m_handle.get(), &m_overlapped, &put, FALSE)) {
    close();
    return 0;
  }
  return put;
}

void PipeEnd::close() {
  if (m_pending) {
    CancelIoEx(m_handle.get(), &m_overlapped);
    DWORD ignored = 0;
    GetOverlappedResult(m_handle.get(), &m_overlapped, &ignored, TRUE);
    m_pending = false;
  }
  m_handle.reset();
}

AttributeList::~AttributeList() {
  if (m_initialized) DeleteProcThreadAttributeList(get());
}

Result<void> AttributeList::inherit_only(HANDLE* handles, std::size_t count) {
  SIZE_T size = 0;
  InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
  m_storage.resize(size);
  if (!InitializeProcThreadAttributeList(get(), 1, 0, &size))
    return std::unexpected(win32_error("preparing process attributes", GetLastError()));
  m_initialized = true;
  if (!UpdateProcThreadAttribute(get(), 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, handles, count * sizeof(HANDLE),
                                 nullptr, nullptr))
    return std::unexpected(win32_error("preparing process attributes", GetLastError()));
  return {};
}

}  // namespace gpuhost::platform::launch
