#include "cli/cli.h"

#include <exception>
#include <iostream>
#include <vector>

#include "base/strings.h"
#include "cli/command.h"
#include "cli/exit_codes.h"
#include "platform/system_info.h"

namespace gpuhost::cli {

int run(int argc, char** argv) {
  platform::prepare_console();
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  try {
    if (args.empty()) {
      std::vector<std::string> help_args;
      CommandContext context{help_args, std::cout, std::cerr};
      find_command("help")->run(context);
      return k_exit_usage;
    }
    std::string name = args.front();
    if (name == "--help" || name == "-h") name = "help";
    if (name == "--version" || name == "-V") name = "version";
    const Command* command = find_command(name);
    if (!command) {
      std::vector<std::string> names;
      for (const auto& c : commands()) names.emplace_back(c.name);
      std::string message = "unknown command '" + name + "'";
      if (auto close = closest_match(name, names)) message += " (did you mean '" + *close + "'?)";
      return report_error(std::cerr, message, "run 'gpuhost help' for the list of commands", k_exit_usage);
    }
    CommandContext context{std::vector<std::string>(args.begin() + 1, args.end()), std::cout, std::cerr};
    int code = command->run(context);
    std::cout.flush();
    return code;
  } catch (const std::exception& e) {
    return report_error(std::cerr, std::string("internal error: ") + e.what(),
                        "this is a bug in gpuhost; please report it with the command line", k_exit_error);
  }
}

}  // namespace gpuhost::cli
