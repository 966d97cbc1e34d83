#pragma once
// gpuhost run --model NAME --seq T [--tokens-per-step N] [--dtype bf16]: what the advisor computes
// MFU from when the trainer prints none (supervise::MfuBasis): plan's FLOPs per token for the
// model (plan/flops.h) and the dense tensor peak of the job's GPUs for the dtype, from
// data/gpus.json's spec-sheet numbers (knowledge/gpus.h).

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "supervise/supervisor.h"

namespace gpuhost::cli {

struct MfuRequest {
  std::string model;  // a catalog name or alias, or a Hugging Face config.json path
  int seq = 0;        // tokens per sequence
  std::optional<double> tokens_per_step;
  std::string dtype = "bf16";  // bf16, fp16, tf32 or fp32
};

// invalid_argument for an unknown model (with plan's "did you mean"), a model the formula does not
// describe, a bad dtype or a GPU with no published dense peak for it; parse_error for a
// config.json that cannot be read. `gpu_names` are the NVML names of the GPUs the job uses (one
// entry per GPU); an empty list: no GPU seen, nothing to compute against (invalid_argument).
[[nodiscard]] Result<supervise::MfuBasis> mfu_basis_for(const MfuRequest& request,
                                                        const std::vector<std::string>& gpu_names);

}  // namespace gpuhost::cli
