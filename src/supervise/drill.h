#pragma once

#include <chrono>
#include <string_view>

#include "base/error.h"

namespace gpuhost::supervise {

// A rehearsal: `preempt@T[/D]` delivers a preemption notice T seconds after the first child
// start with a deadline D seconds later (default 30, the shortest any cloud gives); `kill@T`
// SIGKILLs the child's whole tree at T, as a crash or an OOM kill would.
struct Drill {
  enum class Action { preempt, kill } action = Action::preempt;
  std::chrono::milliseconds at{0};
  std::chrono::seconds lead{30};
};

// Parses "preempt@30", "preempt@12.5/20", "kill@8". invalid_argument with the accepted forms.
[[nodiscard]] Result<Drill> parse_drill(std::string_view text);

}  // namespace gpuhost::supervise
