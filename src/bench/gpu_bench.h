#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include "base/error.h"
#include "bench/result.h"
#include "gpu/snapshot.h"
#include "knowledge/gpus.h"

namespace gpuhost::bench {

// GPU measurements through the CUDA runtime and cuBLAS (loaded at run time). GEMMs use
// cublasGemmEx (one call covers FP32, TF32, FP16 and BF16 with FP32 accumulation and needs no
// cublasLt descriptors), square, column-major, no transpose, CUBLAS_GEMM_DEFAULT; timed with CUDA
// events on the default stream after a warm-up call.
struct GpuOptions {
  std::size_t copy_bytes = 256u << 20;
  int copy_repeats = 10;
  int gemm_size = 8192;  // m = n = k
  int gemm_repeats = 10;
};

// Runs every GPU the CUDA runtime sees. When the CUDA runtime or cuBLAS is missing the part is
// recorded as unavailable with the reason and Ok is returned: the rest of the bench goes on.
[[nodiscard]] Result<void> run_gpu(const GpuOptions& options, const knowledge::GpuTable& gpus, BenchReport& report,
                                   ProgressSink& progress);

// What the verdicts need to know about one GPU besides the measurements; pure inputs for tests.
struct GpuContext {
  const knowledge::GpuModel* model = nullptr;     // nullptr when the name is not in the table
  std::optional<gpu::PcieLink> link;              // read during the load
  std::optional<std::uint64_t> clocks_event_reasons;  // read right after the GEMMs
};

// Adds verdicts to the GPU's measurements (ids gpu.*) in place.
void judge_gpu(std::vector<Measurement>& measurements, const GpuContext& context);
// Adds the spread-between-GPUs measurement for BF16 (else FP16, else FP32) GEMM.
void judge_gpu_spread(BenchReport& report);

}  // namespace gpuhost::bench
