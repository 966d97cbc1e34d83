#include "doctor/rules.h"

namespace gpuhost::doctor {

Findings evaluate(const HostFacts& facts, const knowledge::Knowledge& knowledge) {
  Findings out;
  judge_host(facts, out);
  judge_gpu(facts, knowledge, out);
  judge_cuda(facts, knowledge, out);
  judge_frameworks(facts, knowledge, out);
  judge_os(facts, out);
  judge_security(facts, out);
  judge_preflight(facts, knowledge, out);
  return out;
}

}  // namespace gpuhost::doctor
