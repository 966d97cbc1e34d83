#include "plan/memory.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/strings.h"
#include "plan/conv_activations.h"

namespace gpuhost::plan {

const char* method_name(Method m) {
  switch (m) {
    case Method::full: return "full";
    case Method::lora: return "lora";
    case Method::qlora: return "qlora";
    case Method::inference: return "inference";
  }
  return "?";
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::mixed: return "mixed";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

const char* optimizer_name(Optimizer o) {
  switch (o) {
    case Optimizer::adamw: return "adamw";
    case Optimizer::adamw_8bit: return "adamw-8bit";
    case Optimizer::sgd: return "sgd";
  }
  return "?";
}

const char* checkpointing_name(Checkpointing c) {
  switch (c) {
    case Checkpointing::none: return "none";
    case Checkpointing::selective: return "selective";
    case Checkpointing::full: return "full";
  }
  return "?";
}

const char* offload_name(Offload o) {
  switch (o) {
    case Offload::none: return "none";
    case Offload::optimizer: return "optimizer";
    case Offload::all: return "all";
  }
  return "?";
}

const char* framework_name(Framework f) {
  switch (f) {
    case Framework::hf: return "hf";
    case Framework::unsloth: return "unsloth";
  }
  return "?";
}

const char* sharding_name(Sharding s) {
  switch (s) {
    case Sharding::none: return "none";
    case Sharding::zero1: return "zero1";
    case Sharding::zero2: return "zero2";
    case Sharding::zero3: return "zero3";
  }
  return "?";
}

const char* weight_format_name(WeightFormat w) {
  switch (w) {
    case WeightFormat::fp32: return "fp32";
    case WeightFormat::bf16: return "bf16";
    case WeightFormat::int8: return "int8";
    case WeightFormat::int4: return "int4";
  }
  return "?";
}

double MemoryEstimate::item_bytes(std::string_view id) const {
  double sum = 0;
  for (const auto& item : items)
    if (item.id == id) sum += item.bytes;
  return sum;
}

namespace {

std::string num(double v) {
  char buf[64];
  if (v >= 1e9)
    std::snprintf(buf, sizeof buf, "%.3gB", v / 1e9);
  else if (v >= 1e6)
    std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string gib(double bytes) { return format_bytes(bytes); }

// Bytes per parameter of each model state for full fine-tuning. The fp32 master copy of mixed
// precision is counted with the optimizer states, as ZeRO does (K = 12 for mixed-precision Adam).
struct StateBytes {
  double weights, grads, optimizer;
};

StateBytes full_state_bytes(Precision p, Optimizer o) {
  double moments = 0;  // optimizer moments in the optimizer's own dtype
  switch (o) {
    case Optimizer::adamw: moments = p == Precision::bf16 ? 4 : 8; break;  // m and v
    case Optimizer::adamw_8bit: moments = 2; break;                        // bitsandbytes 8-bit m and v
    case Optimizer::sgd: moments = p == Precision::bf16 ? 2 : 4; break;    // momentum
  }
  switch (p) {
    case Precision::fp32: return {4, 4, moments};
    case Precision::mixed: return {2, 2, moments + 4};
    case Precision::bf16: return {2, 2, moments};
  }
  return {4, 4, moments};
}

// Korthikanti et al. 2022 (arXiv 2205.05198) eq. 1: activations of one transformer layer with
// 16-bit activations and no parallelism, bytes = s*b*h*(34 + 5*a*s/h). FlashAttention (and
// selective recomputation) does not keep the s x s scores, leaving 34*s*b*h.
double layer_activation_bytes(double s, double b, double h, double a, bool keeps_scores,
                              double per_token = 34.0) {
  return s * b * h * (per_token + (keeps_scores ? 5.0 * a * s / h : 0.0));
}

// The s*b*h coefficient of one layer. Korthikanti's 34 is 4 (two LayerNorm inputs) + 11
// (attention: QKV input 2, Q 2, K 2, V 2, projection input 2, dropout mask 1) + 19 (MLP: input
// 2, the 4h GeLU input 8 and output 8, dropout mask 1). Re-derived term by term the same way for
// a gated MLP (SwiGLU: input 2; gate, up, the activation and the product, each 2*I/h) and
// grouped-query attention (K and V kv_heads/heads as wide as Q), without dropout, as Llama-style
// models train: 4 + (6 + 4*kv_heads/heads) + (2 + 8*I/h). Llama 3 8B: 41.
double layer_per_token(const ModelSpec& m) {
  if (!m.gated_mlp || m.heads <= 0 || m.hidden <= 0) return 34.0;
  const double g = static_cast<double>(m.kv_heads > 0 ? m.kv_heads : m.heads) / m.heads;
  return 4.0 + (6.0 + 4.0 * g) + (2.0 + 8.0 * m.intermediate / m.hidden);
}

struct LayerGroup {
  int layers;
  double seq;
};

double lora_params_per_layer(const ModelSpec& m, const std::vector<std::string>& targets, int rank,
                             Result<void>& status) {
  const double h = m.hidden;
  const double hd = m.effective_head_dim();
  const double q_out = m.heads * hd;
  const double kv_out = m.kv_heads * hd;
  const double inter = m.intermediate;
  double sum = 0;
  for (const auto& t : targets) {
    double in = 0, out = 0;
    if (t == "q") in = h, out = q_out;
    else if (t == "k") in = h, out = kv_out;
    else if (t == "v") in = h, out = kv_out;
    else if (t == "o") in = q_out, out = h;
    else if (t == "gate" && m.gated_mlp) in = h, out = inter;
    else if (t == "up") in = h, out = inter;
    else if (t == "down") in = inter, out = h;
    else {
      std::string msg = "unknown LoRA target '" + t + "'";
      if (t == "gate") msg = "LoRA target 'gate': " + m.name + " has no gated MLP";
      status = make_error(ErrorCode::invalid_argument, msg + "; targets: q,k,v,o,gate,up,down or all-linear");
      return 0;
    }
    sum += rank * (in + out);
  }
  return sum;
}

Result<void> validate_setup(const JobSetup& s) {
  if (s.batch < 1) return make_error(ErrorCode::invalid_argument, "batch size must be at least 1, got " + std::to_string(s.batch));
  if (s.seq < 0) return make_error(ErrorCode::invalid_argument, "sequence length must be positive");
  if (s.gpus < 1) return make_error(ErrorCode::invalid_argument, "GPU count must be at least 1");
  if (s.grad_accum < 1) return make_error(ErrorCode::invalid_argument, "gradient accumulation steps must be at least 1");
  if ((s.method == Method::lora || s.method == Method::qlora) && s.lora_rank < 1)
    return make_error(ErrorCode::invalid_argument, "LoRA rank must be at least 1");
  if ((s.method == Method::lora || s.method == Method::qlora) && s.lora_targets.empty())
    return make_error(ErrorCode::invalid_argument, "LoRA needs at least one target module");
  if (s.headroom < 0 || s.headroom > 1) return make_error(ErrorCode::invalid_argument, "headroom must be between 0 and 100%");
  if (s.context_bytes < 0) return make_error(ErrorCode::invalid_argument, "context memory must not be negative");
  if (s.offload != Offload::none) {
    if (s.method != Method::full)
      return make_error(
          ErrorCode::invalid_argument,
          "--offload moves full fine-tuning's model states to the CPU; use it with --method full");
    if (s.sharding == Sharding::none)
      return make_error(ErrorCode::invalid_argument,
                        "--offload needs ZeRO or FSDP: --sharding zero1|zero2|zero3|fsdp (DeepSpeed offloads "
                        "from ZeRO stage 1 on)");
    if (s.offload == Offload::all && s.sharding != Sharding::zero3)
      return make_error(ErrorCode::invalid_argument,
                        "--offload all (the parameters too) needs --sharding zero3 or fsdp; ZeRO-1/2 offload "
                        "the optimizer only");
  }
  return {};
}

void finish(MemoryEstimate& e, const JobSetup& setup) {
  double tensors = 0;
  for (const auto& item : e.items) tensors += item.bytes;
  e.items.push_back({"context", "CUDA context + kernels", setup.context_bytes,
                     "measured " + num(k_default_context_mib) +
                         " MiB after the first CUDA call (Hugging Face transformers docs, model_memory_anatomy); set with --context-gib"});
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.0f%%", setup.headroom * 100);
  e.items.push_back({"headroom", "fragmentation headroom", tensors * setup.headroom,
                     std::string(pct) + " of the tensors (" + gib(tensors) +
                         "): gpuhost's default margin for allocator fragmentation, not a sourced figure; set with --headroom"});
  e.total_bytes = 0;
  for (const auto& item : e.items) e.total_bytes += item.bytes;
}

// Activations from the network's layer table, one item per stage. Under AMP (--precision mixed)
// the feature maps are 16-bit (CUDA autocast runs convolutions in fp16 and has no fp32 rule for
// batch_norm or relu: https://pytorch.org/docs/stable/amp.html#cuda-ops-that-can-autocast-to-float16);
// the fp16 weight copies each conv keeps are the "weights (mixed)" line; bf16 keeps bf16 maps.
Result<void> add_layer_table_activations(const ModelSpec& m, const JobSetup& setup, MemoryEstimate& e) {
  int input = setup.image_size > 0 ? setup.image_size : m.default_input;
  const bool yolo = m.layer_table->network == "yolov8";
  if (yolo && input % 32 != 0) {
    // Ultralytics' check_imgsz rounds an image size up to a multiple of the largest stride.
    const int rounded = (input + 31) / 32 * 32;
    e.notes.push_back("image size " + std::to_string(input) +
                      " is not a multiple of 32: Ultralytics trains it at " + std::to_string(rounded));
    input = rounded;
  }
  auto table = yolo ? yolov8_activations(m.layer_table->scale, input)
                    : resnet_activations(m.layer_table->depth, input);
  if (!table) return std::unexpected(table.error());
  const double element = setup.precision == Precision::fp32 ? 4 : 2;
  const char* dtype =
      setup.precision == Precision::fp32 ? "fp32" : (setup.precision == Precision::bf16 ? "bf16" : "fp16");
  for (const auto& stage : table->stages) {
    const double per_sample = stage.elements * element + stage.fixed_bytes;
    char buf[320];
    std::snprintf(buf, sizeof buf, "%s: %s values x %g bytes (%s)%s%s per image at %dpx x batch %d",
                  stage.shape.c_str(), num(stage.elements).c_str(), element, dtype,
                  stage.fixed_bytes > 0 ? " + " : "",
                  stage.fixed_bytes > 0 ? (gib(stage.fixed_bytes) + " " + stage.fixed_what).c_str() : "",
                  input, setup.batch);
    e.items.push_back({"activations", "activations: " + stage.name, per_sample * setup.batch, buf});
  }
  e.notes.push_back("activations of " + m.name + " from its layer table (" + table->source +
                    "); checked against PyTorch autograd's saved tensors" +
                    (yolo ? " but for the loss, counted from Ultralytics' v8DetectionLoss" : ""));
  if (yolo && setup.method != Method::inference) {
    // Ultralytics' trainer keeps an exponential moving average of the model (ModelEMA in
    // ultralytics/utils/torch_utils.py, a deep copy in fp32) beside it for the whole run.
    e.items.push_back(
        {"weights", "EMA weights (Ultralytics ModelEMA)", 4 * m.params,
         num(m.params) + " params x 4 bytes: the fp32 moving-average copy Ultralytics' trainer keeps"});
  }
  return {};
}

Result<MemoryEstimate> estimate_calibrated(const ModelSpec& m, const JobSetup& setup) {
  MemoryEstimate e;
  e.basis = "calibrated";
  const double p = m.params;
  const bool lora = m.preset_method == "lora" || setup.method == Method::lora || setup.method == Method::qlora;
  if (setup.method == Method::qlora)
    return make_error(ErrorCode::invalid_argument, "QLoRA needs a transformer shape; " + m.name + " is a calibrated preset");
  if (setup.method == Method::inference) {
    double w = p + m.frozen_params;
    e.items.push_back({"weights", "weights (16-bit)", 2 * w, num(w) + " params x 2 bytes"});
  } else if (lora) {
    double w = p + m.frozen_params;
    e.items.push_back({"weights", "frozen weights (16-bit)", 2 * w, num(w) + " params x 2 bytes"});
    e.notes.push_back("LoRA adapter size for " + m.name + " is not modelled (it depends on the trainer's target modules); adapters are usually < 1% of the weights");
    e.trainable_params = 0;
  } else {
    StateBytes sb = full_state_bytes(setup.precision, setup.optimizer);
    e.trainable_params = p;
    e.items.push_back({"weights", std::string("weights (") + precision_name(setup.precision) + ")", sb.weights * p,
                       num(p) + " params x " + num(sb.weights) + " bytes"});
    e.items.push_back({"gradients", "gradients", sb.grads * p, num(p) + " params x " + num(sb.grads) + " bytes"});
    e.items.push_back({"optimizer", std::string("optimizer states (") + optimizer_name(setup.optimizer) + ")",
                       sb.optimizer * p, num(p) + " params x " + num(sb.optimizer) + " bytes"});
    if (m.frozen_params > 0)
      e.items.push_back({"weights", "frozen weights (16-bit)", 2 * m.frozen_params, num(m.frozen_params) + " params x 2 bytes"});
  }
  if (setup.method != Method::inference) {
    if (m.layer_table) {
      e.basis = "layer_table";
      if (auto added = add_layer_table_activations(m, setup, e); !added)
        return std::unexpected(added.error());
    } else if (m.calibration) {
      const auto& c = *m.calibration;
      int input = setup.image_size > 0 ? setup.image_size : m.default_input;
      double per_sample_measured = c.measured_gib * 1024 * 1024 * 1024 / c.batch;
      double area = (static_cast<double>(input) / c.input) * (static_cast<double>(input) / c.input);
      double per_sample = per_sample_measured * area * c.relative_scale;
      char buf[256];
      std::snprintf(buf, sizeof buf, "%.3g GiB measured / batch %d = %s per image at %dpx; x (%d/%d)^2 = %.3g for %dpx; x %.3g model scale; x batch %d",
                    c.measured_gib, c.batch, gib(per_sample_measured).c_str(), c.input, input, c.input, area, input,
                    c.relative_scale, setup.batch);
      e.items.push_back({"activations", "activations (calibrated)", per_sample * setup.batch,
                         std::string(buf) + " (source: " + c.source + ")"});
    } else {
      e.basis = "incomplete";
      e.items.push_back({"activations", "activations (unknown)", 0,
                         "no published measurement to calibrate " + m.name + "'s activations: the total is a lower bound"});
    }
  }
  e.seq = 0;
  finish(e, setup);
  return e;
}

}  // namespace

Result<MemoryEstimate> estimate_memory(const ModelSpec& m, const JobSetup& setup) {
  if (auto ok_ = validate_setup(setup); !ok_) return std::unexpected(ok_.error());
  if (!m.is_transformer()) return estimate_calibrated(m, setup);
  if (auto ok_ = validate_shape(m); !ok_) return std::unexpected(ok_.error());

  MemoryEstimate e;
  const bool enc_dec = m.architecture == Architecture::encoder_decoder;
  const int seq = setup.seq > 0 ? setup.seq : (enc_dec ? m.decoder_seq : 2048);
  e.seq = seq;
  const double p = m.params > 0 ? m.params : m.shape_params();
  const double n = setup.gpus;
  const double b = setup.batch;
  const double h = m.hidden;
  const double a = m.heads;
  const double hd = m.effective_head_dim();
  const double v = m.vocab;
  const double per_block = m.block_linear_params() / std::max(1, m.layers + m.decoder_layers);
  const double largest_layer = std::max(v * h, per_block);
  const bool zero3 = setup.sharding == Sharding::zero3 && setup.gpus > 1;

  std::vector<LayerGroup> groups;
  if (enc_dec)
    groups = {{m.layers, static_cast<double>(m.encoder_seq)}, {m.decoder_layers, static_cast<double>(seq)}};
  else
    groups = {{m.layers, static_cast<double>(seq)}};

  auto shard_note = [&](double bytes, std::string text, bool sharded) -> std::pair<double, std::string> {
    if (!sharded || setup.gpus == 1) return {bytes, text};
    return {bytes / n, text + " / " + std::to_string(setup.gpus) + " GPUs (" + sharding_name(setup.sharding) + ")"};
  };

  if (setup.method == Method::inference) {
    double wb = 2;
    switch (setup.inference_weights) {
      case WeightFormat::fp32: wb = 4; break;
      case WeightFormat::bf16: wb = 2; break;
      case WeightFormat::int8: wb = 1; break;
      case WeightFormat::int4: wb = 0.5; break;
    }
    auto [w, wtext] = shard_note(wb * p, num(p) + " params x " + num(wb) + " bytes (" + weight_format_name(setup.inference_weights) + ")", zero3);
    e.items.push_back({"weights", std::string("weights (") + weight_format_name(setup.inference_weights) + ")", w, wtext});
    if (setup.inference_weights == WeightFormat::int4)
      e.notes.push_back("int4 weights: quantisation constants (about 0.5 bit/param for 64-weight blocks) are not included");
    // KV cache: 2 (K and V) x layers x batch x tokens x kv_heads x head_dim x 2 bytes (16-bit).
    const double per_token = 2.0 * m.kv_heads * hd * 2.0;
    int dec_layers = enc_dec ? m.decoder_layers : m.layers;
    double kv = per_token * dec_layers * b * seq;
    std::string text = "2 (K,V) x " + std::to_string(dec_layers) + " layers x batch " + num(b) + " x " + std::to_string(seq) +
                       " tokens x " + std::to_string(m.kv_heads) + " kv heads x " + num(hd) + " head dim x 2 bytes";
    if (enc_dec) {
      kv += per_token * dec_layers * b * m.encoder_seq;
      text += " + cross-attention K,V over " + std::to_string(m.encoder_seq) + " encoder positions";
    }
    e.items.push_back({"kv_cache", "KV cache (16-bit)", kv, text});
    double act = 0;
    const double layer_term = layer_per_token(m);
    for (const auto& g : groups)
      act = std::max(act, layer_activation_bytes(g.seq, b, h, a, !setup.flash_attention, layer_term));
    const std::string coefficient = num(layer_term);
    e.items.push_back({"activations", "activations (one layer, prefill)", act,
                       "one layer's working set, s*b*h*" +
                           (setup.flash_attention ? coefficient : "(" + coefficient + " + 5as/h)") +
                           " (Korthikanti et al. 2022" +
                           (layer_term == 34.0 ? std::string()
                                               : "; re-derived for a gated MLP and grouped-query attention") +
                           "); nothing is kept for backward"});
    e.items.push_back({"logits", "logits (last position)", b * v * 4, "batch x vocab " + num(v) + " x 4 bytes (fp32)"});
    finish(e, setup);
    return e;
  }

  const bool fp32_acts = setup.precision == Precision::fp32;
  if (setup.method == Method::full && setup.offload != Offload::none) {
    // DeepSpeed's own estimators (estimate_zero2_model_states_mem_needs, stage_1_and_2.py, and
    // estimate_zero3_model_states_mem_needs, stage3.py): with the optimizer offloaded the GPU
    // keeps the 16-bit weights (2 bytes/param; ZeRO-3 shards them) and the gradients go to the
    // CPU with the optimizer; with the parameters offloaded too, only the gathered layer stays.
    e.trainable_params = p;
    const bool stage3 = setup.sharding == Sharding::zero3;
    const double wb = setup.precision == Precision::fp32 ? 4 : 2;
    if (setup.offload == Offload::all) {
      e.items.push_back({"weights", "weights", 0, "offloaded to the CPU (offload_param)"});
    } else {
      auto [w, wt] = shard_note(wb * p, num(p) + " params x " + num(wb) + " bytes", stage3);
      e.items.push_back({"weights", std::string("weights (") + (wb == 4 ? "fp32" : "bf16") + ")", w, wt});
    }
    e.items.push_back(
        {"gradients", "gradients", 0, "offloaded to the CPU with the optimizer (ZeRO-Offload)"});
    e.items.push_back({"optimizer", std::string("optimizer states (") + optimizer_name(setup.optimizer) + ")",
                       0, "on the CPU (offload_optimizer: DeepSpeedCPUAdam steps there)"});
    if (stage3)
      e.items.push_back({"gather", "ZeRO-3 gathered-layer buffer", 4 * largest_layer,
                         "4 bytes x largest layer " + num(largest_layer) +
                             " params (DeepSpeed estimate_zero3_model_states_mem_needs)"});
    const double per_param =
        std::max(4.0 * setup.gpus, stage3 && setup.offload == Offload::all ? 18.0 : 16.0);
    e.notes.push_back(
        "CPU offload: the host needs about " + gib(p * per_param * 1.5) +
        " of RAM per node for the offloaded states (" + num(p) + " params x " + num(per_param) +
        " bytes x 1.5, DeepSpeed's estimate with its default additional_buffer_factor), and each step moves "
        "the gradients and weights over PCIe");
  } else if (setup.method == Method::full) {
    StateBytes sb = full_state_bytes(setup.precision, setup.optimizer);
    e.trainable_params = p;
    bool s1 = setup.sharding != Sharding::none, s2 = setup.sharding == Sharding::zero2 || setup.sharding == Sharding::zero3;
    auto [w, wt] = shard_note(sb.weights * p, num(p) + " params x " + num(sb.weights) + " bytes", zero3);
    auto [g, gt] = shard_note(sb.grads * p, num(p) + " params x " + num(sb.grads) + " bytes", s2);
    std::string opt_text = num(p) + " params x " + num(sb.optimizer) + " bytes";
    if (setup.precision == Precision::mixed) opt_text += " (fp32 master 4 + optimizer moments " + num(sb.optimizer - 4) + ")";
    auto [o, ot] = shard_note(sb.optimizer * p, opt_text, s1);
    e.items.push_back({"weights", std::string("weights (") + (setup.precision == Precision::fp32 ? "fp32" : "bf16") + ")", w, wt});
    e.items.push_back({"gradients", std::string("gradients (") + (setup.precision == Precision::fp32 ? "fp32" : "bf16") + ")", g, gt});
    e.items.push_back({"optimizer", std::string("optimizer states (") + optimizer_name(setup.optimizer) + ")", o, ot});
  } else {
    const bool qlora = setup.method == Method::qlora;
    const double linear = m.block_linear_params();
    if (qlora) {
      const double rest = std::max(0.0, p - linear);
      // NF4: 4 bits per weight. Constants: one 32-bit absmax per 64 weights = 0.5 bit/param; with
      // double quantisation 8/64 + 32/(64*256) = 0.127 bit/param (Dettmers et al., arXiv 2305.14314).
      const double const_bits = setup.double_quant ? 8.0 / 64 + 32.0 / (64 * 256) : 32.0 / 64;
      auto [q, qt] = shard_note(linear * (0.5 + const_bits / 8),
                                num(linear) + " block linear params x (4 bits + " + num(const_bits) + " bits of constants" +
                                    (setup.double_quant ? ", double-quantised" : "") + ") / 8",
                                zero3);
      e.items.push_back({"weights", "frozen base, NF4", q, qt});
      auto [r, rt] = shard_note(2 * rest, num(rest) + " embedding/norm/head params x 2 bytes (not quantised)", zero3);
      e.items.push_back({"weights", "frozen embeddings and head (bf16)", r, rt});
    } else {
      const double wb = setup.precision == Precision::fp32 ? 4 : 2;
      auto [w, wt] = shard_note(wb * p, num(p) + " params x " + num(wb) + " bytes", zero3);
      e.items.push_back({"weights", std::string("frozen base (") + (wb == 4 ? "fp32" : "bf16") + ")", w, wt});
    }
    Result<void> status;
    const double per_layer = lora_params_per_layer(m, setup.lora_targets, setup.lora_rank, status);
    if (!status) return std::unexpected(status.error());
    const int adapted_layers = m.layers + m.decoder_layers;
    const double adapters = per_layer * adapted_layers;
    e.trainable_params = adapters;
    // fp32 adapter weights 4 + fp32 grads 4 + optimizer (AdamW m, v: 8).
    double opt = setup.optimizer == Optimizer::adamw ? 8 : setup.optimizer == Optimizer::adamw_8bit ? 2 : 4;
    e.items.push_back({"adapters", "LoRA adapters (weights + grads + optimizer)", adapters * (8 + opt),
                       num(adapters) + " adapter params (rank " + std::to_string(setup.lora_rank) + " x (d_in + d_out) on " +
                           join(setup.lora_targets, ",") + " in " + std::to_string(adapted_layers) + " layers) x " + num(8 + opt) +
                           " bytes (fp32 weight 4 + grad 4 + optimizer " + num(opt) + ")"});
    if (qlora && setup.paged_optimizer)
      e.notes.push_back("paged optimizer: AdamW pages move to CPU memory under pressure, so short spikes above the estimate do not fail; the estimate keeps them on the GPU");
  }
  if (zero3 && setup.offload == Offload::none) {
    e.items.push_back({"gather", "ZeRO-3 gathered-layer buffer", 4 * largest_layer,
                       "4 bytes x largest layer " + num(largest_layer) + " params (DeepSpeed estimate_zero3_model_states_mem_needs)"});
  }

  // Activations: Korthikanti et al. 2022 per-layer bytes, times layers.
  const double per_token = layer_per_token(m);
  const std::string coefficient = num(per_token);
  const bool unsloth = setup.framework == Framework::unsloth;
  const Checkpointing checkpointing = unsloth ? Checkpointing::full : setup.checkpointing;
  double acts = 0;
  std::string how;
  const bool keeps_scores = !setup.flash_attention && checkpointing != Checkpointing::selective;
  const std::string layer_term = keeps_scores ? "(" + coefficient + " + 5as/h)" : coefficient;
  for (const auto& g : groups) {
    const double full_layer = layer_activation_bytes(g.seq, b, h, a, keeps_scores, per_token);
    switch (checkpointing) {
      case Checkpointing::none:
      case Checkpointing::selective: acts += g.layers * full_layer; break;
      case Checkpointing::full: acts += (unsloth ? 1 : g.layers) * 2.0 * g.seq * b * h; break;
    }
  }
  if (checkpointing == Checkpointing::full) {
    double recompute = 0;
    for (const auto& g : groups)
      recompute = std::max(recompute, layer_activation_bytes(g.seq, b, h, a, keeps_scores, per_token));
    acts += recompute;
    how =
        unsloth
            ? "Unsloth's offloaded checkpointing: the saved layer inputs go to CPU memory, the GPU holds one "
              "in transit, 2*s*b*h, + one layer recomputed, s*b*h*" +
                  layer_term
            : "full checkpointing: layers x 2*s*b*h (saved layer inputs) + one layer recomputed, s*b*h*" +
                  layer_term;
  } else {
    how = "layers x s*b*h*" + layer_term +
          (keeps_scores            ? ""
           : setup.flash_attention ? " (FlashAttention keeps no s x s scores)"
                                   : " (selective recomputation)");
  }
  how += " with s=" + std::to_string(seq) + " b=" + num(b) + " h=" + num(h) + " a=" + num(a) +
         (enc_dec ? ", encoder s=" + std::to_string(m.encoder_seq) : std::string()) +
         " (Korthikanti et al. 2022, arXiv 2205.05198";
  how += per_token == 34.0 ? ")"
                           : "; " + coefficient + " re-derived for a gated MLP and grouped-query attention)";
  if (fp32_acts) {
    acts *= 2;
    how += "; x 2 for fp32 activations";
  }
  e.items.push_back({"activations", "activations", acts, how});
  if (unsloth) {
    // Unsloth computes the loss with Apple's Cut Cross Entropy (unsloth.ai/blog/llama3-3), which
    // works from the hidden states block by block and never stores the logits.
    e.items.push_back({"logits", "logits and loss", 0,
                       "Cut Cross Entropy: the logits are never materialised (Unsloth with Apple's CCE)"});
  } else {
    // transformers upcasts the logits to fp32 for the loss (loss_utils.py ForCausalLMLoss,
    // logits.float()); cross_entropy is log_softmax + nll_loss and log_softmax keeps its fp32
    // output; the backward pass adds the log-probabilities' gradient and the logits' fp32
    // gradient: 12 bytes per token and vocabulary entry at its peak.
    e.items.push_back(
        {"logits", "logits and loss", b * seq * v * 12,
         "batch x " + std::to_string(seq) + " tokens x vocab " + num(v) +
             " x 12 bytes (fp32 log-probabilities kept for the backward pass + their gradient + the "
             "logits' fp32 gradient; transformers upcasts logits for the loss)"});
  }
  if (!m.gated_mlp && (m.kv_heads != m.heads || m.intermediate != 4 * m.hidden))
    e.notes.push_back(
        "the 34*s*b*h activation term is derived for multi-head attention with a 4h MLP; grouped-query "
        "attention or another MLP width shift it");
  if (setup.grad_accum > 1)
    e.notes.push_back("gradient accumulation " + std::to_string(setup.grad_accum) + ": effective batch " +
                      std::to_string(setup.batch * setup.grad_accum * setup.gpus) + ", peak memory unchanged");
  finish(e, setup);
  return e;
}

namespace {

template <typename Set>
Result<std::optional<int>> largest_fitting(const ModelSpec& m, JobSetup setup, double memory, int limit, Set set) {
  set(setup, 1);
  auto first = GPUHOST_TRY(estimate_memory(m, setup));
  if (first.total_bytes > memory) return std::optional<int>{};
  int lo = 1, hi = 2;
  while (hi <= limit) {
    set(setup, hi);
    auto e = GPUHOST_TRY(estimate_memory(m, setup));
    if (e.total_bytes > memory) break;
    lo = hi;
    hi *= 2;
  }
  hi = std::min(hi, limit + 1);
  while (hi - lo > 1) {  // lo fits, hi does not (or is past the limit)
    int mid = lo + (hi - lo) / 2;
    set(setup, mid);
    auto e = GPUHOST_TRY(estimate_memory(m, setup));
    if (e.total_bytes <= memory) lo = mid; else hi = mid;
  }
  return std::optional<int>{lo};
}

}  // namespace

Result<std::optional<int>> largest_batch(const ModelSpec& model, JobSetup setup, double gpu_memory_bytes) {
  return largest_fitting(model, setup, gpu_memory_bytes, 65536, [](JobSetup& s, int v) { s.batch = v; });
}

Result<std::optional<int>> largest_seq(const ModelSpec& model, JobSetup setup, double gpu_memory_bytes) {
  if (!model.is_transformer())
    return make_error(ErrorCode::invalid_argument, model.name + " has no sequence length (it is a calibrated preset)");
  return largest_fitting(model, setup, gpu_memory_bytes, 1 << 20, [](JobSetup& s, int v) { s.seq = v; });
}

}  // namespace gpuhost::plan
