#pragma once
// Pure judgement functions: a measured value against a band. No I/O; unit-tested.

#include <optional>
#include <string>
#include <vector>

#include "bench/result.h"

namespace gpuhost::bench {

// `value` against a lower bound `threshold`: pass at or above, warn within 10% below (a margin of
// ours for run-to-run noise), fail further below. Fills expected, ratio and status.
void judge_at_least(Measurement& m, double threshold, std::string expected_text, std::string basis);

// Theoretical PCIe bandwidth per direction in GB/s for a generation and lane count: x16 Gen3
// 15.754, Gen4 31.5, Gen5 63 (shared/research/03-selection-cost-anchors.md section 3: vetter/shoc
// #79, ZaidQureshi/bam #54, Gen5 derived as 2x Gen4), scaled by width/16. Gen1/2 from the PCIe
// encoding (2.5/5 GT/s, 8b/10b): 4.0 and 8.0 at x16. nullopt for unknown generations.
[[nodiscard]] std::optional<double> pcie_theoretical_gbps(int generation, int width);

// Fractions of research/03 section 6.5 (our synthesis of the anchors there).
inline constexpr double k_gemm_peak_fraction = 0.80;    // BF16 dense GEMM >= 80% of datasheet peak
inline constexpr double k_pinned_d2h_fraction = 0.75;   // pinned D2H >= 75% of the PCIe generation
inline constexpr double k_gpu_spread_limit = 0.05;      // per-GPU spread in one node <= 5%
inline constexpr double k_seed_random_iops = 10000;     // seed rule: training data disk >= 10K IOPS
inline constexpr double k_tier_iops_fraction = 0.9;     // >= provisioned/tier IOPS x 0.9
inline constexpr double k_seed_network_gbits = 1.0;     // seed rule: >= 1 Gbit/s
inline constexpr double k_nominal_network_fraction = 0.8;  // ours: >= 80% of the instance's nominal

// "12.35" for (12.345, 2).
[[nodiscard]] std::string format_fixed(double value, int decimals);

// Spread between GPUs, (max - min) / max; nullopt for fewer than two values.
[[nodiscard]] std::optional<double> spread(const std::vector<double>& values);

}  // namespace gpuhost::bench
