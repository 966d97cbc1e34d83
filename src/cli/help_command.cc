#include <algorithm>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"

namespace gpuhost::cli {

const char k_help_help[] = R"(Usage: gpuhost help [COMMAND] [--json]

Shows the list of commands, or the full help of one command (the same as COMMAND --help).
With --json: {"commands": [{"name", "summary"}...]}, or {"name", "summary", "help"} of one.

Examples:
  gpuhost help
  gpuhost help doctor
  gpuhost help --json | jq -r '.commands[].name'
)";

int run_help(CommandContext& context) {
  std::vector<std::string> positionals;
  bool as_json = false;
  for (const auto& a : context.args) {
    if (a == "--json") as_json = true;
    if (!a.starts_with("-")) positionals.push_back(a);
  }
  if (!positionals.empty()) {
    const Command* command = find_command(positionals.front());
    if (!command) {
      std::vector<std::string> names;
      for (const auto& c : commands()) names.emplace_back(c.name);
      std::string message = "no help for unknown command '" + positionals.front() + "'";
      if (auto close = closest_match(positionals.front(), names)) message += " (did you mean '" + *close + "'?)";
      return report_error(context.err, message, "run 'gpuhost help' for the list of commands", k_exit_usage);
    }
    if (as_json) {
      json::Value doc = json::Value::object();
      doc["name"] = std::string(command->name);
      doc["summary"] = std::string(command->summary);
      doc["help"] = std::string(command->help);
      context.out << json::dump(doc, 2) << "\n";
      return k_exit_ok;
    }
    context.out << command->help;
    return k_exit_ok;
  }
  if (as_json) {
    json::Value list = json::Value::array();
    for (const auto& c : commands()) {
      json::Value item = json::Value::object();
      item["name"] = std::string(c.name);
      item["summary"] = std::string(c.summary);
      list.push_back(std::move(item));
    }
    json::Value doc = json::Value::object();
    doc["commands"] = std::move(list);
    context.out << json::dump(doc, 2) << "\n";
    return k_exit_ok;
  }
  context.out << "gpuhost - take a rented GPU server from bare to training, and keep it training.\n\n"
              << "Usage: gpuhost COMMAND [FLAGS]\n\nCommands:\n";
  std::size_t width = 0;
  for (const auto& c : commands()) width = std::max(width, c.name.size());
  for (const auto& c : commands())
    context.out << "  " << c.name << std::string(width - c.name.size() + 3, ' ') << c.summary << "\n";
  context.out << "\nEvery command accepts --json (machine-readable output), --no-color / --color=auto|always|never,\n"
              << "and --help. Colour is off when NO_COLOR is set or output is not a terminal.\n"
              << "Exit codes: 0 ok, 1 checks failed, 2 bad command line, 3 could not run, 4 job failed,\n"
              << "75 preempted (run again to resume), 130 interrupted (doc/exit-codes.md).\n\n"
              << "Examples:\n"
              << "  gpuhost doctor                                    check this host\n"
              << "  gpuhost doctor --json --save r.json               save a report to send to someone\n"
              << "  gpuhost doctor --from r.json                      judge a report from another host\n"
              << "  gpuhost bench --quick                             disk, memory and GPU against the bands\n"
              << "  gpuhost plan llama-3-8b --method lora --gpu-hours 20 --reference-gpu A100\n";
  return k_exit_ok;
}

}  // namespace gpuhost::cli
