#pragma once
// JSON forms of plan results (schema: doc/plan-json.md).

#include "base/json.h"
#include "plan/memory.h"
#include "plan/ranking.h"

namespace gpuhost::plan {

[[nodiscard]] json::Value to_json(const MemoryEstimate& estimate);
[[nodiscard]] json::Value to_json(const Ranking& ranking);

}  // namespace gpuhost::plan
