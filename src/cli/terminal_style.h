#pragma once

#include <string>
#include <string_view>

namespace gpuhost::cli {

enum class ColorMode { automatic, always, never };

// How human output is decorated. Colour is on only when mode allows it, NO_COLOR is unset or
// empty (https://no-color.org), TERM is not "dumb", and the stream is a terminal.
class TerminalStyle {
 public:
  static TerminalStyle for_stdout(ColorMode mode);
  static TerminalStyle for_stderr(ColorMode mode);
  static TerminalStyle plain() { return TerminalStyle(false); }

  [[nodiscard]] bool color() const { return m_color; }
  [[nodiscard]] std::string bold(std::string_view s) const { return wrap("1", s); }
  [[nodiscard]] std::string dim(std::string_view s) const { return wrap("2", s); }
  [[nodiscard]] std::string red(std::string_view s) const { return wrap("31", s); }
  [[nodiscard]] std::string green(std::string_view s) const { return wrap("32", s); }
  [[nodiscard]] std::string yellow(std::string_view s) const { return wrap("33", s); }
  [[nodiscard]] std::string cyan(std::string_view s) const { return wrap("36", s); }

 private:
  explicit TerminalStyle(bool color) : m_color(color) {}
  [[nodiscard]] std::string wrap(const char* code, std::string_view s) const;
  bool m_color = false;
};

}  // namespace gpuhost::cli
