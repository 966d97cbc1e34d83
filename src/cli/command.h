#pragma once

#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cli/args.h"
#include "cli/terminal_style.h"

namespace gpuhost::cli {

// What every command receives. Streams are borrowed from cli::run and outlive the call.
struct CommandContext {
  std::vector<std::string> args;  // after the command name
  std::ostream& out;
  std::ostream& err;
};

// Flags every command accepts; listed in each command's help.
inline constexpr FlagSpec k_common_flags[] = {
    {"--json", false},
    {"--color", true},
    {"--no-color", false},
    {"--help", false, "-h"},
};

// Options shared by every command, parsed from the common flags.
struct CommonOptions {
  bool json = false;
  bool help = false;
  ColorMode color = ColorMode::automatic;
};

// Splits the common flags out of a command's parsed arguments. invalid_argument for a bad --color.
[[nodiscard]] Result<CommonOptions> common_options(const ParsedArgs& parsed);

// A subcommand: one row of the table in commands.cc.
struct Command {
  std::string_view name;
  std::string_view summary;  // one line for `gpuhost help`
  std::string_view help;     // full --help text: usage, flags, examples, exit codes
  int (*run)(CommandContext& context);
};

[[nodiscard]] std::span<const Command> commands();
[[nodiscard]] const Command* find_command(std::string_view name);

// Prints "gpuhost: error: <message>" (and "hint: <hint>" when given) to `err`; returns `code`.
int report_error(std::ostream& err, std::string_view message, std::string_view hint, int code);

}  // namespace gpuhost::cli
