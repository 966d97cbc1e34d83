#pragma once

#include <cstddef>

#include "base/error.h"
#include "bench/result.h"

namespace gpuhost::bench {

// STREAM-like host memory bandwidth over all cores: copy (a = b) and triad (a = b + s * c) on
// arrays of `array_bytes` each, split between `threads` threads; the best of `repeats`. Bytes
// counted the STREAM way (copy 16, triad 24 per element; write-allocate traffic not counted).
struct MemoryOptions {
  std::size_t array_bytes = 128u << 20;
  int threads = 0;  // 0: one per hardware thread
  int repeats = 5;
};

[[nodiscard]] Result<void> run_memory(const MemoryOptions& options, BenchReport& report, ProgressSink& progress);

}  // namespace gpuhost::bench
