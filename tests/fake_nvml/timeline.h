#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/json.h"

namespace fake_nvml {

// A device's values over time (README.md, "Timeline"): the scenario's device object is stage 0;
// each entry of its "timeline" array, {"at_s": T, ...values...}, is merged over the stage before
// it (objects key by key, everything else replaced) and holds from T seconds on the fake clock.
// "timeline_repeat_s": P makes the timeline start again every P seconds (a GPU busy in bursts).
class Timeline {
 public:
  Timeline() = default;
  // The device object's stages; `error` says why a malformed timeline was refused.
  static bool build(const gpuhost::json::Value& device, Timeline& out, std::string& error);

  // The device's values at `seconds` on the fake clock.
  [[nodiscard]] const gpuhost::json::Value& at(double seconds) const;

 private:
  std::vector<std::pair<double, gpuhost::json::Value>> m_stages;  // ascending start times; [0] at 0
  double m_repeat = 0;
};

// Seconds on the fake clock: the number in `clock_file` when one is named (a test moves the clock
// by rewriting it; unreadable or empty counts as 0), else seconds since `start_seconds` on the
// steady clock (real time since the scenario was loaded).
double fake_clock_seconds(const std::string& clock_file, double start_seconds);
double steady_seconds();

}  // namespace fake_nvml
