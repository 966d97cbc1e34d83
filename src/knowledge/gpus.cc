#include "knowledge/gpus.h"

#include <algorithm>
#include <cctype>

#include "base/strings.h"
#include "knowledge/parsers.h"
#include "knowledge/row_reader.h"

namespace gpuhost::knowledge {

std::vector<std::string> gpu_name_tokens(std::string_view name) {
  std::vector<std::string> tokens;
  std::string current;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c))) {
      current += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!current.empty()) {
      tokens.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) tokens.push_back(std::move(current));
  return tokens;
}

namespace {

bool contains_run(const std::vector<std::string>& tokens, const std::vector<std::string>& pattern) {
  if (pattern.empty() || pattern.size() > tokens.size()) return false;
  return std::search(tokens.begin(), tokens.end(), pattern.begin(), pattern.end()) != tokens.end();
}

}  // namespace

std::optional<GpuMatch> GpuTable::match(std::string_view nvml_name) const {
  auto tokens = gpu_name_tokens(nvml_name);
  std::optional<GpuMatch> best;
  std::size_t best_length = 0;
  for (const auto& model : models) {
    for (const auto& pattern : model.patterns) {
      if (pattern.size() <= best_length || !contains_run(tokens, pattern)) continue;
      best_length = pattern.size();
      best = GpuMatch{&model, join(pattern, " ")};
    }
  }
  return best;
}

const GpuModel* GpuTable::find_by_key(std::string_view key) const {
  for (const auto& model : models)
    if (model.key == key) return &model;
  return nullptr;
}

namespace detail {
namespace {

// Reads a row's optional "spec" object; problems are recorded on `row`.
std::optional<GpuSpec> read_spec(RowReader& row) {
  const json::Value* object = row.optional_object("spec");
  if (!object) return std::nullopt;
  RowReader reader(*object, row.where() + ": spec");
  GpuSpec spec;
  auto positive = [&](std::string_view field) -> std::optional<double> {
    auto value = reader.optional_number(field);
    if (value && !(*value > 0)) reader.fail(field, "must be a positive number");
    return value;
  };
  spec.fp32_tflops = positive("fp32_tflops");
  spec.tf32_dense_tflops = positive("tf32_dense_tflops");
  spec.fp16_dense_tflops = positive("fp16_dense_tflops");
  spec.bf16_dense_tflops = positive("bf16_dense_tflops");
  spec.memory_bandwidth_gbps = positive("memory_bandwidth_gbps");
  spec.tdp_w = positive("tdp_w");
  if (auto gen = reader.optional_integer("pcie_generation")) {
    if (*gen < 1 || *gen > 6) reader.fail("pcie_generation", "must be 1 to 6");
    spec.pcie_generation = static_cast<int>(*gen);
  }
  if (auto width = reader.optional_integer("pcie_width")) {
    if (*width != 1 && *width != 2 && *width != 4 && *width != 8 && *width != 16)
      reader.fail("pcie_width", "must be 1, 2, 4, 8 or 16 lanes");
    spec.pcie_width = static_cast<int>(*width);
  }
  spec.source = reader.string("source");
  if (auto done = reader.finish(); !done) {
    row.adopt(done.error());
    return std::nullopt;
  }
  return spec;
}

}  // namespace

Result<GpuTable> parse_gpus(const json::Value& document, const std::string& location) {
  GpuTable table;
  RowReader root(document, location);
  read_header(root);
  const auto* rows = root.array("gpus");
  if (auto done = root.finish(); !done) return std::unexpected(done.error());

  std::vector<std::string> keys;
  std::vector<std::string> patterns;
  for (std::size_t i = 0; i < rows->size(); ++i) {
    RowReader row((*rows)[i], row_location(location, "gpus", i));
    GpuModel model;
    model.key = row.string("key");
    row.set_key("key " + model.key);
    model.name = row.string("name");
    for (const auto& text : row.string_list("match")) {
      auto tokens = gpu_name_tokens(text);
      if (tokens.empty() || join(tokens, " ") != text) {
        row.fail("match",
                 "pattern \"" + text + "\" must be lower-case alphanumeric words separated by single spaces");
        break;
      }
      patterns.push_back(text);
      model.patterns.push_back(std::move(tokens));
    }
    model.architecture = row.string("architecture");
    model.compute_capability = row.compute_capability("compute_capability");
    model.memory_gb = row.optional_number("memory_gb");
    model.spec = read_spec(row);
    model.provenance = row.provenance();
    if (auto done = row.finish(); !done) return std::unexpected(done.error());
    keys.push_back(model.key);
    table.models.push_back(std::move(model));
  }
  check_duplicates(root, "gpus", keys);
  // The same pattern on two rows would make the match depend on row order alone.
  std::sort(patterns.begin(), patterns.end());
  if (auto dup = std::adjacent_find(patterns.begin(), patterns.end()); dup != patterns.end())
    root.fail("gpus", "match pattern \"" + *dup + "\" appears on two rows");
  if (auto done = root.finish(); !done) return std::unexpected(done.error());
  return table;
}

}  // namespace detail
}  // namespace gpuhost::knowledge
