#include <condition_variable>
#include <deque>
#include <mutex>

#include <windows.h>

#include "platform/termination.h"

namespace gpuhost::platform {
namespace {

// Windows ends a process whose handler has not returned 5 s after CTRL_CLOSE_EVENT
// (HandlerRoutine, learn.microsoft.com/windows/console/handlerroutine); we return a little before.
constexpr DWORD k_close_wait_ms = 4500;

struct RequestQueue {
  std::mutex mutex;
  std::condition_variable arrived;
  std::deque<TerminationRequest> requests;  // guarded by mutex
};

RequestQueue& queue() {
  static RequestQueue q;
  return q;
}

// Manual-reset; set by notify_shutdown_complete.
HANDLE shutdown_complete_event() {
  static HANDLE event = CreateEventW(nullptr, TRUE, FALSE, nullptr);
  return event;
}

void enqueue(TerminationRequest request) {
  RequestQueue& q = queue();
  {
    std::lock_guard lock(q.mutex);
    q.requests.push_back(request);
  }
  q.arrived.notify_all();
}

// Runs on a thread the system starts for each event.
BOOL WINAPI on_console_event_to_terminate(DWORD event) {
  switch (event) {
    case CTRL_C_EVENT:
    case CTRL_BREAK_EVENT: enqueue(TerminationRequest::interrupt); return TRUE;
    case CTRL_CLOSE_EVENT:
    case CTRL_LOGOFF_EVENT:
    case CTRL_SHUTDOWN_EVENT:
      enqueue(TerminationRequest::console_close);
      WaitForSingleObject(shutdown_complete_event(), k_close_wait_ms);
      return TRUE;
    default: return FALSE;
  }
}

}  // namespace

const char* termination_request_name(TerminationRequest request) {
  switch (request) {
    case TerminationRequest::interrupt: return "CTRL_C/CTRL_BREAK";
    case TerminationRequest::terminate: return "SIGTERM";
    case TerminationRequest::hangup: return "SIGHUP";
    case TerminationRequest::user_signal: return "SIGUSR1/SIGUSR2";
    case TerminationRequest::console_close: return "console close";
    case TerminationRequest::service_stop: return "service stop";
  }
  return "?";
}

void install_termination_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    shutdown_complete_event();
    SetConsoleCtrlHandler(on_console_event_to_terminate, TRUE);
  });
}

std::optional<TerminationRequest> wait_termination_request(std::chrono::milliseconds timeout) {
  RequestQueue& q = queue();
  std::unique_lock lock(q.mutex);
  if (!q.arrived.wait_for(lock, timeout, [&] { return !q.requests.empty(); })) return std::nullopt;
  TerminationRequest request = q.requests.front();
  q.requests.pop_front();
  return request;
}

void inject_termination_request(TerminationRequest request) {
  enqueue(request);
}

void notify_shutdown_complete() {
  if (HANDLE event = shutdown_complete_event()) SetEvent(event);
}

}  // namespace gpuhost::platform
