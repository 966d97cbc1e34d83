#include "cli/terminal_style.h"

#include "platform/environment.h"
#include "platform/system_info.h"

namespace gpuhost::cli {

namespace {

bool wants_color(ColorMode mode, bool is_terminal) {
  if (mode == ColorMode::never) return false;
  if (mode == ColorMode::always) return true;
  auto no_color = platform::get_env("NO_COLOR");
  if (no_color && !no_color->empty()) return false;
  if (platform::get_env("TERM") == "dumb") return false;
  return is_terminal;
}

}  // namespace

TerminalStyle TerminalStyle::for_stdout(ColorMode mode) {
  return TerminalStyle(wants_color(mode, platform::stdout_is_terminal()));
}

TerminalStyle TerminalStyle::for_stderr(ColorMode mode) {
  return TerminalStyle(wants_color(mode, platform::stderr_is_terminal()));
}

std::string TerminalStyle::wrap(const char* code, std::string_view s) const {
  if (!m_color) return std::string(s);
  return std::string("\x1b[") + code + "m" + std::string(s) + "\x1b[0m";
}

}  // namespace gpuhost::cli
