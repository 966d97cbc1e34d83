#include "telemetry/exporter.h"

#include <chrono>

#include "platform/child_process.h"
#include "telemetry/gpu_metrics.h"
#include "telemetry/job_metrics.h"

namespace gpuhost::telemetry {

MetricsExporter::MetricsExporter(ExporterOptions options)
    : m_hostname(std::move(options.hostname)),
      m_source(std::move(options.source)),
      m_jobs(JobCatalogOptions{std::move(options.jobs_root), std::move(options.only_job)}),
      m_gpus([this] { return collect_locked(); }),
      m_dashboard(m_jobs, m_gpus) {}

MetricsExporter::MetricsExporter(std::string hostname)
    : MetricsExporter(ExporterOptions{std::move(hostname), {}, {}, {}}) {}

MetricsExporter::MetricsExporter(std::string hostname, SnapshotSource source)
    : MetricsExporter(ExporterOptions{std::move(hostname), {}, {}, std::move(source)}) {}

gpu::GpuSnapshot MetricsExporter::collect() {
  if (m_source) return m_source();
  return m_nvml.collect();  // opens NVML again while it is unusable
}

gpu::GpuSnapshot MetricsExporter::collect_locked() {
  std::lock_guard lock(m_mutex);
  return collect();
}

std::string MetricsExporter::scrape() {
  const auto started = std::chrono::steady_clock::now();
  MetricSet set;
  append_gpu_metrics(collect_locked(), m_hostname, set);

  m_jobs.refresh();
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (const auto& job : m_jobs.jobs())
    append_job_metrics(job.name, job.journal->state, job.history.get(), now, set);

  const auto usage = platform::self_resource_usage();
  set.add("gpuhost_process_cpu_seconds_total", MetricType::counter,
          "CPU time (user and system) gpuhost has used since it started", {},
          std::chrono::duration<double>(usage.cpu_time).count());
  set.add("gpuhost_process_peak_resident_memory_bytes", MetricType::gauge,
          "Peak resident memory of the gpuhost process (getrusage ru_maxrss / PeakWorkingSetSize)", {},
          static_cast<double>(usage.peak_rss_bytes));
  set.add("gpuhost_scrape_duration_seconds", MetricType::gauge,
          "Time this scrape took to collect every metric above (NVML calls included)", {},
          std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  auto text = to_prometheus_text(set);
  // Only a bug in the metric names above can fail; keep the scrape alive and say so.
  if (!text)
    return "# gpuhost: internal error rendering metrics: " + text.error().message +
           "\n# HELP gpuhost_render_error 1 when gpuhost could not render its metrics\n"
           "# TYPE gpuhost_render_error gauge\ngpuhost_render_error 1\n";
  return std::move(*text);
}

Response MetricsExporter::handle(const RequestHead& request) {
  if (request.path() != "/metrics") {
    if (auto answer = m_dashboard.handle(request)) return std::move(*answer);
    Response r;
    r.status = 404;
    r.body = "not found; try /metrics, or / for the dashboard\n";
    return r;
  }
  if (request.method != "GET" && request.method != "HEAD") {
    Response r;
    r.status = 405;
    r.body = "method not allowed\n";
    r.headers.emplace_back("Allow", "GET, HEAD");
    return r;
  }
  Response r;
  r.content_type = std::string(k_prometheus_content_type);
  r.body = scrape();
  return r;
}

}  // namespace gpuhost::telemetry
