#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advise/observation.h"
#include "base/json.h"

namespace gpuhost::advise {

// A verdict needs two signals that agree (the GPU waits and the loader is saturated); a hint
// rests on one signal, or on one the advisor cannot confirm (NVML cannot see pinned memory).
enum class Strength { verdict, hint };
[[nodiscard]] const char* strength_name(Strength strength);

// What limits the job: the evidence, the limit it points to, the fix in the trainer's framework,
// the change to expect in step time, and where each threshold comes from.
struct Finding {
  std::string id;  // "input_bound", "memory_full", ...
  Strength strength = Strength::verdict;
  std::optional<unsigned> gpu;  // the GPU it is about, when it is about one
  std::string limit;
  std::vector<std::string> evidence;
  std::string fix;
  std::string expected;
  std::vector<std::string> sources;
};

// Judges one observation. A healthy job (busy GPU, memory with room, no throttling, no swap)
// gets no finding. Thresholds are the anchors' (research 08 §A8), cited in each finding.
[[nodiscard]] std::vector<Finding> judge(const Observation& observation);

// Lightning's suggestion for DataLoader workers: max(1, cpus / local processes - 1)
// (lightning/fabric/utilities/data.py, suggested_max_num_workers).
[[nodiscard]] unsigned suggested_workers(unsigned cpus, unsigned local_processes);

[[nodiscard]] json::Value to_json(const Finding& finding);
[[nodiscard]] json::Value to_json(const Observation& observation);

}  // namespace gpuhost::advise
