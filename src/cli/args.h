#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::cli {

// One accepted flag. `name` includes the dashes ("--json"); `short_name` is optional ("-h").
struct FlagSpec {
  std::string_view name;
  bool takes_value = false;
  std::string_view short_name = {};
};

// The command line after parsing: flags in the order given, then positionals. Everything after a
// bare "--" is a positional, flags included.
struct ParsedArgs {
  std::vector<std::pair<std::string, std::string>> flags;  // (name, value or "")
  std::vector<std::string> positionals;

  [[nodiscard]] bool has(std::string_view name) const;
  // The last value given for `name`.
  [[nodiscard]] std::optional<std::string> value(std::string_view name) const;
  [[nodiscard]] std::vector<std::string> values(std::string_view name) const;
};

// Pure: accepts "--flag value", "--flag=value", "-h". Errors (invalid_argument) name the flag and
// suggest the closest accepted one: "unknown flag '--jsno' (did you mean '--json'?)".
[[nodiscard]] Result<ParsedArgs> parse_args(std::span<const std::string> args, std::span<const FlagSpec> specs);

}  // namespace gpuhost::cli
