#pragma once
// The GPU memory a training or inference job needs per GPU, itemised and explained.
// Pure functions; every formula is pinned by memory_test.cc with a hand-worked example.

#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "plan/model.h"

namespace gpuhost::plan {

enum class Method { full, lora, qlora, inference };
// Full fine-tuning: fp32 (everything fp32), mixed (bf16 weights/grads + fp32 master and states),
// bf16 (pure bf16, no master copy). LoRA: the frozen base is fp32 or 16-bit. Inference: weights.
enum class Precision { fp32, mixed, bf16 };
enum class Optimizer { adamw, adamw_8bit, sgd };
enum class Checkpointing { none, selective, full };
// ZeRO stages as in Rajbhandari et al. (arXiv 1910.02054); FSDP FULL_SHARD = stage 3,
// SHARD_GRAD_OP = stage 2; plain DDP = none.
enum class Sharding { none, zero1, zero2, zero3 };
enum class WeightFormat { fp32, bf16, int8, int4 };
// CPU offload of model states (DeepSpeed offload_optimizer / offload_param, FSDP CPUOffload):
// optimizer: the optimizer states and the gradients live on the CPU (ZeRO-Offload); all: the
// parameters too (ZeRO-3 offload_param, FSDP offload_params).
enum class Offload { none, optimizer, all };
// The training stack, where its documented memory behaviour differs from the formulas' default
// (Hugging Face transformers/PEFT/TRL, and what trains like it: Lightning, plain PyTorch).
// unsloth: offloaded gradient checkpointing (layer inputs in CPU memory) and Cut Cross Entropy
// (no logits stored), unsloth.ai/blog/llama3-3. DeepSpeed and FSDP are --sharding / --offload.
enum class Framework { hf, unsloth };

[[nodiscard]] const char* method_name(Method m);
[[nodiscard]] const char* offload_name(Offload o);
[[nodiscard]] const char* framework_name(Framework f);
[[nodiscard]] const char* precision_name(Precision p);
[[nodiscard]] const char* optimizer_name(Optimizer o);
[[nodiscard]] const char* checkpointing_name(Checkpointing c);
[[nodiscard]] const char* sharding_name(Sharding s);
[[nodiscard]] const char* weight_format_name(WeightFormat w);

// CUDA context + kernels measured by the Hugging Face transformers docs ("model_memory_anatomy":
// torch.ones((1,1)).to("cuda") -> "GPU memory occupied: 1343 MB").
inline constexpr double k_default_context_mib = 1343;
// Allocator fragmentation margin on top of the tensors. gpuhost's assumption: no sourced default
// exists (shared/research/03 section 7); users set it with --headroom.
inline constexpr double k_default_headroom = 0.10;

struct JobSetup {
  Method method = Method::full;
  Precision precision = Precision::mixed;
  Optimizer optimizer = Optimizer::adamw;
  int batch = 1;       // micro-batch per GPU
  int seq = 0;         // tokens per sample; 0: 2048 (decoder) or the model's decoder_seq
  int grad_accum = 1;  // does not change peak memory; reported for the effective batch
  Checkpointing checkpointing = Checkpointing::none;
  bool flash_attention = true;
  Sharding sharding = Sharding::none;
  Offload offload = Offload::none;  // needs sharding; all needs zero3 (fsdp); full fine-tuning only
  Framework framework = Framework::hf;
  int gpus = 1;  // data-parallel GPUs the job is spread over
  int lora_rank = 16;
  std::vector<std::string> lora_targets = {"q", "k", "v", "o"};  // q k v o gate up down
  bool double_quant = true;     // QLoRA double quantisation of the NF4 constants
  bool paged_optimizer = true;  // QLoRA paged AdamW (spikes go to CPU memory)
  WeightFormat inference_weights = WeightFormat::bf16;
  int image_size = 0;  // calibrated presets; 0: the preset's default_input
  double context_bytes = k_default_context_mib * 1024 * 1024;
  double headroom = k_default_headroom;
};

// One line of the estimate. `bytes` is per GPU.
struct MemoryItem {
  std::string id;           // "weights", "gradients", "optimizer", "adapters", "activations",
                            // "kv_cache", "logits", "context", "headroom"
  std::string label;        // "weights (bf16)"
  double bytes = 0;
  std::string explanation;  // the formula with the numbers put in
};

struct MemoryEstimate {
  std::vector<MemoryItem> items;
  double total_bytes = 0;  // per GPU
  double trainable_params = 0;
  int seq = 0;  // the sequence length used
  // "formula", "layer_table" (a preset's activations from its layers), "calibrated" (a preset
  // scaled from a measurement) or "incomplete" (a term is unknown: the total is a lower bound).
  std::string basis = "formula";
  std::vector<std::string> notes;

  [[nodiscard]] double item_bytes(std::string_view id) const;
};

// invalid_argument for impossible setups: zero batch/seq/gpus/rank, unknown LoRA target, QLoRA
// or KV cache on a model without a transformer shape, heads not dividing hidden.
[[nodiscard]] Result<MemoryEstimate> estimate_memory(const ModelSpec& model, const JobSetup& setup);

// The largest micro-batch (or sequence length) whose estimate fits in `gpu_memory_bytes`;
// nullopt when even 1 does not fit. Searches up to 65,536 / 1,048,576.
[[nodiscard]] Result<std::optional<int>> largest_batch(const ModelSpec& model, JobSetup setup,
                                                       double gpu_memory_bytes);
[[nodiscard]] Result<std::optional<int>> largest_seq(const ModelSpec& model, JobSetup setup,
                                                     double gpu_memory_bytes);

}  // namespace gpuhost::plan
