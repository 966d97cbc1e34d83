#include "supervise/drill.h"

#include <cmath>
#include <string>

#include "base/strings.h"

namespace gpuhost::supervise {

using std::chrono::milliseconds;

Result<Drill> parse_drill(std::string_view text) {
  auto usage = [&] {
    return make_error(ErrorCode::invalid_argument,
                      "bad drill '" + std::string(text) + "': use preempt@SECONDS[/DEADLINE_SECONDS] or kill@SECONDS");
  };
  auto at = text.find('@');
  if (at == std::string_view::npos) return usage();
  Drill drill;
  std::string_view action = text.substr(0, at);
  if (action == "preempt") {
    drill.action = Drill::Action::preempt;
  } else if (action == "kill") {
    drill.action = Drill::Action::kill;
  } else {
    return usage();
  }
  std::string_view rest = text.substr(at + 1);
  std::string_view lead;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    if (drill.action != Drill::Action::preempt) return usage();
    lead = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  auto seconds = parse_double(rest);
  if (!seconds || *seconds < 0 || !std::isfinite(*seconds)) return usage();
  drill.at = milliseconds(static_cast<std::int64_t>(std::llround(*seconds * 1000)));
  if (!lead.empty()) {
    auto lead_seconds = parse_double(lead);
    if (!lead_seconds || *lead_seconds < 1 || !std::isfinite(*lead_seconds)) return usage();
    drill.lead = std::chrono::seconds(static_cast<std::int64_t>(std::llround(*lead_seconds)));
  }
  return drill;
}

}  // namespace gpuhost::supervise
