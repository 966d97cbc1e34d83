#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gpu/snapshot.h"

namespace gpuhost::telemetry {

// The few values the dashboard charts per GPU; NaN where NVML could not give one.
struct GpuReading {
  double utilization_percent = 0;
  double memory_used_bytes = 0;
  double temperature_c = 0;
  double power_w = 0;
};

struct GpuFrame {
  double time = 0;               // seconds since the Unix epoch
  std::vector<GpuReading> gpus;  // by GPU index
};

// What does not change between samples.
struct GpuIdentity {
  unsigned index = 0;
  std::string name;
  std::string uuid;
  double memory_total_bytes = 0;  // NaN when unknown
  double power_limit_w = 0;       // NaN when unknown
};

struct GpuHistory {
  bool available = false;  // NVML loaded and initialised at the newest sample
  std::string error;       // why not, when not
  std::vector<GpuIdentity> gpus;
  std::vector<GpuFrame> frames;  // oldest first
};

struct GpuSamplerOptions {
  std::chrono::milliseconds interval{std::chrono::seconds(1)};
  std::size_t keep_frames = 900;  // 15 minutes at 1 s
  // Sampling stops this long after the last keep_alive(): NVML is read only while someone looks.
  std::chrono::milliseconds idle_after{std::chrono::seconds(10)};
};

// The recent GPU history behind the dashboard's per-GPU charts: a thread that takes a snapshot
// every `interval` while a dashboard is open (keep_alive() within idle_after) and keeps the
// newest keep_frames in memory. Nothing is sampled before the first keep_alive() or
// sample_now(). Thread-safe; the destructor stops and joins the thread. `source` is called
// without any of the sampler's locks held, from the sampler's thread or sample_now()'s caller.
class GpuSampler {
 public:
  using SnapshotSource = std::function<gpu::GpuSnapshot()>;

  GpuSampler(SnapshotSource source, GpuSamplerOptions options = {});
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Keeps (or starts) sampling for another idle_after.
  void keep_alive();
  // Takes one sample now, on the caller's thread.
  void sample_now();
  // Frames newer than `after_time` (all with -infinity) and the GPUs' identities.
  [[nodiscard]] GpuHistory since(double after_time) const;

 private:
  void run();
  void record(const gpu::GpuSnapshot& snapshot, double time);

  // Fixed after construction.
  const SnapshotSource m_source;
  const GpuSamplerOptions m_options;

  mutable std::mutex m_mutex;
  std::condition_variable m_wake;
  // Guarded by m_mutex.
  bool m_stopping = false;
  std::chrono::steady_clock::time_point m_active_until{};
  GpuHistory m_history;
  std::thread m_thread;  // started by the first keep_alive()
};

// One snapshot reduced to what the dashboard charts.
[[nodiscard]] GpuFrame gpu_frame(const gpu::GpuSnapshot& snapshot, double time);
[[nodiscard]] std::vector<GpuIdentity> gpu_identities(const gpu::GpuSnapshot& snapshot);

}  // namespace gpuhost::telemetry
