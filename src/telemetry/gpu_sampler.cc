#include "telemetry/gpu_sampler.h"

#include <algorithm>
#include <limits>

#include "base/time_format.h"

namespace gpuhost::telemetry {
namespace {

// A value this sample could not read (the dashboard draws a gap).
constexpr double k_unread = std::numeric_limits<double>::quiet_NaN();

}  // namespace

GpuFrame gpu_frame(const gpu::GpuSnapshot& snapshot, double time) {
  GpuFrame frame;
  frame.time = time;
  for (const auto& device : snapshot.devices) {
    if (frame.gpus.size() <= device.index)
      frame.gpus.resize(device.index + 1, {k_unread, k_unread, k_unread, k_unread});
    GpuReading& r = frame.gpus[device.index];
    if (device.utilization.has_value()) r.utilization_percent = device.utilization.value->gpu_percent;
    if (device.memory.has_value()) r.memory_used_bytes = static_cast<double>(device.memory.value->used_bytes);
    if (device.temperature.has_value()) r.temperature_c = device.temperature.value->current_c;
    if (device.power.has_value()) r.power_w = device.power.value->usage_mw / 1000.0;
  }
  return frame;
}

std::vector<GpuIdentity> gpu_identities(const gpu::GpuSnapshot& snapshot) {
  std::vector<GpuIdentity> out;
  for (const auto& device : snapshot.devices) {
    GpuIdentity id;
    id.index = device.index;
    id.name = device.name;
    id.uuid = device.uuid;
    id.memory_total_bytes =
        device.memory.has_value() ? static_cast<double>(device.memory.value->total_bytes) : k_unread;
    id.power_limit_w = device.power.has_value() && device.power.value->enforced_limit_mw > 0
                           ? device.power.value->enforced_limit_mw / 1000.0
                           : k_unread;
    out.push_back(std::move(id));
  }
  return out;
}

GpuSampler::GpuSampler(SnapshotSource source, GpuSamplerOptions options)
    : m_source(std::move(source)), m_options(options) {}

GpuSampler::~GpuSampler() {
  std::thread thread;
  {
    std::lock_guard lock(m_mutex);
    m_stopping = true;
    thread = std::move(m_thread);
  }
  m_wake.notify_all();
  if (thread.joinable()) thread.join();
}

void GpuSampler::keep_alive() {
  {
    std::lock_guard lock(m_mutex);
    if (m_stopping) return;
    m_active_until = std::chrono::steady_clock::now() + m_options.idle_after;
    if (!m_thread.joinable()) m_thread = std::thread([this] { run(); });
  }
  m_wake.notify_all();
}

void GpuSampler::sample_now() {
  const auto snapshot = m_source();
  record(snapshot, unix_seconds());
}

void GpuSampler::record(const gpu::GpuSnapshot& snapshot, double time) {
  GpuFrame frame = gpu_frame(snapshot, time);
  std::lock_guard lock(m_mutex);
  m_history.available = snapshot.available;
  m_history.error = snapshot.error ? snapshot.error->name + ": " + snapshot.error->message : std::string();
  // Identities are kept from the last snapshot that had GPUs: a lost GPU keeps its name.
  if (!snapshot.devices.empty()) m_history.gpus = gpu_identities(snapshot);
  m_history.frames.push_back(std::move(frame));
  if (m_history.frames.size() > m_options.keep_frames)
    m_history.frames.erase(m_history.frames.begin(),
                           m_history.frames.begin() +
                               static_cast<std::ptrdiff_t>(m_history.frames.size() - m_options.keep_frames));
}

GpuHistory GpuSampler::since(double after_time) const {
  std::lock_guard lock(m_mutex);
  GpuHistory out;
  out.available = m_history.available;
  out.error = m_history.error;
  out.gpus = m_history.gpus;
  auto first = std::upper_bound(m_history.frames.begin(), m_history.frames.end(), after_time,
                                [](double t, const GpuFrame& f) { return t < f.time; });
  out.frames.assign(first, m_history.frames.end());
  return out;
}

void GpuSampler::run() {
  std::unique_lock lock(m_mutex);
  while (!m_stopping) {
    if (std::chrono::steady_clock::now() >= m_active_until) {
      m_wake.wait(lock, [&] { return m_stopping || std::chrono::steady_clock::now() < m_active_until; });
      continue;
    }
    lock.unlock();
    const auto started = std::chrono::steady_clock::now();
    sample_now();
    lock.lock();
    m_wake.wait_until(lock, started + m_options.interval, [&] { return m_stopping; });
  }
}

}  // namespace gpuhost::telemetry
