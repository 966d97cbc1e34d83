#include "cli/terminal_style.h"

#include "platform/environment.h"
#include "platform/system_info.h"

namespace gpuhost::cli {

TerminalStyle TerminalStyle::for_stdout(ColorMode mode) {
  if (mode == ColorMode::never) return TerminalStyle(false);
  if (mode == ColorMode::always) return TerminalStyle(true);
  auto no_color = platform::get_env("NO_COLOR");
  if (no_color && !no_color->empty()) return TerminalStyle(false);
  if (platform::get_env("TERM") == "dumb") return TerminalStyle(false);
  return TerminalStyle(platform::stdout_is_terminal());
}

std::string TerminalStyle::wrap(const char* code, std::string_view s) const {
  if (!m_color) return std::string(s);
  return std::string("\x1b[") + code + "m" + std::string(s) + "\x1b[0m";
}

}  // namespace gpuhost::cli
