// service.h on the Service Control Manager (advapi32) and the Event Log (ReportEventW, its text
// from the message table event_log_messages.mc that gpuhost.exe carries as a resource).
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <windows.h>

#include "platform/launch_win32.h"
#include "platform/process.h"
#include "platform/service.h"
#include "platform/termination.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

constexpr wchar_t k_event_source[] = L"gpuhost";
constexpr wchar_t k_event_source_key[] =
    L"SYSTEM\\CurrentControlSet\\Services\\EventLog\\Application\\gpuhost";
// Event ids of event_log_messages.mc: one message "%1" per event type.
constexpr DWORD k_event_information = 0x40000001;
constexpr DWORD k_event_warning = 0x80000002;
constexpr DWORD k_event_error = 0xC0000003;
// While a stop is pending (a checkpoint being saved) the SCM expects a status update within each
// wait hint (learn.microsoft.com, SERVICE_STATUS: dwWaitHint, dwCheckPoint): one every 2 s, with
// a 10 s hint.
constexpr DWORD k_stop_wait_hint_ms = 10000;
constexpr auto k_stop_status_interval = std::chrono::seconds(2);

// Owns an SC_HANDLE. Move-only.
class ScHandle {
 public:
  explicit ScHandle(SC_HANDLE h = nullptr) : m_handle(h) {}
  ScHandle(ScHandle&& o) noexcept : m_handle(std::exchange(o.m_handle, nullptr)) {}
  ScHandle& operator=(ScHandle&&) = delete;
  ScHandle(const ScHandle&) = delete;
  ScHandle& operator=(const ScHandle&) = delete;
  ~ScHandle() {
    if (m_handle) CloseServiceHandle(m_handle);
  }
  [[nodiscard]] SC_HANDLE get() const { return m_handle; }

 private:
  SC_HANDLE m_handle;
};

Error scm_error(const std::string& context, DWORD code) {
  Error e = win32_error(context, code);
  if (code == ERROR_SERVICE_EXISTS) e.code = ErrorCode::invalid_argument;
  if (code == ERROR_SERVICE_DOES_NOT_EXIST) e.code = ErrorCode::not_found;
  if (e.code == ErrorCode::permission_denied)
    e.message += " (run it from an elevated prompt: Run as administrator)";
  return e;
}

Result<ScHandle> open_manager(DWORD access) {
  SC_HANDLE manager = OpenSCManagerW(nullptr, nullptr, access);
  if (!manager) return std::unexpected(scm_error("opening the Service Control Manager", GetLastError()));
  return ScHandle(manager);
}

Result<ScHandle> open_service(const std::string& name, DWORD access) {
  ScHandle manager = GPUHOST_TRY(open_manager(SC_MANAGER_CONNECT));
  SC_HANDLE service = OpenServiceW(manager.get(), to_wide(name).c_str(), access);
  if (!service) return std::unexpected(scm_error("service " + name, GetLastError()));
  return ScHandle(service);
}

const char* state_name(DWORD state) {
  switch (state) {
    case SERVICE_STOPPED: return "stopped";
    case SERVICE_START_PENDING: return "start_pending";
    case SERVICE_STOP_PENDING: return "stop_pending";
    case SERVICE_RUNNING: return "running";
    case SERVICE_CONTINUE_PENDING: return "continue_pending";
    case SERVICE_PAUSE_PENDING: return "pause_pending";
    case SERVICE_PAUSED: return "paused";
  }
  return "unknown";
}

Result<SERVICE_STATUS_PROCESS> status_of(SC_HANDLE service, const std::string& name) {
  SERVICE_STATUS_PROCESS status{};
  DWORD needed = 0;
  if (!QueryServiceStatusEx(service, SC_STATUS_PROCESS_INFO, reinterpret_cast<BYTE*>(&status), sizeof status,
                            &needed))
    return std::unexpected(scm_error("querying service " + name, GetLastError()));
  return status;
}

// HKLM\...\EventLog\Application\gpuhost: EventMessageFile names the executable whose message table
// holds the text; TypesSupported the error, warning and information types (learn.microsoft.com,
// "Event Sources").
Result<void> register_event_source(const std::wstring& executable) {
  HKEY key = nullptr;
  LSTATUS status = RegCreateKeyExW(HKEY_LOCAL_MACHINE, k_event_source_key, 0, nullptr, 0, KEY_SET_VALUE,
                                   nullptr, &key, nullptr);
  if (status != ERROR_SUCCESS)
    return std::unexpected(win32_error("registering the Event Log source gpuhost", status));
  DWORD types = EVENTLOG_ERROR_TYPE | EVENTLOG_WARNING_TYPE | EVENTLOG_INFORMATION_TYPE;
  status = RegSetValueExW(key, L"EventMessageFile", 0, REG_EXPAND_SZ,
                          reinterpret_cast<const BYTE*>(executable.c_str()),
                          static_cast<DWORD>((executable.size() + 1) * sizeof(wchar_t)));
  if (status == ERROR_SUCCESS)
    status = RegSetValueExW(key, L"TypesSupported", 0, REG_DWORD, reinterpret_cast<const BYTE*>(&types),
                            sizeof types);
  RegCloseKey(key);
  if (status != ERROR_SUCCESS)
    return std::unexpected(win32_error("registering the Event Log source gpuhost", status));
  return {};
}

// Whether another installed service still runs gpuhost.exe (the Event Log source is shared).
bool other_gpuhost_services(SC_HANDLE manager, const std::string& except) {
  DWORD needed = 0, count = 0, resume = 0;
  EnumServicesStatusExW(manager, SC_ENUM_PROCESS_INFO, SERVICE_WIN32, SERVICE_STATE_ALL, nullptr, 0, &needed,
                        &count, &resume, nullptr);
  std::vector<BYTE> buffer(needed);
  resume = 0;
  if (!EnumServicesStatusExW(manager, SC_ENUM_PROCESS_INFO, SERVICE_WIN32, SERVICE_STATE_ALL, buffer.data(),
                             static_cast<DWORD>(buffer.size()), &needed, &count, &resume, nullptr))
    return true;  // unknown: keep the source
  auto* services = reinterpret_cast<ENUM_SERVICE_STATUS_PROCESSW*>(buffer.data());
  for (DWORD i = 0; i < count; ++i) {
    std::string name = to_utf8(services[i].lpServiceName);
    if (name == except || !name.starts_with("gpuhost")) continue;
    return true;
  }
  return false;
}

// The one service this process runs (a service process of type SERVICE_WIN32_OWN_PROCESS).
struct RunningService {
  std::wstring name;
  const std::function<int()>* body = nullptr;
  std::vector<int> clean_exit_codes;
  SERVICE_STATUS_HANDLE handle = nullptr;
  std::mutex mutex;
  std::condition_variable changed;
  SERVICE_STATUS status{};  // guarded by mutex
  bool stopping = false;    // guarded by mutex
  bool finished = false;    // guarded by mutex
  int exit_code = 0;
};
RunningService* g_service = nullptr;

void report_status_locked(RunningService& s, DWORD state, DWORD wait_hint) {
  s.status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
  s.status.dwCurrentState = state;
  s.status.dwControlsAccepted =
      state == SERVICE_RUNNING ? SERVICE_ACCEPT_STOP | SERVICE_ACCEPT_PRESHUTDOWN : 0;
  s.status.dwWaitHint = wait_hint;
  s.status.dwCheckPoint =
      (state == SERVICE_STOP_PENDING || state == SERVICE_START_PENDING) ? s.status.dwCheckPoint + 1 : 0;
  if (s.handle) SetServiceStatus(s.handle, &s.status);
}

DWORD WINAPI on_control(DWORD control, DWORD, void*, void*) {
  RunningService& s = *g_service;
  switch (control) {
    case SERVICE_CONTROL_INTERROGATE: return NO_ERROR;
    case SERVICE_CONTROL_STOP:
    case SERVICE_CONTROL_SHUTDOWN:
    case SERVICE_CONTROL_PRESHUTDOWN: {
      {
        std::lock_guard lock(s.mutex);
        if (s.stopping || s.finished) return NO_ERROR;
        s.stopping = true;
        report_status_locked(s, SERVICE_STOP_PENDING, k_stop_wait_hint_ms);
      }
      s.changed.notify_all();
      const char* what = control == SERVICE_CONTROL_STOP       ? "a stop"
                         : control == SERVICE_CONTROL_SHUTDOWN ? "system shutdown"
                                                               : "system shutdown (preshutdown)";
      report_event(EventType::information, "service " + to_utf8(s.name) + ": " + what +
                                               " requested by the Service Control Manager; stopping as on "
                                               "preemption (a supervised job saves first)");
      inject_termination_request(TerminationRequest::service_stop);
      return NO_ERROR;
    }
  }
  return ERROR_CALL_NOT_IMPLEMENTED;
}

// A service has no console, and the standard handles it inherits from the SCM may be pipes that
// nobody drains, where a write blocks for good once the pipe is full (seen under Wine, with a
// trainer's echoed output). Everything gpuhost prints goes to NUL instead; the job's own logs,
// its journal and the Event Log keep what matters.
void detach_standard_streams() {
  std::FILE* ignored = _wfreopen(L"NUL", L"w", stdout);
  ignored = _wfreopen(L"NUL", L"w", stderr);
  (void)ignored;
  HANDLE nul = CreateFileW(L"NUL", GENERIC_WRITE, FILE_SHARE_READ | FILE_SHARE_WRITE, nullptr, OPEN_EXISTING,
                           0, nullptr);
  if (nul != INVALID_HANDLE_VALUE) {
    SetStdHandle(STD_OUTPUT_HANDLE, nul);
    SetStdHandle(STD_ERROR_HANDLE, nul);
  }
}

void WINAPI service_main(DWORD, LPWSTR*) {
  RunningService& s = *g_service;
  detach_standard_streams();
  s.handle = RegisterServiceCtrlHandlerExW(s.name.c_str(), on_control, nullptr);
  if (!s.handle) return;
  {
    std::lock_guard lock(s.mutex);
    report_status_locked(s, SERVICE_RUNNING, 0);
  }
  // Keeps a pending stop alive in the SCM's eyes while the body saves and ends.
  std::thread pump([&s] {
    std::unique_lock lock(s.mutex);
    while (!s.finished) {
      s.changed.wait_for(lock, k_stop_status_interval);
      if (s.stopping && !s.finished) report_status_locked(s, SERVICE_STOP_PENDING, k_stop_wait_hint_ms);
    }
  });
  int code = (*s.body)();
  {
    std::lock_guard lock(s.mutex);
    s.finished = true;
    s.exit_code = code;
  }
  s.changed.notify_all();
  pump.join();
  bool clean =
      std::find(s.clean_exit_codes.begin(), s.clean_exit_codes.end(), code) != s.clean_exit_codes.end();
  report_event(clean ? EventType::information : EventType::error,
               "service " + to_utf8(s.name) + " stopped: gpuhost exited with " + std::to_string(code) +
                   (clean ? "" : " (see gpuhost's exit codes: doc/exit-codes.md)"));
  {
    std::lock_guard lock(s.mutex);
    s.status.dwWin32ExitCode = clean ? NO_ERROR : ERROR_SERVICE_SPECIFIC_ERROR;
    s.status.dwServiceSpecificExitCode = clean ? 0 : static_cast<DWORD>(code);
    report_status_locked(s, SERVICE_STOPPED, 0);
  }
  // Nothing may run after SERVICE_STOPPED (learn.microsoft.com, SetServiceStatus: the process can
  // be ended at any time). The process ends here rather than going back to the dispatcher: Wine's
  // SCM hands a start that comes while this process is still exiting to this process, and one
  // service run per process is all gpuhost supports (its supervisor state is per process).
  ExitProcess(static_cast<UINT>(code));
}

}  // namespace

Result<std::vector<std::string>> install_service(const ServiceDefinition& d) {
  std::vector<std::string> warnings;
  std::string executable = GPUHOST_TRY(current_executable_path());
  std::vector<std::string> argv = {executable};
  argv.insert(argv.end(), d.arguments.begin(), d.arguments.end());
  std::wstring image_path = launch::command_line(argv);
  ScHandle manager = GPUHOST_TRY(open_manager(SC_MANAGER_CREATE_SERVICE | SC_MANAGER_CONNECT));
  std::wstring name = to_wide(d.name), display = to_wide(d.display_name);
  ScHandle service(
      CreateServiceW(manager.get(), name.c_str(), display.c_str(), SERVICE_ALL_ACCESS,
                     SERVICE_WIN32_OWN_PROCESS, d.automatic_start ? SERVICE_AUTO_START : SERVICE_DEMAND_START,
                     SERVICE_ERROR_NORMAL, image_path.c_str(), nullptr, nullptr, nullptr, nullptr, nullptr));
  if (!service.get()) return std::unexpected(scm_error("creating service " + d.name, GetLastError()));

  std::wstring description = to_wide(d.description);
  SERVICE_DESCRIPTIONW text{description.data()};
  ChangeServiceConfig2W(service.get(), SERVICE_CONFIG_DESCRIPTION, &text);
  if (d.preshutdown_timeout.count() > 0) {
    SERVICE_PRESHUTDOWN_INFO preshutdown{static_cast<DWORD>(d.preshutdown_timeout.count())};
    if (!ChangeServiceConfig2W(service.get(), SERVICE_CONFIG_PRESHUTDOWN_INFO, &preshutdown)) {
      Error e = scm_error("setting the preshutdown timeout of service " + d.name, GetLastError());
      DeleteService(service.get());
      return std::unexpected(e);
    }
  }
  if (d.restart_on_failure) {
    // Restart 5 s after a failure, the first three times in a day; a non-zero exit counts as a
    // failure, not only a crash (SERVICE_FAILURE_ACTIONS_FLAG).
    SC_ACTION actions[3] = {{SC_ACTION_RESTART, 5000}, {SC_ACTION_RESTART, 5000}, {SC_ACTION_RESTART, 5000}};
    SERVICE_FAILURE_ACTIONSW failure{};
    failure.dwResetPeriod = 24 * 60 * 60;
    failure.cActions = 3;
    failure.lpsaActions = actions;
    SERVICE_FAILURE_ACTIONS_FLAG on_exit_codes{TRUE};
    if (!ChangeServiceConfig2W(service.get(), SERVICE_CONFIG_FAILURE_ACTIONS, &failure) ||
        !ChangeServiceConfig2W(service.get(), SERVICE_CONFIG_FAILURE_ACTIONS_FLAG, &on_exit_codes)) {
      DWORD code = GetLastError();
      if (code != ERROR_INVALID_LEVEL) {
        Error e = scm_error("setting the failure actions of service " + d.name, code);
        DeleteService(service.get());
        return std::unexpected(e);
      }
      // An SCM without failure actions (Wine's): the service runs, it is not restarted.
      warnings.push_back("this Service Control Manager has no failure actions: " + d.name +
                         " will not be restarted after a failure");
    }
  }
  if (auto registered = register_event_source(to_wide(executable)); !registered) {
    DeleteService(service.get());
    return std::unexpected(registered.error());
  }
  return warnings;
}

Result<void> uninstall_service(const std::string& name) {
  ScHandle service = GPUHOST_TRY(open_service(name, DELETE | SERVICE_QUERY_STATUS));
  SERVICE_STATUS_PROCESS status = GPUHOST_TRY(status_of(service.get(), name));
  if (status.dwCurrentState != SERVICE_STOPPED)
    return make_error(ErrorCode::invalid_argument, "service " + name + " is " +
                                                       state_name(status.dwCurrentState) +
                                                       ": stop it first (gpuhost service stop " + name + ")");
  if (!DeleteService(service.get()))
    return std::unexpected(scm_error("deleting service " + name, GetLastError()));
  if (auto manager = open_manager(SC_MANAGER_ENUMERATE_SERVICE);
      manager && !other_gpuhost_services(manager->get(), name))
    RegDeleteKeyW(HKEY_LOCAL_MACHINE, k_event_source_key);
  return {};
}

Result<void> start_service(const std::string& name) {
  ScHandle service = GPUHOST_TRY(open_service(name, SERVICE_START));
  if (!StartServiceW(service.get(), 0, nullptr))
    return std::unexpected(scm_error("starting service " + name, GetLastError()));
  return {};
}

Result<ServiceState> query_service(const std::string& name) {
  ScHandle service = GPUHOST_TRY(open_service(name, SERVICE_QUERY_STATUS | SERVICE_QUERY_CONFIG));
  SERVICE_STATUS_PROCESS status = GPUHOST_TRY(status_of(service.get(), name));
  ServiceState state;
  state.state = state_name(status.dwCurrentState);
  state.process_id = status.dwProcessId;
  state.exit_code = status.dwWin32ExitCode == ERROR_SERVICE_SPECIFIC_ERROR ? status.dwServiceSpecificExitCode
                                                                           : status.dwWin32ExitCode;
  state.never_started = status.dwWin32ExitCode == ERROR_SERVICE_NEVER_STARTED;
  if (state.never_started) state.exit_code = 0;
  DWORD needed = 0;
  QueryServiceConfigW(service.get(), nullptr, 0, &needed);
  std::vector<BYTE> buffer(needed ? needed : sizeof(QUERY_SERVICE_CONFIGW));
  auto* config = reinterpret_cast<QUERY_SERVICE_CONFIGW*>(buffer.data());
  if (QueryServiceConfigW(service.get(), config, static_cast<DWORD>(buffer.size()), &needed)) {
    if (config->lpBinaryPathName) state.image_path = to_utf8(config->lpBinaryPathName);
    state.automatic_start = config->dwStartType == SERVICE_AUTO_START;
  }
  return state;
}

Result<ServiceState> stop_service(const std::string& name, std::chrono::milliseconds timeout) {
  {
    ScHandle service = GPUHOST_TRY(open_service(name, SERVICE_STOP | SERVICE_QUERY_STATUS));
    SERVICE_STATUS status{};
    if (!ControlService(service.get(), SERVICE_CONTROL_STOP, &status) &&
        GetLastError() != ERROR_SERVICE_NOT_ACTIVE)
      return std::unexpected(scm_error("stopping service " + name, GetLastError()));
  }
  const auto until = std::chrono::steady_clock::now() + timeout;
  while (true) {
    ServiceState state = GPUHOST_TRY(query_service(name));
    if (state.state == "stopped" || std::chrono::steady_clock::now() >= until) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
}

Result<int> run_as_service(const std::string& name, const std::function<int()>& body,
                           const std::vector<int>& clean_exit_codes) {
  RunningService service;
  service.name = to_wide(name);
  service.body = &body;
  service.clean_exit_codes = clean_exit_codes;
  g_service = &service;
  install_termination_handlers();
  SERVICE_TABLE_ENTRYW table[] = {{service.name.data(), service_main}, {nullptr, nullptr}};
  if (!StartServiceCtrlDispatcherW(table)) {
    DWORD code = GetLastError();
    g_service = nullptr;
    if (code == ERROR_FAILED_SERVICE_CONTROLLER_CONNECT)
      return make_error(ErrorCode::unavailable,
                        "gpuhost service run is what the Service Control Manager starts, not a command for a "
                        "prompt: start the service with gpuhost service start " +
                            name);
    return std::unexpected(scm_error("connecting to the Service Control Manager", code));
  }
  g_service = nullptr;
  return service.exit_code;
}

bool report_event(EventType type, const std::string& message) {
  HANDLE source = RegisterEventSourceW(nullptr, k_event_source);
  if (!source) return false;
  std::wstring text = to_wide(message);
  const wchar_t* strings[] = {text.c_str()};
  WORD kind = type == EventType::error     ? EVENTLOG_ERROR_TYPE
              : type == EventType::warning ? EVENTLOG_WARNING_TYPE
                                           : EVENTLOG_INFORMATION_TYPE;
  DWORD id = type == EventType::error     ? k_event_error
             : type == EventType::warning ? k_event_warning
                                          : k_event_information;
  BOOL ok = ReportEventW(source, kind, 0, id, nullptr, 1, 0, strings, nullptr);
  DeregisterEventSource(source);
  return ok != FALSE;
}

}  // namespace gpuhost::platform
