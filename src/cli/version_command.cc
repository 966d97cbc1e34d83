#include <ostream>

#include "base/json.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "platform/system_info.h"

#ifndef GPUHOST_VERSION
#define GPUHOST_VERSION "0.0.0"
#endif

namespace gpuhost::cli {

const char k_version_help[] = R"(Usage: gpuhost version [--json]

Prints gpuhost's version, the OS it was built for and the compiler.

Examples:
  gpuhost version
  gpuhost version --json
)";

int run_version(CommandContext& context) {
  static constexpr FlagSpec specs[] = {{"--json", false}, {"--color", true}, {"--no-color", false},
                                       {"--help", false, "-h"}};
  auto parsed = parse_args(context.args, specs);
  if (!parsed) return report_error(context.err, parsed.error().message, "gpuhost version --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_version_help;
    return k_exit_ok;
  }
  const char* os = platform::os_family_name(platform::current_os());
  if (common->json) {
    json::Value v;
    v["version"] = GPUHOST_VERSION;
    v["os"] = os;
    v["compiler"] = __VERSION__;
    context.out << json::dump(v, 2) << "\n";
  } else {
    context.out << "gpuhost " << GPUHOST_VERSION << " (" << os << ", " << __VERSION__ << ")\n";
  }
  return k_exit_ok;
}

}  // namespace gpuhost::cli
