// clang-format off
#include <windows.h>
#include <psapi.h>
// clang-format on

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>

#include "platform/child_process.h"
#include "platform/launch_win32.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

// Once the child has exited, how long a grandchild still holding its stdout/stderr may keep them
// open before we end the job and stop reading.
constexpr auto k_drain_grace = std::chrono::milliseconds(500);
// How much the readers take from a pipe after being told to stop.
constexpr std::size_t k_final_drain_limit = 1u << 20;
// The exit code TerminateJobObject gives the processes it ends (as Python's Popen.kill does).
constexpr UINT k_killed_exit_code = 1;

std::chrono::microseconds from_100ns(ULONGLONG ticks) {
  return std::chrono::microseconds(ticks / 10);
}

std::chrono::microseconds from_100ns(const FILETIME& time) {
  return from_100ns((static_cast<ULONGLONG>(time.dwHighDateTime) << 32) | time.dwLowDateTime);
}

bool running_under_wine() {
  static const bool wine = GetProcAddress(GetModuleHandleW(L"ntdll.dll"), "wine_get_version") != nullptr;
  return wine;
}

// Console control events reach only processes attached to the sender's console
// (GenerateConsoleCtrlEvent, learn.microsoft.com), and the child inherits ours. A supervisor
// without a usable console (started detached, from a service, or by Wine with no terminal, where
// it gets a console-less "shell" placeholder that refuses AllocConsole with ACCESS_DENIED until
// FreeConsole) makes one. Our std handles are kept: AllocConsole points them at the new console.
void ensure_console() {
  static std::once_flag once;
  std::call_once(once, [] {
    UniqueHandle input(CreateFileW(L"CONIN$", GENERIC_READ | GENERIC_WRITE,
                                   FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr, OPEN_EXISTING, 0, nullptr));
    if (input.valid()) return;
    const DWORD kinds[3] = {STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE};
    HANDLE saved[3];
    for (int i = 0; i < 3; ++i) saved[i] = GetStdHandle(kinds[i]);
    if (!AllocConsole()) {
      FreeConsole();
      if (!AllocConsole()) return;
    }
    if (HWND window = GetConsoleWindow()) ShowWindow(window, SW_HIDE);
    for (int i = 0; i < 3; ++i) SetStdHandle(kinds[i], saved[i]);
  });
}

// Wine 8's GenerateConsoleCtrlEvent always fails (it sends its request to the console connection
// handle, which does not take it), and its server implements only CTRL_C_EVENT
// (server/console.c propagate_console_signal: "FIXME: should support the other events"). The
// request itself works when sent to the console input, so under Wine we send CTRL_C_EVENT to the
// child's group that way. Wine's request layout (include/wine/condrv.h): IOCTL_CONDRV_CTRL_EVENT
// = CTL_CODE(FILE_DEVICE_CONSOLE 0x50, 19, METHOD_BUFFERED, FILE_ANY_ACCESS) with
// struct condrv_ctrl_event { int event; unsigned int group_id; }.
bool wine_send_ctrl_c(DWORD group) {
  UniqueHandle input(CreateFileW(L"CONIN$", GENERIC_READ | GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
                                 nullptr, OPEN_EXISTING, 0, nullptr));
  if (!input.valid()) return false;
  struct {
    int event;
    unsigned int group_id;
  } request{CTRL_C_EVENT, static_cast<unsigned int>(group)};
  constexpr DWORD k_ioctl_condrv_ctrl_event = (0x50u << 16) | (19u << 2);
  DWORD returned = 0;
  return DeviceIoControl(input.get(), k_ioctl_condrv_ctrl_event, &request, sizeof request, nullptr, 0,
                         &returned, nullptr) != FALSE;
}

// An inheritable duplicate of our std handle `kind`, or of NUL when we have none.
Result<UniqueHandle> inheritable_std_handle(DWORD kind) {
  HANDLE ours = GetStdHandle(kind);
  HANDLE copy = nullptr;
  if (ours && ours != INVALID_HANDLE_VALUE &&
      DuplicateHandle(GetCurrentProcess(), ours, GetCurrentProcess(), &copy, 0, TRUE, DUPLICATE_SAME_ACCESS))
    return UniqueHandle(copy);
  SECURITY_ATTRIBUTES inheritable{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  UniqueHandle null_output(CreateFileW(L"NUL", GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE,
                                       &inheritable, OPEN_EXISTING, 0, nullptr));
  if (!null_output.valid()) return std::unexpected(win32_error("opening NUL", GetLastError()));
  return null_output;
}

}  // namespace

struct ChildProcess::State {
  // Fixed after spawn.
  DWORD pid = 0;
  std::string program;
  OutputHandler on_output;
  UniqueHandle job;
  UniqueHandle process;
  UniqueHandle stop;  // manual-reset event: the readers (and the writer) stop
  std::thread readers[2];
  std::thread writer;  // feeds stdin_text, when there is one

  // Touched only by the thread calling the public methods.
  std::optional<ChildExit> result;

  std::mutex mutex;
  std::condition_variable readers_done;
  int readers_running = 0;  // guarded by mutex

  void read_output(launch::PipeEnd& pipe, OutputStream stream) {
    pipe.start_read();
    while (pipe.open()) {
      HANDLE handles[2] = {pipe.event(), stop.get()};
      DWORD signaled = WaitForMultipleObjects(2, handles, FALSE, INFINITE);
      if (signaled == WAIT_OBJECT_0) {
        deliver(pipe, stream);
        continue;
      }
      std::size_t taken = 0;
      while (pipe.open() && taken < k_final_drain_limit &&
             WaitForSingleObject(pipe.event(), 0) == WAIT_OBJECT_0)
        taken += deliver(pipe, stream);
      break;
    }
    pipe.close();
    {
      std::lock_guard lock(mutex);
      --readers_running;
    }
    readers_done.notify_all();
  }

  // Writes `input` to the child's stdin, then closes it; a child that exits without reading
  // ends the write (ERROR_NO_DATA / broken pipe), and so does the stop event.
  void write_input(launch::PipeEnd& pipe, const std::string& input) {
    std::size_t offset = 0;
    pipe.start_write(input, offset);
    while (pipe.open()) {
      HANDLE handles[2] = {pipe.event(), stop.get()};
      if (WaitForMultipleObjects(2, handles, FALSE, INFINITE) != WAIT_OBJECT_0) break;
      offset += pipe.finish_write();
      if (pipe.open()) pipe.start_write(input, offset);
    }
    pipe.close();
  }

  std::size_t deliver(launch::PipeEnd& pipe, OutputStream stream) {
    std::optional<std::string_view> chunk = pipe.complete_read();
    if (!chunk) return 0;
    const std::size_t size = chunk->size();
    if (size) on_output(stream, *chunk);
    pipe.start_read();
    return size;
  }

  void finish_readers(std::chrono::milliseconds grace) {
    bool drained;
    {
      std::unique_lock lock(mutex);
      drained = readers_done.wait_for(lock, grace, [&] { return readers_running == 0; });
    }
    if (!drained) {
      TerminateJobObject(job.get(), k_killed_exit_code);
      SetEvent(stop.get());
    }
    for (std::thread& reader : readers)
      if (reader.joinable()) reader.join();
    if (writer.joinable()) {
      SetEvent(stop.get());
      writer.join();
    }
  }

  // The exit code, and the CPU time and peak memory of the whole job; where the job does not
  // account (Wine), the child's own figures.
  ChildExit collect_exit() const {
    ChildExit exit;
    DWORD code = 0;
    if (GetExitCodeProcess(process.get(), &code)) exit.exit_code = static_cast<int>(code);
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION accounting{};
    if (QueryInformationJobObject(job.get(), JobObjectBasicAccountingInformation, &accounting,
                                  sizeof accounting, nullptr))
      exit.cpu_time = from_100ns(static_cast<ULONGLONG>(accounting.TotalUserTime.QuadPart) +
                                 static_cast<ULONGLONG>(accounting.TotalKernelTime.QuadPart));
    FILETIME created, ended, kernel, user;
    if (GetProcessTimes(process.get(), &created, &ended, &kernel, &user))
      exit.cpu_time = std::max(exit.cpu_time, from_100ns(kernel) + from_100ns(user));
    JOBOBJECT_EXTENDED_LIMIT_INFORMATION limits{};
    if (QueryInformationJobObject(job.get(), JobObjectExtendedLimitInformation, &limits, sizeof limits,
                                  nullptr))
      exit.peak_rss_bytes = limits.PeakJobMemoryUsed;
    PROCESS_MEMORY_COUNTERS memory{};
    if (exit.peak_rss_bytes == 0 && GetProcessMemoryInfo(process.get(), &memory, sizeof memory))
      exit.peak_rss_bytes = memory.PeakWorkingSetSize;
    return exit;
  }
};

Result<ChildProcess> ChildProcess::spawn(const ChildOptions& options) {
  const std::string resolved = GPUHOST_TRY(launch::resolve_program(options.argv, options.environment));
  if (options.console) ensure_console();
  auto state = std::make_unique<State>();
  state->program = options.argv[0];
  state->on_output = options.on_output;

  const bool feed_stdin = options.stdin_text && !options.stdin_text->empty();
  UniqueHandle child_in;
  auto in = std::make_unique<launch::PipeEnd>();
  if (feed_stdin) {
    if (auto made = in->create(false, child_in); !made) return std::unexpected(made.error());
  } else {
    child_in = GPUHOST_TRY(launch::open_null_input());
  }
  UniqueHandle child_out, child_err;
  auto out = std::make_unique<launch::PipeEnd>();
  auto err = std::make_unique<launch::PipeEnd>();
  if (state->on_output || feed_stdin) {
    state->stop.reset(CreateEventW(nullptr, TRUE, FALSE, nullptr));
    if (!state->stop.valid()) return std::unexpected(win32_error("creating an event", GetLastError()));
  }
  if (state->on_output) {
    if (auto made = out->create(true, child_out); !made) return std::unexpected(made.error());
    if (auto made = err->create(true, child_err); !made) return std::unexpected(made.error());
  } else {
    child_out = GPUHOST_TRY(inheritable_std_handle(STD_OUTPUT_HANDLE));
    child_err = GPUHOST_TRY(inheritable_std_handle(STD_ERROR_HANDLE));
  }
  state->job = GPUHOST_TRY(launch::make_job());

  HANDLE inherited[3] = {child_in.get(), child_out.get(), child_err.get()};
  launch::AttributeList attributes;
  if (auto ready = attributes.inherit_only(inherited, 3); !ready) return std::unexpected(ready.error());
  STARTUPINFOEXW startup{};
  startup.StartupInfo.cb = sizeof startup;
  startup.StartupInfo.dwFlags = STARTF_USESTDHANDLES;
  startup.StartupInfo.hStdInput = child_in.get();
  startup.StartupInfo.hStdOutput = child_out.get();
  startup.StartupInfo.hStdError = child_err.get();
  startup.lpAttributeList = attributes.get();

  std::wstring application = to_wide(resolved);
  std::wstring line = launch::command_line(options.argv);
  std::wstring env_block = launch::environment_block(options.environment);
  std::wstring directory = options.working_directory ? to_wide(*options.working_directory) : std::wstring();
  // Suspended until it is in the job, so nothing it starts can escape the job. A supervised
  // child has no CREATE_NO_WINDOW: it must share our console for CTRL_BREAK to reach it.
  DWORD flags =
      CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP | CREATE_UNICODE_ENVIRONMENT | EXTENDED_STARTUPINFO_PRESENT;
  if (!options.console) flags |= CREATE_NO_WINDOW;
  PROCESS_INFORMATION info{};
  if (!CreateProcessW(application.c_str(), line.data(), nullptr, nullptr, TRUE, flags, env_block.data(),
                      directory.empty() ? nullptr : directory.c_str(), &startup.StartupInfo, &info)) {
    std::string context = "running " + resolved;
    if (options.working_directory) context += " in directory " + *options.working_directory;
    Error error = win32_error(context, GetLastError());
    if (error.code != ErrorCode::not_found) error.code = ErrorCode::io_error;
    return std::unexpected(std::move(error));
  }
  state->process.reset(info.hProcess);
  state->pid = info.dwProcessId;
  UniqueHandle thread(info.hThread);
  if (!AssignProcessToJobObject(state->job.get(), state->process.get())) {
    Error error = win32_error("putting " + state->program + " into a job object", GetLastError());
    error.code = ErrorCode::io_error;
    TerminateProcess(state->process.get(), k_killed_exit_code);
    return std::unexpected(std::move(error));
  }
  ResumeThread(thread.get());
  child_in.reset();
  child_out.reset();
  child_err.reset();

  if (feed_stdin) {
    State* raw = state.get();
    raw->writer = std::thread(
        [raw, pipe = std::move(in), text = *options.stdin_text] { raw->write_input(*pipe, text); });
  }
  if (state->on_output) {
    State* raw = state.get();
    raw->readers_running = 2;
    raw->readers[0] =
        std::thread([raw, pipe = std::move(out)] { raw->read_output(*pipe, OutputStream::out); });
    raw->readers[1] =
        std::thread([raw, pipe = std::move(err)] { raw->read_output(*pipe, OutputStream::err); });
  }
  return ChildProcess(std::move(state));
}

ChildProcess::ChildProcess(std::unique_ptr<State> state) : m_state(std::move(state)) {}
ChildProcess::ChildProcess(ChildProcess&& other) noexcept = default;
ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept = default;

// Closing the job (with State) ends whatever the child left running, too.
ChildProcess::~ChildProcess() {
  if (!m_state) return;
  TerminateJobObject(m_state->job.get(), k_killed_exit_code);
  m_state->finish_readers(std::chrono::milliseconds(0));
}

long ChildProcess::pid() const {
  return static_cast<long>(m_state->pid);
}

Result<void> ChildProcess::send(ChildSignal signal) {
  if (signal != ChildSignal::ctrl_break)
    return make_error(ErrorCode::unsupported, std::string("sending ") + child_signal_name(signal) +
                                                  ": POSIX signals do not exist on Windows");
  if (m_state->result || WaitForSingleObject(m_state->process.get(), 0) == WAIT_OBJECT_0) return {};
  // The group id of a CREATE_NEW_PROCESS_GROUP child is its pid.
  if (GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, m_state->pid)) return {};
  const DWORD code = GetLastError();
  if (running_under_wine() && wine_send_ctrl_c(m_state->pid)) return {};
  Error error = win32_error(
      "sending CTRL_BREAK to " + m_state->program + " (process group " + std::to_string(m_state->pid) + ")",
      code);
  error.code = ErrorCode::io_error;
  return std::unexpected(std::move(error));
}

void ChildProcess::kill_tree() {
  TerminateJobObject(m_state->job.get(), k_killed_exit_code);
}

// The Job Object's processes (JobObjectBasicProcessIdList). Whether one handles CTRL_BREAK
// cannot be seen from outside, so `catches` stays unknown: the supervisor sends a console event
// only where the job declares a handler (doc/run-signals.md).
Result<std::vector<TreeMember>> ChildProcess::members(ChildSignal) const {
  std::vector<TreeMember> out;
  if (m_state->result) return out;
  struct {
    JOBOBJECT_BASIC_PROCESS_ID_LIST list;
    ULONG_PTR more[255];
  } ids{};
  ids.list.NumberOfAssignedProcesses = 256;
  if (!QueryInformationJobObject(m_state->job.get(), JobObjectBasicProcessIdList, &ids, sizeof ids, nullptr) &&
      GetLastError() != ERROR_MORE_DATA)
    return std::unexpected(win32_error("listing the processes of " + m_state->program + "'s job", GetLastError()));
  for (DWORD i = 0; i < ids.list.NumberOfProcessIdsInList; ++i) {
    TreeMember member;
    member.pid = static_cast<long>(ids.list.ProcessIdList[i]);
    UniqueHandle process(OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, static_cast<DWORD>(member.pid)));
    if (process.valid()) {
      wchar_t image[MAX_PATH];
      DWORD size = MAX_PATH;
      if (QueryFullProcessImageNameW(process.get(), 0, image, &size)) {
        std::wstring path(image, size);
        auto slash = path.find_last_of(L"\\/");
        member.name = to_utf8(slash == std::wstring::npos ? path : path.substr(slash + 1));
      }
    }
    out.push_back(std::move(member));
  }
  return out;
}

Result<void> ChildProcess::send_to(long, ChildSignal signal) {
  return make_error(ErrorCode::unsupported, std::string("sending ") + child_signal_name(signal) +
                                                " to one process: Windows console events go to a whole process group");
}

Result<std::optional<ChildExit>> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  State& state = *m_state;
  if (state.result) return state.result;
  const DWORD wait_ms = static_cast<DWORD>(std::clamp<long long>(timeout.count(), 0, 0x7fffffff));
  const DWORD waited = WaitForSingleObject(state.process.get(), wait_ms);
  if (waited == WAIT_TIMEOUT) return std::optional<ChildExit>();
  if (waited != WAIT_OBJECT_0)
    return std::unexpected(win32_error("waiting for " + state.program, GetLastError()));
  // The attempt ends with the child: what it left in its job (workers, a wrapper's trainer) is
  // ended too, as on POSIX, so nothing of it runs beside the next attempt. The child's own exit
  // code is already fixed.
  TerminateJobObject(state.job.get(), k_killed_exit_code);
  state.finish_readers(k_drain_grace);
  state.result = state.collect_exit();
  return state.result;
}

// NTSTATUS values a crashing process exits with ([MS-ERREF] 2.3.1, learn.microsoft.com).
std::string ChildExit::describe() const {
  if (signaled) return "killed by signal " + std::to_string(signal);
  const auto code = static_cast<std::uint32_t>(exit_code);
  if (code < 0x80000000u) return "exit code " + std::to_string(exit_code);
  static constexpr std::pair<std::uint32_t, const char*> k_statuses[] = {
      {0x80000003u, "breakpoint"},
      {0xC0000005u, "access violation"},
      {0xC0000017u, "out of memory"},
      {0xC000001Du, "illegal instruction"},
      {0xC000008Eu, "floating-point division by zero"},
      {0xC0000094u, "integer division by zero"},
      {0xC0000096u, "privileged instruction"},
      {0xC00000FDu, "stack overflow"},
      {0xC000013Au, "control-C exit"},
      {0xC0000135u, "DLL not found"},
      {0xC0000139u, "entry point not found"},
      {0xC0000142u, "DLL initialization failed"},
      {0xC0000374u, "heap corruption"},
      {0xC0000409u, "stack buffer overrun"},
  };
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%08X", static_cast<unsigned>(code));
  std::string text = std::string("exit code ") + hex;
  for (const auto& [status, name] : k_statuses)
    if (status == code) return text + " (" + name + ")";
  return text;
}

ChildSignal default_save_signal() {
  return ChildSignal::ctrl_break;
}

ChildSignal default_stop_signal() {
  return ChildSignal::ctrl_break;
}

void become_child_subreaper() {}

int kill_processes_with_environment(std::string_view, std::string_view) {
  return 0;
}

ResourceUsage self_resource_usage() {
  ResourceUsage out;
  FILETIME created, ended, kernel, user;
  if (GetProcessTimes(GetCurrentProcess(), &created, &ended, &kernel, &user))
    out.cpu_time = from_100ns(kernel) + from_100ns(user);
  PROCESS_MEMORY_COUNTERS memory{};
  if (GetProcessMemoryInfo(GetCurrentProcess(), &memory, sizeof memory))
    out.peak_rss_bytes = memory.PeakWorkingSetSize;
  return out;
}

}  // namespace gpuhost::platform
