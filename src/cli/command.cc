#include "cli/command.h"

#include <ostream>

namespace gpuhost::cli {

Result<CommonOptions> common_options(const ParsedArgs& parsed) {
  CommonOptions options;
  options.json = parsed.has("--json");
  options.help = parsed.has("--help");
  if (parsed.has("--no-color")) options.color = ColorMode::never;
  if (auto color = parsed.value("--color")) {
    if (*color == "auto")
      options.color = ColorMode::automatic;
    else if (*color == "always")
      options.color = ColorMode::always;
    else if (*color == "never")
      options.color = ColorMode::never;
    else
      return make_error(ErrorCode::invalid_argument, "--color must be auto, always or never, not '" + *color + "'");
  }
  return options;
}

int report_error(std::ostream& err, std::string_view message, std::string_view hint, int code) {
  err << "gpuhost: error: " << message << "\n";
  if (!hint.empty()) err << "hint: " << hint << "\n";
  return code;
}

}  // namespace gpuhost::cli
