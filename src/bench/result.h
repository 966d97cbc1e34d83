#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/json.h"

namespace gpuhost::bench {

enum class Status { pass, warn, fail, info };
[[nodiscard]] const char* status_name(Status status);  // "pass", "warn", "fail", "info"

// One measured number and its judgement. `expected`/`ratio` are empty when there is nothing to
// compare with (status info).
struct Measurement {
  std::string id;       // stable, dotted: "disk.randread_iops", "gpu.gemm_bf16_tflops"
  std::string subject;  // "" for the host, "GPU 0 (NVIDIA A100-SXM4-80GB)" for a GPU
  std::string title;    // "4 KiB random read, 32 threads"
  double value = 0;
  std::string unit;     // "IOPS", "MB/s", "GB/s", "Gbit/s", "us", "TFLOPS"
  std::optional<double> expected;  // the band's threshold in `unit`
  std::string expected_text;       // ">= 10000 IOPS (seed rule)"
  std::string basis;               // where the expectation comes from (a source)
  std::optional<double> ratio;     // value / expected
  Status status = Status::info;
  std::vector<std::string> notes;  // why it failed, cache effects, ...
};

// Per-GPU summary `gpuhost plan` reads (doc/bench-json.md).
struct GpuSummary {
  int cuda_index = 0;
  std::string name;       // NVML name, "" when NVML is unavailable
  std::string model_key;  // knowledge key ("a100-sxm4-80gb"), "" when unknown
  std::string pci_bus_id;
  std::optional<double> fp32_tflops, tf32_tflops, fp16_tflops, bf16_tflops;
  std::optional<double> h2d_pinned_gbps, d2h_pinned_gbps, h2d_pageable_gbps, d2h_pageable_gbps, d2d_gbps;
};

// A part that could not run at all ("gpu": "no CUDA runtime: ...").
struct Unavailable {
  std::string part;
  std::string reason;
};

struct BenchReport {
  std::vector<std::string> parts;  // requested parts, in order
  std::string mode;                // "quick", "default", "full"
  std::vector<Measurement> measurements;
  std::vector<Unavailable> unavailable;
  std::vector<GpuSummary> gpus;
  bool interrupted = false;  // Ctrl-C: the measurements are those finished before it

  [[nodiscard]] int count(Status status) const;
};

// JSON (doc/bench-json.md) and back; from_json is for tests and for `plan --bench FILE`.
[[nodiscard]] json::Value to_json(const BenchReport& report);
[[nodiscard]] Result<BenchReport> report_from_json(const json::Value& value);

// Progress for long measurements: `step` names the measurement, `fraction` in [0, 1] or negative
// when unknown. Called from the measuring thread.
struct ProgressSink {
  virtual ~ProgressSink() = default;
  virtual void report(const std::string& step, double fraction) = 0;
};

}  // namespace gpuhost::bench
