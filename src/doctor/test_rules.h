// For doctor's tests: one layer's rules run on given facts against the embedded knowledge.
#pragma once

#include "doctor/rules.h"
#include "knowledge/test_knowledge.h"

namespace gpuhost::doctor::testing {

inline Findings gpu_findings(const HostFacts& facts) {
  Findings out;
  judge_gpu(facts, knowledge::testing::embedded_knowledge(), out);
  return out;
}

}  // namespace gpuhost::doctor::testing
