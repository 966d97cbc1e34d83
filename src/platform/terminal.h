#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string_view>

#include "base/error.h"

namespace gpuhost::platform {

struct TerminalSize {
  int columns = 0;
  int rows = 0;

  friend bool operator==(const TerminalSize&, const TerminalSize&) = default;
};

// What ended a TerminalSession::wait_event().
struct TerminalEvent {
  enum class Kind {
    timeout,  // nothing happened
    key,      // a key press: `key` holds its character
    resize,   // the window changed size (or came back from Ctrl-Z): redraw
    stop,     // SIGTERM / SIGHUP / SIGINT / SIGQUIT, console close or Ctrl-Break, or input closed
  };
  Kind kind = Kind::timeout;
  // The character typed: 'q', 0x03 for Ctrl-C (raw input delivers it as a key, not a signal),
  // 0x1b for Escape and the start of an arrow key's sequence (its other bytes follow as keys).
  // POSIX delivers input byte by byte, so a non-ASCII character arrives as its UTF-8 bytes.
  char32_t key = 0;
};

// Takes over the terminal on stdin/stdout for a full-screen view (`gpuhost top`): raw keyboard
// input (no echo, no line editing, Ctrl-C arrives as a key), the alternate screen and a hidden
// cursor. Windows: ENABLE_VIRTUAL_TERMINAL_PROCESSING on the output, the input console without
// processed/line/echo input, keys from ReadConsoleInputW.
//
// Everything is restored by the destructor (normal exit and exceptions); on POSIX also by the
// handlers this installs for SIGTERM/SIGHUP/SIGINT/SIGQUIT (reported as Kind::stop so the owner
// unwinds normally), for SIGTSTP/SIGCONT (the terminal is given back while stopped) and for fatal
// signals (SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL: restored, then the default action). The
// previous handlers come back with the destructor. Windows: Ctrl-Break and closing the console
// are reported as Kind::stop.
//
// At most one session exists at a time (the handlers are process-wide). Not thread-safe: one
// thread owns it.
class TerminalSession {
 public:
  // unavailable when stdin or stdout is not a terminal (a pipe, a file, no console);
  // unsupported when the Windows console cannot process VT sequences (before Windows 10 1511).
  [[nodiscard]] static Result<std::unique_ptr<TerminalSession>> open();

  ~TerminalSession();
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;

  // The visible window; {80, 24} when the OS will not say.
  [[nodiscard]] TerminalSize size() const;

  // Waits up to `timeout` for a key, a resize or a stop request and returns the first; keys
  // typed together come back one per call.
  [[nodiscard]] TerminalEvent wait_event(std::chrono::milliseconds timeout);

  // Writes all of `text` to the terminal (VT sequences included).
  void write(std::string_view text);

 private:
  struct State;
  explicit TerminalSession(std::unique_ptr<State> state);
  std::unique_ptr<State> m_state;
};

// The size of the terminal on stdout, or nullopt when stdout is not one.
[[nodiscard]] std::optional<TerminalSize> terminal_size();

}  // namespace gpuhost::platform
