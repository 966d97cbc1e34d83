// Benchmark for the metric history (src/metrics/history.h) as the dashboard uses it: a
// 1,000,000-point series on disk, then the time to load it (open), to copy it out (read), and to
// downsample it to 2,000 points (lttb, min_max), and the heap the loaded history holds (glibc's
// mallinfo2: bytes allocated, which resident-set deltas misreport once freed memory is reused).
// Run: build/linux/bench/history_query [points] [series]; with several series the points are
// dealt round-robin and the queries read the first one ("loss").
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <malloc.h>

#include "metrics/downsample.h"
#include "metrics/history.h"

using namespace gpuhost;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

// Heap bytes allocated and not freed, in MiB.
double heap_mib() {
  struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd) / (1024.0 * 1024.0);
}

// Best of `runs` timings of `f`, in ms: the least disturbed by the rest of the machine.
template <typename F>
double best_ms(int runs, F&& f) {
  double best = 1e300;
  for (int i = 0; i < runs; ++i) {
    auto start = Clock::now();
    f();
    best = std::min(best, ms_since(start));
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t points = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  const std::size_t series = std::max<std::size_t>(1, argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1);
  std::vector<std::string> names{"loss"};
  for (std::size_t i = 1; i < series; ++i) names.push_back("metric_" + std::to_string(i));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gpuhost-history-bench-" + std::to_string(points));
  std::filesystem::remove_all(dir);

  auto start = Clock::now();
  {
    auto writer = metrics::MetricHistory::open(dir, true);
    if (!writer) {
      std::fprintf(stderr, "%s\n", writer.error().message.c_str());
      return 1;
    }
    // A noisy decaying loss, one point a second, with a few spikes.
    for (std::size_t i = 0; i < points; ++i) {
      double loss =
          2.0 * std::exp(-static_cast<double>(i) / 200000.0) + 0.05 * std::sin(static_cast<double>(i));
      if (i % 99991 == 0) loss += 5;
      (*writer)->append(
          {names[i % series], loss, static_cast<std::int64_t>(i), 1.7e9 + static_cast<double>(i)}, "stdout");
    }
  }
  const double write_ms = ms_since(start);
  const auto file_bytes = std::filesystem::file_size(dir / "points.bin");

  const double heap_before = heap_mib();
  std::unique_ptr<metrics::MetricHistory> history;
  const double open_ms = best_ms(1, [&] { history = std::move(*metrics::MetricHistory::open(dir, false)); });
  const double heap_loaded = heap_mib() - heap_before;
  if (history->stats().points != points) {
    std::fprintf(stderr, "loaded %llu points, wrote %zu\n",
                 static_cast<unsigned long long>(history->stats().points), points);
    return 1;
  }

  metrics::SeriesData data;
  const double read_ms = best_ms(5, [&] { data = *history->read("loss"); });
  std::size_t kept_lttb = 0, kept_min_max = 0;
  const double lttb_ms = best_ms(5, [&] { kept_lttb = metrics::lttb(data.time, data.value, 2000).size(); });
  const double min_max_ms =
      best_ms(5, [&] { kept_min_max = metrics::min_max(data.time, data.value, 2000).size(); });
  const double since_ms =
      best_ms(5, [&] { (void)history->read_since("loss", 1.7e9 + static_cast<double>(points) - 60); });

  std::printf("metric history, %zu points in %zu series, %zu in the one queried (points.bin %.1f MiB)\n",
              points, series, data.value.size(), static_cast<double>(file_bytes) / (1024.0 * 1024.0));
  std::printf("%-36s %10s\n", "operation", "ms");
  std::printf("%-36s %10.1f\n", "write (append + flush), once", write_ms);
  std::printf("%-36s %10.1f\n", "open read-only (load), once", open_ms);
  std::printf("%-36s %10.2f\n", "read() copy, best of 5", read_ms);
  std::printf("%-36s %10.2f\n", "read_since() last minute, best of 5", since_ms);
  std::printf("%-36s %10.2f   (%zu kept)\n", "lttb() to 2000, best of 5", lttb_ms, kept_lttb);
  std::printf("%-36s %10.2f   (%zu kept)\n", "min_max() to 2000, best of 5", min_max_ms, kept_min_max);
  std::printf("heap held by the loaded history: %.1f MiB (%.1f bytes a point)\n", heap_loaded,
              heap_loaded * 1024.0 * 1024.0 / static_cast<double>(points));
  history.reset();
  std::filesystem::remove_all(dir);
  return 0;
}
