#include "plan/model.h"

#include <algorithm>
#include <string_view>

#include "base/json.h"
#include "base/strings.h"
#include "knowledge/row_reader.h"
#include "plan/plan_data.h"

namespace gpuhost::plan {

using knowledge::RowReader;

const char* architecture_name(Architecture a) {
  switch (a) {
    case Architecture::decoder: return "decoder";
    case Architecture::encoder_decoder: return "encoder_decoder";
    case Architecture::calibrated: return "calibrated";
  }
  return "?";
}

namespace {

struct BlockShape {
  double attention, mlp, norms;
};

BlockShape block_shape(const ModelSpec& m) {
  const double h = m.hidden;
  const double hd = m.effective_head_dim();
  const double q_out = m.heads * hd;
  const double kv_out = m.kv_heads * hd;
  return {h * q_out + 2 * h * kv_out + q_out * h, (m.gated_mlp ? 3.0 : 2.0) * h * m.intermediate, 2 * h};
}

}  // namespace

double ModelSpec::block_linear_params() const {
  if (!is_transformer()) return 0;
  BlockShape s = block_shape(*this);
  // Decoder layers of an encoder-decoder also have cross-attention (a second attention block).
  return layers * (s.attention + s.mlp) + decoder_layers * (2 * s.attention + s.mlp);
}

double ModelSpec::shape_params() const {
  if (!is_transformer()) return params;
  BlockShape s = block_shape(*this);
  const double embed = static_cast<double>(vocab) * hidden * (tied_embeddings ? 1 : 2);
  return block_linear_params() + (layers + decoder_layers) * s.norms + embed + hidden;
}

Result<void> validate_shape(const ModelSpec& m) {
  auto bad = [&](std::string what) {
    return make_error(ErrorCode::invalid_argument, "model " + m.key + ": " + what);
  };
  if (!m.is_transformer()) return {};
  if (m.layers < 1) return bad("layers must be at least 1");
  if (m.hidden < 1) return bad("hidden size must be at least 1");
  if (m.heads < 1) return bad("attention heads must be at least 1");
  if (m.kv_heads < 1) return bad("kv heads must be at least 1");
  if (m.vocab < 1) return bad("vocabulary size must be at least 1");
  if (m.intermediate < 1) return bad("intermediate (MLP) size must be at least 1");
  if (m.head_dim == 0 && m.hidden % m.heads != 0)
    return bad(std::to_string(m.heads) + " attention heads do not divide hidden size " + std::to_string(m.hidden));
  if (m.heads % m.kv_heads != 0)
    return bad(std::to_string(m.kv_heads) + " kv heads do not divide " + std::to_string(m.heads) + " attention heads");
  if (m.architecture == Architecture::encoder_decoder && (m.decoder_layers < 1 || m.encoder_seq < 1))
    return bad("an encoder-decoder needs decoder_layers and encoder_seq");
  return {};
}

Result<const ModelSpec*> ModelCatalog::find(std::string_view name) const {
  std::vector<std::string> names;
  auto lookup = [&](std::string_view wanted) -> const ModelSpec* {
    for (const auto& m : models) {
      if (iequals(m.key, wanted)) return &m;
      for (const auto& alias : m.aliases)
        if (iequals(alias, wanted)) return &m;
    }
    return nullptr;
  };
  if (const ModelSpec* m = lookup(name)) return m;
  // A Hugging Face id ("meta-llama/Meta-Llama-3-8B", "Qwen/Qwen3-8B"): the repository name is
  // a key or an alias.
  const auto slash = name.find('/');
  const bool hf_id = slash != std::string_view::npos && slash > 0 && slash + 1 < name.size();
  if (hf_id)
    if (const ModelSpec* m = lookup(name.substr(slash + 1))) return m;
  for (const auto& m : models) names.push_back(m.key);
  const std::string wanted = to_lower(hf_id ? name.substr(slash + 1) : name);
  std::string message = "unknown model '" + std::string(name) + "'";
  if (auto close = closest_match(wanted, names)) message += " (did you mean '" + *close + "'?)";
  if (hf_id)
    message +=
        "; a Hugging Face model gpuhost does not know is planned from its config: --config config.json "
        "(https://huggingface.co/" +
        std::string(name) + "/blob/main/config.json)";
  return make_error(ErrorCode::not_found, message);
}

namespace {

int read_int(RowReader& row, std::string_view field, bool required) {
  auto v = required ? std::optional<std::int64_t>(row.integer(field)) : row.optional_integer(field);
  if (!v) return 0;
  if (*v < 0 || *v > (1LL << 31) - 1) {
    row.fail(field, "must be between 0 and 2^31-1");
    return 0;
  }
  return static_cast<int>(*v);
}

bool read_bool_or(RowReader& row, const json::Value& object, std::string_view field, bool fallback) {
  return object.find(field) ? row.boolean(field) : fallback;
}

}  // namespace

Result<ModelCatalog> parse_model_catalog(std::string_view text, const std::string& location) {
  auto document = json::parse(text);
  if (!document) return make_error(ErrorCode::parse_error, location + ": " + document.error().message);
  RowReader root(*document, location);
  knowledge::read_header(root);
  const auto* rows = root.array("models");
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  ModelCatalog catalog;
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < rows->size(); ++i) {
    const json::Value& object = (*rows)[i];
    RowReader row(object, knowledge::row_location(location, "models", i));
    ModelSpec m;
    m.key = row.string("key");
    row.set_key("key " + m.key);
    m.name = row.string("name");
    m.family = row.string("family");
    std::string arch = row.string("architecture");
    if (arch == "decoder") m.architecture = Architecture::decoder;
    else if (arch == "encoder_decoder") m.architecture = Architecture::encoder_decoder;
    else if (arch == "calibrated") m.architecture = Architecture::calibrated;
    else if (row.ok()) row.fail("architecture", "expected decoder, encoder_decoder or calibrated; found \"" + arch + "\"");
    m.aliases = row.optional_string_list("aliases");
    m.params = row.optional_number("params").value_or(0);
    if (row.ok() && m.params <= 0) row.fail("params", "must be a positive number of parameters");
    const bool transformer = m.architecture != Architecture::calibrated;
    m.layers = read_int(row, "layers", transformer);
    m.decoder_layers = read_int(row, "decoder_layers", false);
    m.hidden = read_int(row, "hidden", transformer);
    m.heads = read_int(row, "heads", transformer);
    m.kv_heads = read_int(row, "kv_heads", false);
    if (m.kv_heads == 0) m.kv_heads = m.heads;
    m.head_dim = read_int(row, "head_dim", false);
    m.intermediate = read_int(row, "intermediate", transformer);
    m.vocab = read_int(row, "vocab", transformer);
    m.gated_mlp = read_bool_or(row, object, "gated_mlp", true);
    m.tied_embeddings = read_bool_or(row, object, "tied_embeddings", false);
    m.encoder_seq = read_int(row, "encoder_seq", false);
    m.decoder_seq = read_int(row, "decoder_seq", false);
    m.frozen_params = row.optional_number("frozen_params").value_or(0);
    m.default_input = read_int(row, "default_input", false);
    m.preset_method = row.optional_string("method").value_or("");
    if (const json::Value* cal = object.find("calibration")) {
      const json::Value* c = row.object("calibration");
      if (c) {
        RowReader cr(*c, row.where() + ".calibration");
        Calibration calibration;
        calibration.measured_gib = cr.optional_number("measured_gib").value_or(0);
        calibration.batch = static_cast<int>(cr.integer("batch"));
        calibration.input = static_cast<int>(cr.integer("input"));
        calibration.relative_scale = cr.optional_number("relative_scale").value_or(1.0);
        calibration.source = cr.string("source");
        if (cr.ok() && (calibration.measured_gib <= 0 || calibration.batch < 1 || calibration.input < 1))
          cr.fail("measured_gib", "measured_gib, batch and input must be positive");
        if (auto done = cr.finish(); !done) row.adopt(done.error());
        m.calibration = calibration;
      }
      (void)cal;
    }
    if (object.find("layer_table")) {
      if (const json::Value* t = row.object("layer_table")) {
        RowReader tr(*t, row.where() + ".layer_table");
        LayerTable table;
        table.network = tr.string("network");
        if (tr.ok() && table.network == "resnet") {
          table.depth = static_cast<int>(tr.integer("depth"));
        } else if (tr.ok() && table.network == "yolov8") {
          const std::string scale = tr.string("scale");
          if (tr.ok() &&
              (scale.size() != 1 || std::string_view("nsmlx").find(scale[0]) == std::string_view::npos))
            tr.fail("scale", "expected one of n, s, m, l, x; found \"" + scale + "\"");
          else if (tr.ok())
            table.scale = scale[0];
        } else if (tr.ok()) {
          tr.fail("network", "expected resnet or yolov8; found \"" + table.network + "\"");
        }
        if (auto done = tr.finish(); !done) row.adopt(done.error());
        m.layer_table = table;
      }
    }
    if (m.layer_table && m.calibration && row.ok())
      row.fail("layer_table", "give a layer_table or a calibration, not both");
    if (!transformer && m.default_input == 0 && row.ok()) row.fail("default_input", "a calibrated preset needs default_input");
    m.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    if (auto valid = validate_shape(m); !valid)
      return make_error(ErrorCode::parse_error, row.where() + ": " + valid.error().message);
    keys.push_back(m.key);
    for (const auto& alias : m.aliases) keys.push_back(alias);
    catalog.models.push_back(std::move(m));
  }
  knowledge::check_duplicates(root, "models", keys);
  if (auto done = root.finish(); !done) return std::unexpected(done.error());
  return catalog;
}

Result<ModelCatalog> builtin_model_catalog() {
  const EmbeddedFile* file = data::find_embedded("models.json");
  if (!file) return make_error(ErrorCode::internal, "models.json is not embedded in this build");
  return parse_model_catalog(file->bytes, "models.json (built in)");
}

Result<ModelSpec> model_from_hf_config(std::string_view text, const std::string& location) {
  auto document = json::parse(text);
  if (!document) return make_error(ErrorCode::parse_error, location + ": " + document.error().message);
  const json::Value* config = &*document;
  if (!config->is_object()) return make_error(ErrorCode::parse_error, location + ": expected a JSON object");
  if (const json::Value* inner = config->find("text_config"); inner && inner->is_object() && !config->contains("num_hidden_layers"))
    config = inner;
  auto get = [&](std::initializer_list<std::string_view> names) -> std::optional<std::int64_t> {
    for (auto n : names)
      if (const json::Value* v = config->find(n); v && v->is_integer()) return v->as_int();
    return std::nullopt;
  };
  auto need = [&](std::initializer_list<std::string_view> names, int& out) -> Result<void> {
    auto v = get(names);
    if (!v) return make_error(ErrorCode::parse_error, location + ": missing integer field \"" + std::string(*names.begin()) + "\"");
    if (*v < 1 || *v > (1LL << 31) - 1)
      return make_error(ErrorCode::parse_error, location + ": field \"" + std::string(*names.begin()) + "\" out of range");
    out = static_cast<int>(*v);
    return {};
  };
  ModelSpec m;
  m.key = "custom";
  m.name = config->get_string("_name_or_path", location);
  m.family = "llm";
  m.provenance.source = location;
  if (config->contains("encoder_layers") && config->contains("d_model")) {
    m.architecture = Architecture::encoder_decoder;
    m.family = "audio";
    if (auto ok_ = need({"encoder_layers"}, m.layers); !ok_) return std::unexpected(ok_.error());
    if (auto ok_ = need({"decoder_layers"}, m.decoder_layers); !ok_) return std::unexpected(ok_.error());
    if (auto ok_ = need({"d_model"}, m.hidden); !ok_) return std::unexpected(ok_.error());
    if (auto ok_ = need({"encoder_attention_heads"}, m.heads); !ok_) return std::unexpected(ok_.error());
    if (auto ok_ = need({"encoder_ffn_dim"}, m.intermediate); !ok_) return std::unexpected(ok_.error());
    if (auto ok_ = need({"vocab_size"}, m.vocab); !ok_) return std::unexpected(ok_.error());
    m.kv_heads = m.heads;
    m.gated_mlp = false;
    m.tied_embeddings = true;
    m.encoder_seq = static_cast<int>(get({"max_source_positions"}).value_or(1500));
    m.decoder_seq = static_cast<int>(get({"max_target_positions"}).value_or(448));
  } else {
    if (auto ok_ = need({"num_hidden_layers", "n_layer", "num_layers"}, m.layers); !ok_) return std::unexpected(ok_.error());
    if (auto ok_ = need({"hidden_size", "n_embd", "d_model"}, m.hidden); !ok_) return std::unexpected(ok_.error());
    if (auto ok_ = need({"num_attention_heads", "n_head"}, m.heads); !ok_) return std::unexpected(ok_.error());
    if (auto ok_ = need({"vocab_size"}, m.vocab); !ok_) return std::unexpected(ok_.error());
    m.kv_heads = static_cast<int>(get({"num_key_value_heads"}).value_or(m.heads));
    m.head_dim = static_cast<int>(get({"head_dim"}).value_or(0));
    if (auto inter = get({"intermediate_size", "n_inner", "ffn_dim"}); inter && *inter > 0) {
      m.intermediate = static_cast<int>(*inter);
    } else {
      m.intermediate = 4 * m.hidden;
      m.gated_mlp = false;
    }
    std::string type = config->get_string("model_type");
    if (type == "gpt2" || type == "gpt_neox" || type == "opt" || type == "bloom" || type == "falcon") m.gated_mlp = false;
    m.tied_embeddings = config->get_bool("tie_word_embeddings", false);
  }
  if (m.head_dim == m.hidden / std::max(1, m.heads) && m.hidden % std::max(1, m.heads) == 0) m.head_dim = 0;
  if (auto ok_ = validate_shape(m); !ok_) return std::unexpected(ok_.error());
  m.params = m.shape_params();
  return m;
}

}  // namespace gpuhost::plan
