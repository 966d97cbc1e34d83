#pragma once
// What gpuhost plan knows about a model: a transformer's shape (for the formulas) or a vision /
// diffusion preset (calibrated against a published measurement where one exists).

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "knowledge/common.h"

namespace gpuhost::plan {

enum class Architecture {
  decoder,          // decoder-only transformer (Llama, Qwen, Mistral, Gemma)
  encoder_decoder,  // Whisper, T5: `layers` encoder + `decoder_layers` decoder layers
  calibrated,       // vision / diffusion presets: no layer-by-layer formula
};

[[nodiscard]] const char* architecture_name(Architecture a);

// A published measurement a preset's activation memory is derived from.
struct Calibration {
  double measured_gib = 0;      // peak memory reported for the run
  int batch = 0;                // the run's batch size
  int input = 0;                // the run's image size in pixels (square)
  double relative_scale = 1.0;  // activation size of this model relative to the measured one
  std::string source;
};

// A layer-by-layer activation model (plan/conv_activations.h) a preset is computed with.
struct LayerTable {
  std::string network;  // "resnet" or "yolov8"
  int depth = 0;        // ResNet-50: 50
  char scale = 0;       // YOLOv8m: 'm'
};

struct ModelSpec {
  std::string key;   // "llama-3-8b"; "custom" for a flag- or config.json-built model
  std::string name;  // "Meta Llama 3 8B"
  std::string family;  // "llm", "audio", "vision", "diffusion"
  Architecture architecture = Architecture::decoder;
  std::vector<std::string> aliases;

  double params = 0;  // total parameters
  // Transformer shape (decoder and encoder_decoder).
  int layers = 0;          // decoder layers (decoder) or encoder layers (encoder_decoder)
  int decoder_layers = 0;  // encoder_decoder only
  int hidden = 0;
  int heads = 0;
  int kv_heads = 0;  // = heads without grouped-query attention
  int head_dim = 0;  // 0: hidden / heads
  int intermediate = 0;
  int vocab = 0;
  bool gated_mlp = true;  // SwiGLU/GeGLU (three MLP matrices) vs a plain two-matrix MLP
  bool tied_embeddings = false;
  int encoder_seq = 0;  // encoder_decoder: fixed encoder length (Whisper: 1500 frames)
  int decoder_seq = 0;  // encoder_decoder: default decoder length

  // Calibrated presets.
  double frozen_params = 0;  // parameters that are never trained (SDXL text encoders)
  int default_input = 0;     // image size the preset assumes
  std::string preset_method;  // "lora" / "full" when the preset fixes it
  std::optional<Calibration> calibration;
  std::optional<LayerTable> layer_table;  // activations from the architecture, not a measurement

  knowledge::Provenance provenance;

  [[nodiscard]] bool is_transformer() const { return architecture != Architecture::calibrated; }
  [[nodiscard]] int effective_head_dim() const { return head_dim > 0 ? head_dim : (heads > 0 ? hidden / heads : 0); }
  // Parameters of the linear layers inside the transformer blocks (what QLoRA quantises and LoRA
  // adapts), from the shape: per layer q,o = h x (heads*head_dim), k,v = h x (kv_heads*head_dim),
  // MLP 3 (gated) or 2 matrices of h x intermediate.
  [[nodiscard]] double block_linear_params() const;
  // Parameters counted from the shape: blocks + norms + embeddings (+ untied output head).
  [[nodiscard]] double shape_params() const;
};

// Checks a transformer shape for impossible values: zero sizes, heads not dividing hidden (when no
// head_dim is given), kv_heads not dividing heads. invalid_argument names the field.
[[nodiscard]] Result<void> validate_shape(const ModelSpec& model);

// data/models.json (or a user file of the same format). Immutable after loading.
struct ModelCatalog {
  std::vector<ModelSpec> models;

  // By key or alias, case-insensitive. not_found carries "did you mean" in the message.
  [[nodiscard]] Result<const ModelSpec*> find(std::string_view name) const;
};

// Parses a models file. `location` names it in errors ("models.json").
[[nodiscard]] Result<ModelCatalog> parse_model_catalog(std::string_view text, const std::string& location);

// The built-in catalog (embedded data/models.json).
[[nodiscard]] Result<ModelCatalog> builtin_model_catalog();

// A decoder built from a Hugging Face config.json text: num_hidden_layers, hidden_size,
// num_attention_heads, num_key_value_heads, intermediate_size, vocab_size, head_dim,
// tie_word_embeddings; text_config is looked into for multimodal wrappers. Whisper-style
// configs (encoder_layers, d_model) become encoder_decoder. parse_error for missing fields.
[[nodiscard]] Result<ModelSpec> model_from_hf_config(std::string_view text, const std::string& location);

}  // namespace gpuhost::plan
