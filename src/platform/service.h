#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

// Windows services through the Service Control Manager (SCM), and the Windows Event Log. On POSIX
// every call is `unsupported`: Linux has systemd units for the same jobs (deploy/systemd/).

struct ServiceDefinition {
  std::string name;          // the service's key name: [A-Za-z0-9._-]
  std::string display_name;  // shown in services.msc
  std::string description;
  std::vector<std::string> arguments;  // after the executable; quoted into ImagePath
  bool automatic_start = true;         // SERVICE_AUTO_START, else SERVICE_DEMAND_START
  // How long the SCM waits at shutdown after SERVICE_CONTROL_PRESHUTDOWN (default since Windows
  // 10 1703: 10 s, too short to save a checkpoint; learn.microsoft.com SERVICE_PRESHUTDOWN_INFO).
  std::chrono::milliseconds preshutdown_timeout{0};  // 0: leave the system's default
  bool restart_on_failure = false;  // SCM failure actions: restart after 5 s, also on exit != 0
};

// Registers the service to run this executable (current_executable_path) as LocalSystem, and
// gpuhost as an Event Log source. Returns warnings: settings this SCM refused but the service
// runs without (Wine has no failure actions). Errors: invalid_argument (a service of that name
// exists), permission_denied (not elevated), io_error with the SCM's message.
[[nodiscard]] Result<std::vector<std::string>> install_service(const ServiceDefinition& definition);
// Removes the service (it must be stopped) and its Event Log source. not_found when absent.
[[nodiscard]] Result<void> uninstall_service(const std::string& name);
[[nodiscard]] Result<void> start_service(const std::string& name);

struct ServiceState {
  std::string state;  // "stopped", "start_pending", "running", "stop_pending", ...
  std::uint32_t process_id = 0;
  std::uint32_t exit_code = 0;  // the service's own code when it ended with one, else the Win32 code
  bool never_started = false;   // stopped since it was installed (ERROR_SERVICE_NEVER_STARTED)
  std::string image_path;       // the command line the SCM runs
  bool automatic_start = false;
};
[[nodiscard]] Result<ServiceState> query_service(const std::string& name);
// Sends SERVICE_CONTROL_STOP and waits up to `timeout` for SERVICE_STOPPED; returns the final
// state (still stop_pending after the timeout: the caller says so).
[[nodiscard]] Result<ServiceState> stop_service(const std::string& name, std::chrono::milliseconds timeout);

// Runs `body` as the service `name` when the SCM started this process (StartServiceCtrlDispatcher):
// reports running, turns SERVICE_CONTROL_STOP, _SHUTDOWN and _PRESHUTDOWN into
// TerminationRequest::service_stop (termination.h), reports stop_pending while `body` finishes
// (a checkpoint being saved), then stopped with body's exit code; `clean_exit_codes` are
// reported as success. Errors: unavailable when the SCM did not start this process.
[[nodiscard]] Result<int> run_as_service(const std::string& name, const std::function<int()>& body,
                                         const std::vector<int>& clean_exit_codes);

enum class EventType { information, warning, error };
// Writes one entry to the Windows Application log under the source "gpuhost" (its text from
// gpuhost.exe's own message table). Best effort: returns false when the log refused it.
bool report_event(EventType type, const std::string& message);

}  // namespace gpuhost::platform
