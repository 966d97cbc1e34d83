#pragma once
// Model FLOPs per trained token of a decoder-only transformer, for MFU when the trainer prints
// none: 6N + 12·L·H·Q·T (PaLM, Chowdhery et al. 2022, Appendix B "Compute usage and MFU", the
// formula nanoGPT's estimate_mfu uses): 6N for the forward and backward matmuls over N
// parameters, 12·L·H·Q·T for attention's scores and weighted sums over the T-token context (L
// layers, H heads of size Q). Activation recomputation is not counted: MFU counts the model's
// FLOPs, not the hardware's.

#include "base/error.h"
#include "plan/model.h"

namespace gpuhost::plan {

struct TrainingFlops {
  double per_token = 0;      // 6N + 12·L·H·Q·T
  double matmul_params = 0;  // N: every parameter but the input embedding (a lookup, no FLOPs);
                             // tied embeddings are counted once, as the output head
  double attention = 0;      // 12·L·H·Q·T
};

// unsupported for a model with no transformer shape (vision and diffusion presets) or an
// encoder-decoder (its two sequence lengths are not one T); invalid_argument for seq_len < 1.
[[nodiscard]] Result<TrainingFlops> training_flops_per_token(const ModelSpec& model, int seq_len);

}  // namespace gpuhost::plan
