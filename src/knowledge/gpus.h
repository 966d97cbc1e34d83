#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "knowledge/common.h"
#include "knowledge/compute_capability.h"

namespace gpuhost::knowledge {

// Spec-sheet numbers of a GPU model (data/gpus.json, a row's optional "spec" object). Tensor
// numbers are DENSE (not 2:4-sparse) with FP32 accumulate; a field is absent when the format has
// no tensor-core support on the model or no source confirmed it
// (shared/research/03-selection-cost-anchors.md section 3).
struct GpuSpec {
  std::optional<double> fp32_tflops;             // non-tensor FP32
  std::optional<double> tf32_dense_tflops;
  std::optional<double> fp16_dense_tflops;
  std::optional<double> bf16_dense_tflops;
  std::optional<double> memory_bandwidth_gbps;   // GB/s (10^9 bytes per second)
  std::optional<int> pcie_generation;            // 1..6
  std::optional<int> pcie_width;                 // lanes: 1, 2, 4, 8 or 16
  std::optional<double> tdp_w;
  std::string source;                            // where the spec numbers come from
};

// One GPU model (data/gpus.json).
struct GpuModel {
  std::string key;   // "a100-sxm4-80gb"
  std::string name;  // "NVIDIA A100 SXM4 80GB"
  // Match patterns, each a sequence of lower-case alphanumeric tokens ("a100 sxm4 80gb").
  std::vector<std::vector<std::string>> patterns;
  std::string architecture;  // "Ampere"
  ComputeCapability compute_capability;
  std::optional<double> memory_gb;  // when a source gives it
  std::optional<GpuSpec> spec;      // when a source gives spec-sheet numbers
  Provenance provenance;            // confidence is `unofficial` for A10G's compute capability
};

struct GpuMatch {
  const GpuModel* model = nullptr;  // points into the table
  std::string pattern;              // the pattern that matched, tokens joined by spaces
};

// Splits an NVML device name into lower-case alphanumeric tokens:
// "NVIDIA A100-SXM4-80GB" -> {"nvidia", "a100", "sxm4", "80gb"}.
[[nodiscard]] std::vector<std::string> gpu_name_tokens(std::string_view name);

// data/gpus.json, loaded and validated. Immutable after loading; safe to share between threads.
struct GpuTable {
  std::vector<GpuModel> models;

  // The model for an NVML device name ("NVIDIA A100-SXM4-80GB", "Tesla T4",
  // "NVIDIA H100 80GB HBM3"). A pattern matches when its tokens appear consecutively in the
  // name's tokens, so "a10" matches "NVIDIA A10" but not "NVIDIA A100" or "NVIDIA A10G". The
  // longest matching pattern wins; ties go to the earlier row. nullopt when nothing matches:
  // use NVML's own compute capability then.
  [[nodiscard]] std::optional<GpuMatch> match(std::string_view nvml_name) const;

  [[nodiscard]] const GpuModel* find_by_key(std::string_view key) const;
};

}  // namespace gpuhost::knowledge
