#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>

#include "base/strings.h"
#include "platform/environment.h"
#include "platform/process.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

using Clock = std::chrono::steady_clock;

// When the child has exited but a grandchild still holds its stdout/stderr, we read for this
// long more, then terminate the job: run_process owns the whole tree.
constexpr auto k_drain_grace = std::chrono::milliseconds(500);
// After the job is terminated, how long its pipes get to report their last bytes.
constexpr auto k_final_drain = std::chrono::milliseconds(300);

enum class Matches { first, all };

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

std::wstring command_line(const std::vector<std::string>& argv) {
  std::wstring line;
  for (const std::string& arg : argv) {
    if (!line.empty()) line.push_back(L' ');
    line += quote_argument(to_wide(arg));
  }
  return line;
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

// The inherited environment with the overrides applied, as CreateProcessW wants it: sorted by
// name, case-insensitively, each "name=value" NUL-terminated, one more NUL at the end.
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

// One end of an overlapped named pipe, with at most one read or write in flight. The destructor
// cancels that operation and waits for it, so the buffer outlives the kernel's use of it.
class PipeEnd {
 public:
  PipeEnd() = default;
  PipeEnd(const PipeEnd&) = delete;
  PipeEnd& operator=(const PipeEnd&) = delete;
  ~PipeEnd() { close(); }

  // Creates the pipe; `child_end` receives the inheritable end the child uses.
  Result<void> create(bool child_writes, UniqueHandle& child_end) {
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

  [[nodiscard]] bool open() const { return m_handle.valid(); }
  [[nodiscard]] HANDLE event() const { return m_event.get(); }

  // Starts the next read; closes the pipe when the child's end is gone.
  void start_read() {
    m_overlapped = {};
    m_overlapped.hEvent = m_event.get();
    if (ReadFile(m_handle.get(), m_buffer.data(), k_buffer_size, nullptr, &m_overlapped) ||
        GetLastError() == ERROR_IO_PENDING)
      m_pending = true;
    else
      close();
  }

  // Appends what the finished read got (keeping at most `limit` bytes) and starts the next one.
  void finish_read(std::string& out, std::size_t limit, bool& truncated) {
    DWORD got = 0;
    m_pending = false;
    if (!GetOverlappedResult(m_handle.get(), &m_overlapped, &got, FALSE)) {
      close();  // ERROR_BROKEN_PIPE: every writer, grandchildren included, has gone
      return;
    }
    std::size_t room = limit > out.size() ? limit - out.size() : 0;
    std::size_t keep = std::min<std::size_t>(room, got);
    out.append(m_buffer.data(), keep);
    if (keep < got) truncated = true;
    start_read();
  }

  // Starts writing the rest of `data` from `offset`; closes the pipe when done or refused.
  void start_write(std::string_view data, std::size_t offset) {
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

  // Bytes the finished write took, or 0 after closing the pipe on failure.
  std::size_t finish_write() {
    DWORD put = 0;
    m_pending = false;
    if (!GetOverlappedResult(m_handle.get(), &m_overlapped, &put, FALSE)) {
      close();
      return 0;
    }
    return put;
  }

  void close() {
    if (m_pending) {
      CancelIoEx(m_handle.get(), &m_overlapped);
      DWORD ignored = 0;
      GetOverlappedResult(m_handle.get(), &m_overlapped, &ignored, TRUE);
      m_pending = false;
    }
    m_handle.reset();
  }

 private:
  static constexpr DWORD k_buffer_size = 64 * 1024;
  UniqueHandle m_handle;
  UniqueHandle m_event;
  OVERLAPPED m_overlapped{};
  std::vector<char> m_buffer;
  bool m_pending = false;
};

class AttributeList {
 public:
  AttributeList() = default;
  AttributeList(const AttributeList&) = delete;
  AttributeList& operator=(const AttributeList&) = delete;
  ~AttributeList() {
    if (m_initialized) DeleteProcThreadAttributeList(get());
  }

  // Limits inheritance to `handles`, so concurrent spawns elsewhere in gpuhost cannot leak theirs
  // into this child. `handles` must outlive CreateProcessW.
  Result<void> inherit_only(HANDLE* handles, std::size_t count) {
    SIZE_T size = 0;
    InitializeProcThreadAttributeList(nullptr, 1, 0, &size);
    m_storage.resize(size);
    if (!InitializeProcThreadAttributeList(get(), 1, 0, &size))
      return std::unexpected(win32_error("preparing process attributes", GetLastError()));
    m_initialized = true;
    if (!UpdateProcThreadAttribute(get(), 0, PROC_THREAD_ATTRIBUTE_HANDLE_LIST, handles,
                                   count * sizeof(HANDLE), nullptr, nullptr))
      return std::unexpected(win32_error("preparing process attributes", GetLastError()));
    return {};
  }
  [[nodiscard]] LPPROC_THREAD_ATTRIBUTE_LIST get() {
    return reinterpret_cast<LPPROC_THREAD_ATTRIBUTE_LIST>(m_storage.data());
  }

 private:
  std::vector<char> m_storage;
  bool m_initialized = false;
};

// A kill-on-close Job Object: closing it (this destructor) ends every process in the tree.
Result<UniqueHandle> make_job() {
  UniqueHandle job(CreateJobObjectW(nullptr, nullptr));
  if (!job.valid()) return std::unexpected(win32_error("creating a job object", GetLastError()));
  JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits{};
  limits.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
  if (!SetInformationJobObject(job.get(), JobObjectExtendedLimitInformation, &limits, sizeof limits))
    return std::unexpected(win32_error("configuring a job object", GetLastError()));
  return job;
}

}  // namespace

Result<ProcessResult> run_process(const ProcessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty())
    return make_error(ErrorCode::invalid_argument, "running a process: no program given");
  const std::string& program = options.argv[0];

  std::string path_value = get_env("PATH").value_or("");
  for (const auto& [name, value] : options.environment)
    if (iequals(name, "PATH")) path_value = value;
  std::vector<std::string> resolved = search_path(program, path_value, Matches::first);
  if (resolved.empty()) {
    bool has_dir = program.find_first_of("\\/:") != std::string::npos;
    return make_error(ErrorCode::not_found, "running " + program + ": " +
                                                (has_dir ? "no such executable file" : "not found on PATH"));
  }

  PipeEnd out, err, in;
  UniqueHandle child_out, child_err, child_in;
  if (auto made = out.create(true, child_out); !made) return std::unexpected(made.error());
  if (auto made = err.create(true, child_err); !made) return std::unexpected(made.error());
  const bool feed_stdin = options.stdin_text && !options.stdin_text->empty();
  if (feed_stdin) {
    if (auto made = in.create(false, child_in); !made) return std::unexpected(made.error());
  } else {
    SECURITY_ATTRIBUTES inheritable{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
    child_in.reset(CreateFileW(L"NUL", GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE, &inheritable,
                               OPEN_EXISTING, 0, nullptr));
    if (!child_in.valid()) return std::unexpected(win32_error("opening NUL", GetLastError()));
  }

  auto job = make_job();
  if (!job) return std::unexpected(job.error());

  HANDLE inherited[3] = {child_in.get(), child_out.get(), child_err.get()};
  AttributeList attributes;
  if (auto ready = attributes.inherit_only(inherited, 3); !ready) return std::unexpected(ready.error());
  STARTUPINFOEXW startup{};
  startup.StartupInfo.cb = sizeof startup;
  startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  startup.StartupInfo.hStdInput = child_in.get();
  startup.StartupInfo.hStdOutput = child_out.get();
  startup.StartupInfo.hStdError = child_err.get();
  startup.lpAttributeList = attributes.get();

  std::wstring application = to_wide(resolved.front());
  std::wstring line = command_line(options.argv);
  std::wstring env_block =
      options.environment.empty() ? std::wstring() : environment_block(options.environment);
  std::wstring directory = options.working_directory ? to_wide(*options.working_directory) : std::wstring();
  // Suspended until it is in the job, so nothing it starts can escape the job.
  DWORD flags = CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP | CREATE_NO_WINDOW | CREATE_UNICODE_ENVIRONMENT |
                EXTENDED_STARTUPINFO_PRESENT;
  PROCESS_INFORMATION info{};
  const auto start = Clock::now();
  if (!CreateProcessW(application.c_str(), line.data(), nullptr, nullptr, TRUE, flags,
                      env_block.empty() ? nullptr : env_block.data(),
                      directory.empty() ? nullptr : directory.c_str(), &startup.StartupInfo, &info)) {
    std::string context = "running " + resolved.front();
    if (options.working_directory) context += " in directory " + *options.working_directory;
    return std::unexpected(win32_error(context, GetLastError()));
  }
  UniqueHandle process(info.hProcess);
  UniqueHandle thread(info.hThread);
  if (!AssignProcessToJobObject(job->get(), process.get())) {
    Error error = win32_error("putting " + program + " into a job object", GetLastError());
    TerminateProcess(process.get(), 1);
    return std::unexpected(error);
  }
  ResumeThread(thread.get());
  thread.reset();
  child_in.reset();
  child_out.reset();
  child_err.reset();

  ProcessResult result;
  const std::string_view input = feed_stdin ? std::string_view(*options.stdin_text) : std::string_view();
  std::size_t input_offset = 0;
  out.start_read();
  err.start_read();
  if (feed_stdin) in.start_write(input, 0);

  enum class Phase { running, draining, killed };
  Phase phase = Phase::running;
  Clock::time_point limit = start + options.timeout;
  const Clock::time_point deadline = limit;
  for (;;) {
    if (phase != Phase::running && !out.open() && !err.open()) break;
    const auto now = Clock::now();
    if (now >= limit) {
      if (phase == Phase::killed) break;
      if (phase == Phase::running) {
        result.timed_out = true;
        TerminateJobObject(job->get(), 1);
        WaitForSingleObject(process.get(), 5000);
      } else {
        TerminateJobObject(job->get(), 1);  // leftovers that kept the pipes open
      }
      in.close();
      phase = Phase::killed;
      limit = now + k_final_drain;
      continue;
    }

    HANDLE handles[4];
    PipeEnd* owners[4] = {};
    DWORD count = 0;
    if (phase == Phase::running) handles[count++] = process.get();
    for (PipeEnd* pipe : {&out, &err, &in}) {
      if (!pipe->open()) continue;
      owners[count] = pipe;
      handles[count++] = pipe->event();
    }
    auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(limit - now).count();
    DWORD signaled = WaitForMultipleObjects(
        count, handles, FALSE, static_cast<DWORD>(std::clamp<long long>(wait_ms, 0, 0x7fffffff)));
    if (signaled == WAIT_TIMEOUT) continue;
    if (signaled >= WAIT_OBJECT_0 + count)
      return std::unexpected(win32_error("waiting for " + program, GetLastError()));
    DWORD index = signaled - WAIT_OBJECT_0;
    PipeEnd* pipe = owners[index];
    if (!pipe) {
      phase = Phase::draining;
      limit = std::min(Clock::now() + k_drain_grace, deadline);
    } else if (pipe == &out) {
      out.finish_read(result.stdout_text, options.max_output_bytes, result.output_truncated);
    } else if (pipe == &err) {
      err.finish_read(result.stderr_text, options.max_output_bytes, result.output_truncated);
    } else {
      input_offset += in.finish_write();
      if (in.open()) in.start_write(input, input_offset);
    }
  }

  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  if (!result.timed_out) {
    DWORD code = 0;
    if (GetExitCodeProcess(process.get(), &code)) result.exit_code = static_cast<int>(code);
  }
  return result;
}

std::optional<std::string> find_executable(std::string_view name) {
  std::vector<std::string> found = search_path(name, get_env("PATH").value_or(""), Matches::first);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<std::string> find_all_executables(std::string_view name) {
  return search_path(name, get_env("PATH").value_or(""), Matches::all);
}

long current_process_id() {
  return static_cast<long>(GetCurrentProcessId());
}

Result<std::string> current_executable_path() {
  std::wstring buffer(MAX_PATH, L'\0');
  for (;;) {
    DWORD n = GetModuleFileNameW(nullptr, buffer.data(), static_cast<DWORD>(buffer.size()));
    if (n == 0) return std::unexpected(win32_error("finding this program's path", GetLastError()));
    if (n < buffer.size()) {
      buffer.resize(n);
      return to_utf8(buffer);
    }
    buffer.resize(buffer.size() * 2);
  }
}

}  // namespace gpuhost::platform
