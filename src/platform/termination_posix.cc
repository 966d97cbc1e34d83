#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <mutex>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include "platform/termination.h"

namespace gpuhost::platform {
namespace {

using Clock = std::chrono::steady_clock;

// The queue is a pipe: a signal handler may only make async-signal-safe calls, and write(2) is
// one (signal-safety(7)). Each request is one byte. Both ends are non-blocking: a handler never
// waits on a full pipe (64 KiB of unread requests; more are dropped), and a reader that lost a
// race for the byte goes back to poll.
struct RequestPipe {
  int read_fd = -1;
  int write_fd = -1;
};

const RequestPipe& request_pipe() {
  static const RequestPipe pipe = [] {
    RequestPipe p;
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0) {
      p.read_fd = fds[0];
      p.write_fd = fds[1];
    }
    return p;
  }();
  return pipe;
}

// Set before the handlers are installed; read by them.
std::atomic<int> g_write_fd{-1};

void enqueue(int write_fd, TerminationRequest request) {
  if (write_fd < 0) return;
  const char byte = static_cast<char>(request);
  ssize_t ignored = ::write(write_fd, &byte, 1);
  (void)ignored;
}

extern "C" void on_termination_signal(int signal_number) {
  const int saved_errno = errno;
  TerminationRequest request = TerminationRequest::interrupt;
  switch (signal_number) {
    case SIGTERM: request = TerminationRequest::terminate; break;
    case SIGHUP: request = TerminationRequest::hangup; break;
    case SIGUSR1:
    case SIGUSR2: request = TerminationRequest::user_signal; break;
    default: break;
  }
  enqueue(g_write_fd.load(std::memory_order_relaxed), request);
  errno = saved_errno;
}

}  // namespace

const char* termination_request_name(TerminationRequest request) {
  switch (request) {
    case TerminationRequest::interrupt: return "SIGINT";
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
    g_write_fd.store(request_pipe().write_fd);
    struct sigaction action {};
    action.sa_handler = on_termination_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2}) ::sigaction(sig, &action, nullptr);
  });
}

std::optional<TerminationRequest> wait_termination_request(std::chrono::milliseconds timeout) {
  const RequestPipe& pipe = request_pipe();
  if (pipe.read_fd < 0) return std::nullopt;
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    char byte = 0;
    ssize_t n = ::read(pipe.read_fd, &byte, 1);
    if (n == 1) return static_cast<TerminationRequest>(byte);
    if (n < 0 && errno == EINTR) continue;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return std::nullopt;
    struct pollfd p {
      pipe.read_fd, POLLIN, 0
    };
    ::poll(&p, 1, static_cast<int>(std::min<long long>(left, INT_MAX)));
  }
}

void inject_termination_request(TerminationRequest request) {
  enqueue(request_pipe().write_fd, request);
}

void notify_shutdown_complete() {}

}  // namespace gpuhost::platform
