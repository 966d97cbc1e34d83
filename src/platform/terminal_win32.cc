#include <algorithm>
#include <atomic>
#include <string>

#include <windows.h>

#include "platform/terminal.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {
namespace {

// Alternate screen and cursor visibility, which Windows consoles accept with
// ENABLE_VIRTUAL_TERMINAL_PROCESSING ("Console Virtual Terminal Sequences", Microsoft Learn:
// https://learn.microsoft.com/windows/console/console-virtual-terminal-sequences).
constexpr char k_enter_screen[] = "\x1b[?1049h\x1b[?25l";
constexpr char k_leave_screen[] = "\x1b[0m\x1b[?25h\x1b[?1049l";

// Set while a session is open; the console control handler runs on a thread of its own.
std::atomic<HANDLE> g_stop_event{nullptr};

BOOL WINAPI on_console_event_in_session(DWORD event) {
  HANDLE stop = g_stop_event.load();
  if (!stop) return FALSE;
  switch (event) {
    case CTRL_C_EVENT:  // only when another program sends it: the session's input is not processed
    case CTRL_BREAK_EVENT: SetEvent(stop); return TRUE;
    case CTRL_CLOSE_EVENT:
    case CTRL_LOGOFF_EVENT:
    case CTRL_SHUTDOWN_EVENT:
      // The process ends when this returns; the console goes with it, so there is nothing to restore.
      SetEvent(stop);
      return FALSE;
    default: return FALSE;
  }
}

std::optional<TerminalSize> console_size(HANDLE output) {
  CONSOLE_SCREEN_BUFFER_INFO info{};
  if (!GetConsoleScreenBufferInfo(output, &info)) return std::nullopt;
  TerminalSize size{info.srWindow.Right - info.srWindow.Left + 1,
                    info.srWindow.Bottom - info.srWindow.Top + 1};
  if (size.columns <= 0 || size.rows <= 0) return std::nullopt;
  return size;
}

}  // namespace

struct TerminalSession::State {
  HANDLE input = nullptr;  // the process's standard handles: borrowed, never closed
  HANDLE output = nullptr;
  DWORD saved_input_mode = 0;
  DWORD saved_output_mode = 0;
  UniqueHandle stop_event;
  std::u32string pending;  // keys read but not yet returned
};

Result<std::unique_ptr<TerminalSession>> TerminalSession::open() {
  auto state = std::make_unique<State>();
  state->input = GetStdHandle(STD_INPUT_HANDLE);
  state->output = GetStdHandle(STD_OUTPUT_HANDLE);
  if (!GetConsoleMode(state->input, &state->saved_input_mode))
    return make_error(ErrorCode::unavailable, "opening the console: standard input is not a console");
  if (!GetConsoleMode(state->output, &state->saved_output_mode))
    return make_error(ErrorCode::unavailable, "opening the console: standard output is not a console");
  if (g_stop_event.load())
    return make_error(ErrorCode::internal, "opening the console: a full-screen session is already open");
  state->stop_event.reset(CreateEventW(nullptr, TRUE, FALSE, nullptr));
  if (!state->stop_event.valid()) return std::unexpected(win32_error("creating an event", GetLastError()));

  if (!SetConsoleMode(state->output, state->saved_output_mode | ENABLE_PROCESSED_OUTPUT |
                                         ENABLE_VIRTUAL_TERMINAL_PROCESSING))
    return make_error(ErrorCode::unsupported,
                      "opening the console: it does not process VT sequences (Windows 10 1511 or later "
                      "has them; Windows Terminal and conhost do)");
  // Without processed input Ctrl-C arrives as a key (0x03) instead of a signal; window input
  // reports resizes.
  const DWORD input_mode =
      (state->saved_input_mode &
       ~static_cast<DWORD>(ENABLE_PROCESSED_INPUT | ENABLE_LINE_INPUT | ENABLE_ECHO_INPUT |
                           ENABLE_MOUSE_INPUT | ENABLE_VIRTUAL_TERMINAL_INPUT)) |
      ENABLE_WINDOW_INPUT;
  if (!SetConsoleMode(state->input, input_mode)) {
    auto error = win32_error("switching the console to raw input", GetLastError());
    SetConsoleMode(state->output, state->saved_output_mode);
    return std::unexpected(error);
  }
  g_stop_event.store(state->stop_event.get());
  SetConsoleCtrlHandler(on_console_event_in_session, TRUE);

  std::unique_ptr<TerminalSession> session(new TerminalSession(std::move(state)));
  session->write(k_enter_screen);
  return session;
}

TerminalSession::TerminalSession(std::unique_ptr<State> state) : m_state(std::move(state)) {}

TerminalSession::~TerminalSession() {
  write(k_leave_screen);
  SetConsoleMode(m_state->input, m_state->saved_input_mode);
  SetConsoleMode(m_state->output, m_state->saved_output_mode);
  SetConsoleCtrlHandler(on_console_event_in_session, FALSE);
  g_stop_event.store(nullptr);
}

TerminalSize TerminalSession::size() const {
  return console_size(m_state->output).value_or(TerminalSize{80, 24});
}

TerminalEvent TerminalSession::wait_event(std::chrono::milliseconds timeout) {
  auto take_pending = [&]() {
    TerminalEvent event{TerminalEvent::Kind::key, m_state->pending.front()};
    m_state->pending.erase(0, 1);
    return event;
  };
  if (!m_state->pending.empty()) return take_pending();

  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    HANDLE handles[2] = {m_state->stop_event.get(), m_state->input};
    DWORD waited =
        WaitForMultipleObjects(2, handles, FALSE, static_cast<DWORD>(std::max<long long>(left.count(), 0)));
    if (waited == WAIT_TIMEOUT) return {TerminalEvent::Kind::timeout, 0};
    if (waited != WAIT_OBJECT_0 + 1) return {TerminalEvent::Kind::stop, 0};

    INPUT_RECORD records[32];
    DWORD count = 0;
    if (!ReadConsoleInputW(m_state->input, records, 32, &count)) return {TerminalEvent::Kind::stop, 0};
    bool resized = false;
    for (DWORD i = 0; i < count; ++i) {
      const INPUT_RECORD& r = records[i];
      if (r.EventType == KEY_EVENT && r.Event.KeyEvent.bKeyDown && r.Event.KeyEvent.uChar.UnicodeChar != 0)
        m_state->pending.push_back(static_cast<char32_t>(r.Event.KeyEvent.uChar.UnicodeChar));
      else if (r.EventType == WINDOW_BUFFER_SIZE_EVENT)
        resized = true;
    }
    if (!m_state->pending.empty()) return take_pending();
    if (resized) return {TerminalEvent::Kind::resize, 0};
    if (std::chrono::steady_clock::now() >= deadline) return {TerminalEvent::Kind::timeout, 0};
  }
}

void TerminalSession::write(std::string_view text) {
  // WriteConsoleW: UTF-8 names (GPU, process) show right whatever the console's code page.
  const std::wstring wide = to_wide(text);
  const wchar_t* data = wide.data();
  std::size_t left = wide.size();
  while (left > 0) {
    DWORD written = 0;
    const DWORD chunk = static_cast<DWORD>(std::min<std::size_t>(left, 16384));
    if (!WriteConsoleW(m_state->output, data, chunk, &written, nullptr) || written == 0) return;
    data += written;
    left -= written;
  }
}

std::optional<TerminalSize> terminal_size() {
  return console_size(GetStdHandle(STD_OUTPUT_HANDLE));
}

}  // namespace gpuhost::platform
