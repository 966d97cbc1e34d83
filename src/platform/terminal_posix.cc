#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "platform/posix_util.h"
#include "platform/terminal.h"

namespace gpuhost::platform {
namespace {

// Alternate screen (saving the cursor) and cursor visibility: xterm control sequences
// (https://invisible-island.net/xterm/ctlseqs/ctlseqs.html, "DECSET 1049", "DECTCEM 25").
constexpr char k_enter_screen[] = "\x1b[?1049h\x1b[?25l";
constexpr char k_leave_screen[] = "\x1b[0m\x1b[?25h\x1b[?1049l";

// What the signal handlers need, set before they are installed and cleared after they are
// removed. Handlers only read it and call async-signal-safe functions (write, tcsetattr,
// sigaction, raise).
struct SignalShared {
  std::atomic<bool> active{false};
  int wake_fd = -1;  // write end of the self-pipe that wakes wait_event()
  termios saved{};   // the terminal as we found it
  termios raw{};
};
SignalShared g_shared;

constexpr std::array k_stop_signals = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};
constexpr std::array k_fatal_signals = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL};

void write_fd(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void wake(char why) {
  const int saved_errno = errno;
  if (g_shared.wake_fd >= 0) (void)::write(g_shared.wake_fd, &why, 1);
  errno = saved_errno;
}

void give_terminal_back() {
  ::tcsetattr(STDIN_FILENO, TCSANOW, &g_shared.saved);
  write_fd(STDOUT_FILENO, k_leave_screen, sizeof k_leave_screen - 1);
}

extern "C" void on_stop_signal(int) {
  wake('s');
}
extern "C" void on_window_change(int) {
  wake('w');
}

extern "C" void on_fatal_signal(int signal_number) {
  if (g_shared.active.load()) give_terminal_back();
  ::signal(signal_number, SIG_DFL);
  ::raise(signal_number);  // delivered with the default action once this handler returns
}

extern "C" void on_terminal_stop(int) {
  const int saved_errno = errno;
  if (g_shared.active.load()) give_terminal_back();
  ::signal(SIGTSTP, SIG_DFL);
  ::raise(SIGTSTP);  // stops the process when this handler returns; SIGCONT resumes it
  errno = saved_errno;
}

extern "C" void on_continue(int) {
  const int saved_errno = errno;
  if (g_shared.active.load()) {
    struct sigaction action {};
    action.sa_handler = on_terminal_stop;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGTSTP, &action, nullptr);
    ::tcsetattr(STDIN_FILENO, TCSANOW, &g_shared.raw);
    write_fd(STDOUT_FILENO, k_enter_screen, sizeof k_enter_screen - 1);
    wake('w');
  }
  errno = saved_errno;
}

}  // namespace

struct TerminalSession::State {
  UniqueFd wake_read;
  UniqueFd wake_write;
  std::string pending;  // keys read but not yet returned
  struct Saved {
    int signal_number;
    struct sigaction action;
  };
  std::vector<Saved> previous_handlers;
};

Result<std::unique_ptr<TerminalSession>> TerminalSession::open() {
  if (::isatty(STDIN_FILENO) != 1)
    return make_error(ErrorCode::unavailable, "opening the terminal: standard input is not a terminal");
  if (::isatty(STDOUT_FILENO) != 1)
    return make_error(ErrorCode::unavailable, "opening the terminal: standard output is not a terminal");
  if (g_shared.active.load())
    return make_error(ErrorCode::internal, "opening the terminal: a full-screen session is already open");

  auto state = std::make_unique<State>();
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    return std::unexpected(posix_error("creating a pipe", errno));
  state->wake_read = UniqueFd(fds[0]);
  state->wake_write = UniqueFd(fds[1]);

  termios saved{};
  if (::tcgetattr(STDIN_FILENO, &saved) != 0)
    return std::unexpected(posix_error("reading the terminal's settings", errno));
  termios raw = saved;
  // Raw input as cfmakeraw, but output processing (\n -> \r\n) stays on.
  raw.c_iflag &= ~static_cast<tcflag_t>(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
  raw.c_lflag &= ~static_cast<tcflag_t>(ECHO | ICANON | IEXTEN | ISIG);
  raw.c_cc[VMIN] = 1;
  raw.c_cc[VTIME] = 0;

  g_shared.saved = saved;
  g_shared.raw = raw;
  g_shared.wake_fd = state->wake_write.get();
  g_shared.active.store(true);

  auto install = [&](int signal_number, void (*handler)(int)) {
    struct sigaction action {};
    action.sa_handler = handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: poll() returns EINTR and sees the wake byte at once
    State::Saved previous{signal_number, {}};
    if (::sigaction(signal_number, &action, &previous.action) == 0)
      state->previous_handlers.push_back(previous);
  };
  for (int s : k_stop_signals) install(s, on_stop_signal);
  for (int s : k_fatal_signals) install(s, on_fatal_signal);
  install(SIGWINCH, on_window_change);
  install(SIGTSTP, on_terminal_stop);
  install(SIGCONT, on_continue);

  // From here on the destructor restores everything.
  std::unique_ptr<TerminalSession> session(new TerminalSession(std::move(state)));
  if (::tcsetattr(STDIN_FILENO, TCSANOW, &raw) != 0)
    return std::unexpected(posix_error("switching the terminal to raw input", errno));
  session->write(k_enter_screen);
  return session;
}

TerminalSession::TerminalSession(std::unique_ptr<State> state) : m_state(std::move(state)) {}

TerminalSession::~TerminalSession() {
  give_terminal_back();
  g_shared.active.store(false);
  for (auto it = m_state->previous_handlers.rbegin(); it != m_state->previous_handlers.rend(); ++it)
    ::sigaction(it->signal_number, &it->action, nullptr);
  g_shared.wake_fd = -1;
}

TerminalSize TerminalSession::size() const {
  return terminal_size().value_or(TerminalSize{80, 24});
}

TerminalEvent TerminalSession::wait_event(std::chrono::milliseconds timeout) {
  auto take_pending = [&]() {
    TerminalEvent event{TerminalEvent::Kind::key, static_cast<unsigned char>(m_state->pending.front())};
    m_state->pending.erase(0, 1);
    return event;
  };
  if (!m_state->pending.empty()) return take_pending();

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {m_state->wake_read.get(), POLLIN, 0}};
    int n = ::poll(fds, 2, static_cast<int>(std::max<long long>(left.count(), 0)));
    if (n < 0 && errno != EINTR) return {TerminalEvent::Kind::stop, 0};
    if (n > 0 && (fds[1].revents & POLLIN)) {
      char buffer[64];
      ssize_t got = ::read(m_state->wake_read.get(), buffer, sizeof buffer);
      bool resized = false;
      for (ssize_t i = 0; i < got; ++i) {
        if (buffer[i] == 's') return {TerminalEvent::Kind::stop, 0};
        resized = resized || buffer[i] == 'w';
      }
      if (resized) return {TerminalEvent::Kind::resize, 0};
    }
    if (n > 0 && (fds[0].revents & POLLIN)) {
      char buffer[64];
      ssize_t got = ::read(STDIN_FILENO, buffer, sizeof buffer);
      if (got == 0) return {TerminalEvent::Kind::stop, 0};  // the terminal went away
      if (got > 0) {
        m_state->pending.append(buffer, static_cast<std::size_t>(got));
        return take_pending();
      }
    } else if (n > 0 && (fds[0].revents & (POLLHUP | POLLERR | POLLNVAL))) {
      return {TerminalEvent::Kind::stop, 0};
    }
    if (std::chrono::steady_clock::now() >= deadline) return {TerminalEvent::Kind::timeout, 0};
  }
}

void TerminalSession::write(std::string_view text) {
  write_fd(STDOUT_FILENO, text.data(), text.size());
}

std::optional<TerminalSize> terminal_size() {
  winsize size{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0 || size.ws_col == 0 || size.ws_row == 0)
    return std::nullopt;
  return TerminalSize{size.ws_col, size.ws_row};
}

}  // namespace gpuhost::platform
