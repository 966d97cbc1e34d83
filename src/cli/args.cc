#include "cli/args.h"

#include "base/strings.h"

namespace gpuhost::cli {

bool ParsedArgs::has(std::string_view name) const {
  for (const auto& [n, v] : flags)
    if (n == name) return true;
  return false;
}

std::optional<std::string> ParsedArgs::value(std::string_view name) const {
  std::optional<std::string> out;
  for (const auto& [n, v] : flags)
    if (n == name) out = v;
  return out;
}

std::vector<std::string> ParsedArgs::values(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : flags)
    if (n == name) out.push_back(v);
  return out;
}

Result<ParsedArgs> parse_args(std::span<const std::string> args, std::span<const FlagSpec> specs) {
  ParsedArgs parsed;
  auto find_spec = [&](std::string_view name) -> const FlagSpec* {
    for (const auto& s : specs)
      if (s.name == name || (!s.short_name.empty() && s.short_name == name)) return &s;
    return nullptr;
  };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      parsed.positionals.insert(parsed.positionals.end(), args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      parsed.positionals.push_back(arg);
      continue;
    }
    std::string name = arg;
    std::optional<std::string> inline_value;
    if (auto eq = arg.find('='); eq != std::string::npos && arg.starts_with("--")) {
      name = arg.substr(0, eq);
      inline_value = arg.substr(eq + 1);
    }
    const FlagSpec* spec = find_spec(name);
    if (!spec) {
      std::vector<std::string> names;
      for (const auto& s : specs) names.emplace_back(s.name);
      std::string message = "unknown flag '" + name + "'";
      if (auto close = closest_match(name, names)) message += " (did you mean '" + *close + "'?)";
      return make_error(ErrorCode::invalid_argument, message);
    }
    std::string canonical(spec->name);
    if (!spec->takes_value) {
      if (inline_value) return make_error(ErrorCode::invalid_argument, "flag '" + canonical + "' takes no value");
      parsed.flags.emplace_back(canonical, "");
      continue;
    }
    if (inline_value) {
      parsed.flags.emplace_back(canonical, *inline_value);
    } else if (i + 1 < args.size()) {
      parsed.flags.emplace_back(canonical, args[++i]);
    } else {
      return make_error(ErrorCode::invalid_argument, "flag '" + canonical + "' needs a value");
    }
  }
  return parsed;
}

}  // namespace gpuhost::cli
