#pragma once
// Ranks instance types by the cost of the whole job: the job's work scaled by each GPU's
// throughput, priced on-demand, reserved and spot (spot with the expected cost of interruptions).

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "knowledge/common.h"
#include "knowledge/gpus.h"
#include "plan/instances.h"
#include "plan/memory.h"

namespace gpuhost::plan {

// Dense 16-bit tensor TFLOPS of one GPU (the spec sheet in data/gpus.json), or a measured figure.
struct GpuThroughput {
  std::string gpu;  // gpus.json key
  double tflops = 0;
  bool measured = false;  // from a `gpuhost bench` result file
  std::string source;
};

struct ThroughputTable {
  std::vector<GpuThroughput> gpus;
  [[nodiscard]] const GpuThroughput* find(std::string_view key) const;
  // Replaces (or adds) the row for `t.gpu`.
  void set(GpuThroughput t);
};

// Dense BF16 tensor TFLOPS from each GPU's spec sheet (FP16 where the GPU has no BF16); GPUs
// without a sourced figure are absent, so their time and cost show as unknown.
[[nodiscard]] ThroughputTable spec_throughput(const knowledge::GpuTable& gpus);

// Measured BF16 GEMM TFLOPS from a `gpuhost bench` result (doc/plan-json.md, "bench input"):
// {"gpu": {"devices": [{"name": "NVIDIA A100-SXM4-80GB", "gemm_tflops": {"bf16": 271.3}}]}}.
// Devices of the same model are averaged. parse_error for a malformed file or an unknown GPU name.
[[nodiscard]] Result<std::vector<GpuThroughput>> parse_bench_result(std::string_view text, const std::string& location,
                                                                    const knowledge::GpuTable& gpus);

// Resolves a user's GPU name ("A100", "h100-sxm", "NVIDIA L4") to a gpus.json key.
[[nodiscard]] Result<std::string> resolve_gpu(std::string_view name, const knowledge::GpuTable& gpus);

struct SpotPolicy {
  // Expected interruptions per hour of spot time. The default is gpuhost's assumption, not a
  // sourced figure (AWS's Spot Instance Advisor publishes only per-type frequency buckets).
  double interruptions_per_hour = 0.05;
  bool rate_assumed = true;
  double restart_hours = 10.0 / 60;            // re-provision + reload after an interruption
  double checkpoint_interval_hours = 0.5;      // the job's chosen interval
  double checkpoint_write_hours = 1.0 / 60;    // time to write one checkpoint
};

// Expected wall-clock of a job on spot, first-order model (Young 1974, "A first order
// approximation to the optimum checkpoint interval", CACM 17(9); Daly 2006, FGCS 22(3)):
// with checkpoints every tau hours costing C each, interruptions at rate lambda, restart R:
//   T = W (1 + C/tau) / (1 - lambda (R + tau/2))
// (each interruption loses R plus, on average, half an interval). Optimal interval:
//   tau* = sqrt(2 C / lambda)   (Young).
struct SpotRisk {
  double expected_hours = 0;          // T
  double expected_interruptions = 0;  // lambda T
  double overhead_hours = 0;          // T - W
  double optimal_interval_hours = 0;  // tau*
  double expected_hours_at_optimum = 0;
  bool finishes = true;  // false when lambda (R + tau/2) >= 1: the job never finishes
};
[[nodiscard]] SpotRisk spot_risk(double work_hours, const SpotPolicy& policy);

struct Work {
  double reference_gpu_hours = 0;  // GPU-hours of the whole job on one reference GPU
  std::string reference_gpu;       // gpus.json key
  // The most GPUs one instance may have: the job's own count (plan --gpus), or 0 for the
  // smallest count at which the job fits. Bigger nodes are left out (a note says how many):
  // time is not assumed to scale perfectly over GPUs the job does not use.
  int max_gpus = 0;
  bool all_instances = false;  // plan --all-instances: rank every node anyway
};

struct RankedOption {
  const Instance* instance = nullptr;  // points into the catalog given to rank_instances
  bool fits = false;
  double needed_bytes_per_gpu = 0;
  std::optional<double> hours;  // job wall-clock on this instance (work / throughput / GPUs)
  std::optional<double> price_per_hour;  // on-demand for the chosen OS
  std::optional<double> on_demand_total;
  std::optional<double> reserved_total;  // reserved price x the job's hours
  // What the job costs reserved, with the reservation's least term paid in full (a 2-hour job on
  // a 24-hour Capacity Block pays 24 hours): what "best" compares.
  std::optional<double> reserved_commitment_total;
  std::optional<double> spot_price_per_hour;
  std::optional<double> spot_total;  // risk-adjusted
  std::optional<SpotRisk> risk;
  std::optional<double> best_total;
  std::string best_option;  // "spot", "on-demand", "reserved"
  std::vector<std::string> flags;  // missing prices or throughput, catalog warnings
};

struct Ranking {
  std::vector<RankedOption> options;  // fitting + priced first (cheapest first), then flagged, then not fitting
  std::vector<std::string> notes;
};

// `memory_for(n)` estimates the per-GPU memory when the job runs on an instance with n GPUs.
// Time scales linearly with throughput and GPU count (no communication overhead modelled).
// REQUIRES: `catalog` outlives the returned Ranking.
[[nodiscard]] Result<Ranking> rank_instances(const InstanceCatalog& catalog, const ThroughputTable& throughput,
                                             const Work& work, const SpotPolicy& spot, knowledge::Os os,
                                             const std::function<Result<MemoryEstimate>(int gpus)>& memory_for);

}  // namespace gpuhost::plan
