#include "bench/memory.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "platform/interrupt.h"

namespace gpuhost::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `body(begin, end)` on `threads` slices of [0, n) at once; returns the wall time.
template <typename Body>
double timed_parallel(std::size_t n, int threads, const Body& body) {
  std::vector<std::thread> workers;
  auto start = Clock::now();
  std::size_t chunk = (n + static_cast<std::size_t>(threads) - 1) / static_cast<std::size_t>(threads);
  for (int t = 0; t < threads; ++t) {
    std::size_t begin = std::min(n, chunk * static_cast<std::size_t>(t));
    std::size_t end = std::min(n, begin + chunk);
    workers.emplace_back([&body, begin, end] { body(begin, end); });
  }
  for (auto& w : workers) w.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Result<void> run_memory(const MemoryOptions& options, BenchReport& report, ProgressSink& progress) {
  int threads = options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::size_t n = options.array_bytes / sizeof(double);
  std::unique_ptr<double[]> a(new double[n]), b(new double[n]), c(new double[n]);
  // First touch from the worker threads, so pages land on their NUMA nodes.
  timed_parallel(n, threads, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) {
      a[i] = 1.0;
      b[i] = 2.0;
      c[i] = 0.5;
    }
  });
  double best_copy = 1e30, best_triad = 1e30;
  const double scalar = 3.0;
  for (int r = 0; r < options.repeats && !platform::interrupt_requested(); ++r) {
    progress.report("host memory copy and triad, " + std::to_string(threads) + " threads",
                    static_cast<double>(r) / options.repeats);
    best_copy = std::min(best_copy, timed_parallel(n, threads, [&](std::size_t lo, std::size_t hi) {
      std::copy(b.get() + lo, b.get() + hi, a.get() + lo);
    }));
    best_triad = std::min(best_triad, timed_parallel(n, threads, [&](std::size_t lo, std::size_t hi) {
      double* __restrict x = a.get();
      const double* __restrict y = b.get();
      const double* __restrict z = c.get();
      for (std::size_t i = lo; i < hi; ++i) x[i] = y[i] + scalar * z[i];
    }));
  }
  if (best_copy >= 1e30) {
    report.interrupted = true;
    return {};
  }
  std::string arrays = std::to_string(options.array_bytes >> 20) + " MiB arrays, " + std::to_string(threads) + " threads";
  Measurement copy;
  copy.id = "memory.copy_gbps";
  copy.title = "host memory copy (STREAM Copy), " + arrays;
  copy.value = 2.0 * static_cast<double>(n * sizeof(double)) / best_copy / 1e9;
  copy.unit = "GB/s";
  copy.basis = "no spec-sheet figure for host memory; reported for comparison between hosts";
  report.measurements.push_back(copy);
  Measurement triad = copy;
  triad.id = "memory.triad_gbps";
  triad.title = "host memory triad (STREAM Triad), " + arrays;
  triad.value = 3.0 * static_cast<double>(n * sizeof(double)) / best_triad / 1e9;
  report.measurements.push_back(triad);
  if (platform::interrupt_requested()) report.interrupted = true;
  return {};
}

}  // namespace gpuhost::bench
