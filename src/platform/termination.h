#pragma once

#include <chrono>
#include <optional>

namespace gpuhost::platform {

// Requests to stop that reach a supervisor from outside: Slurm and Kubernetes send SIGTERM, a
// terminal sends SIGINT, a closed SSH session SIGHUP; on Windows, Ctrl-C/Ctrl-Break, closing
// the console window, logoff, shutdown. Unlike interrupt.h (a flag for one long command), these
// are events the supervisor turns into "save, then stop": every request is kept, none kills us.
enum class TerminationRequest {
  interrupt,      // SIGINT, CTRL_C_EVENT, CTRL_BREAK_EVENT
  terminate,      // SIGTERM
  hangup,         // SIGHUP
  user_signal,    // SIGUSR1 / SIGUSR2 sent to the supervisor (Slurm `--signal=B:USR1@120`)
  console_close,  // CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT
  service_stop,   // Windows service: SERVICE_CONTROL_STOP, _SHUTDOWN, _PRESHUTDOWN (service.h)
};

[[nodiscard]] const char* termination_request_name(TerminationRequest request);  // "SIGTERM", ...

// Installs the handlers (idempotent). After this, the signals above no longer end the process.
// Windows: a console close/logoff/shutdown handler blocks (up to the few seconds Windows
// allows) until notify_shutdown_complete() is called, so the supervisor can stop its child.
void install_termination_handlers();

// Waits up to `timeout` for a request; returns the oldest one not yet taken, or nullopt.
// Thread-safe.
[[nodiscard]] std::optional<TerminationRequest> wait_termination_request(std::chrono::milliseconds timeout);

// For tests and drills: queue a request as if the OS had delivered it.
void inject_termination_request(TerminationRequest request);

// Windows: lets a blocked console-close handler return. POSIX: no-op.
void notify_shutdown_complete();

}  // namespace gpuhost::platform
