#pragma once

#include <functional>
#include <mutex>
#include <optional>
#include <string>

#include "gpu/nvml_library.h"
#include "gpu/snapshot.h"
#include "telemetry/http_server.h"
#include "telemetry/prometheus_text.h"

namespace gpuhost::telemetry {

// The host-wide exporter behind `gpuhost serve`: collects every GPU through NVML when /metrics
// is scraped (never on a timer; research/05 §1.3) and routes the server's requests.
// Thread-safe: scrapes are serialised by a mutex (NVML is thread-safe, but two concurrent
// collections would only double the cost).
class MetricsExporter {
 public:
  // Where snapshots come from: the real collector by default; tests pass a function.
  using SnapshotSource = std::function<gpu::GpuSnapshot()>;

  // Opens NVML on the first scrape and keeps it open; when it is not usable, tries again on the
  // next scrape. `hostname` fills dcgm-exporter's Hostname label.
  explicit MetricsExporter(std::string hostname);
  MetricsExporter(std::string hostname, SnapshotSource source);

  // The whole /metrics body (text format 0.0.4). Never fails: NVML errors give gpuhost_nvml_up 0
  // and whatever could be read.
  [[nodiscard]] std::string scrape();

  // GET/HEAD /metrics, GET/HEAD / (a landing page linking /metrics); 405 for other methods on
  // those paths, 404 elsewhere.
  [[nodiscard]] Response handle(const RequestHead& request);

 private:
  gpu::GpuSnapshot collect();

  // Fixed after construction.
  const std::string m_hostname;
  const SnapshotSource m_source;  // empty: use m_nvml

  std::mutex m_mutex;
  // Guarded by m_mutex.
  std::optional<gpu::NvmlLibrary> m_nvml;
};

}  // namespace gpuhost::telemetry
