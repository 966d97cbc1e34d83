#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gpu/nvml_session.h"
#include "gpu/snapshot.h"
#include "telemetry/dashboard.h"
#include "telemetry/gpu_sampler.h"
#include "telemetry/http_server.h"
#include "telemetry/job_catalog.h"
#include "telemetry/prometheus_text.h"

namespace gpuhost::telemetry {

struct ExporterOptions {
  std::string hostname;  // dcgm-exporter's Hostname label
  // The jobs whose job and training metrics /metrics carries and the dashboard shows; empty:
  // none (GPU metrics only).
  std::filesystem::path jobs_root;
  std::optional<std::string> only_job;  // just this job of the root (`gpuhost run --dashboard`)
  // Where snapshots come from: empty for NVML; tests pass a function.
  std::function<gpu::GpuSnapshot()> source;
};

// The host-wide exporter behind `gpuhost serve`: collects every GPU through NVML when /metrics
// is scraped (never on a timer; research/05 §1.3), adds the job metrics of the supervised jobs
// (job_metrics.h; training scalars of the jobs whose history is loaded: every job that has not
// ended, see JobCatalog), and routes the server's requests, the dashboard's included. The dashboard's
// GPU sampler reads NVML only while a dashboard is open.
// Thread-safe: NVML collections are serialised by a mutex (NVML is thread-safe, but two
// concurrent collections would only double the cost).
class MetricsExporter {
 public:
  using SnapshotSource = std::function<gpu::GpuSnapshot()>;

  // Opens NVML on the first scrape and keeps it open; when it is not usable, tries again on the
  // next scrape.
  explicit MetricsExporter(ExporterOptions options);
  // GPU metrics only, no jobs.
  explicit MetricsExporter(std::string hostname);
  MetricsExporter(std::string hostname, SnapshotSource source);

  // The whole /metrics body (text format 0.0.4). Never fails: NVML errors give gpuhost_nvml_up 0
  // and whatever could be read.
  [[nodiscard]] std::string scrape();

  // GET/HEAD /metrics; the dashboard (/, /assets/..., /api/...; dashboard.h); 405 for other
  // methods on those paths, 404 elsewhere.
  [[nodiscard]] Response handle(const RequestHead& request);

 private:
  gpu::GpuSnapshot collect();  // REQUIRES: m_mutex held
  gpu::GpuSnapshot collect_locked();

  // Fixed after construction.
  const std::string m_hostname;
  const SnapshotSource m_source;  // empty: use m_nvml

  std::mutex m_mutex;
  // Guarded by m_mutex. NVML kept open with its Xid listener, GPM samples and NVLink counters
  // (readings that need the previous collection or a listener).
  gpu::NvmlSession m_nvml;

  // Thread-safe themselves. Declared last: the sampler's thread calls collect_locked().
  JobCatalog m_jobs;
  GpuSampler m_gpus;
  Dashboard m_dashboard;
};

}  // namespace gpuhost::telemetry
