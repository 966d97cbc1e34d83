#include "plan/flops.h"

namespace gpuhost::plan {

Result<TrainingFlops> training_flops_per_token(const ModelSpec& model, int seq_len) {
  if (model.architecture != Architecture::decoder)
    return make_error(
        ErrorCode::unsupported,
        model.name + " is " +
            (model.is_transformer() ? "an encoder-decoder" : "a vision or diffusion preset") +
            ": gpuhost computes MFU from 6N + 12·L·H·Q·T for decoder-only transformers; have the "
            "trainer print its own mfu");
  if (seq_len < 1) return make_error(ErrorCode::invalid_argument, "the sequence length must be at least 1");
  TrainingFlops flops;
  const double params = model.params > 0 ? model.params : model.shape_params();
  const double embedding = static_cast<double>(model.vocab) * model.hidden;
  flops.matmul_params = model.tied_embeddings ? params : params - embedding;
  flops.attention = 12.0 * model.layers * model.heads * model.effective_head_dim() * seq_len;
  flops.per_token = 6 * flops.matmul_params + flops.attention;
  return flops;
}

}  // namespace gpuhost::plan
