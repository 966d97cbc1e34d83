#include "telemetry/exporter.h"

#include <chrono>

#include "gpu/collector.h"
#include "platform/child_process.h"
#include "telemetry/gpu_metrics.h"

namespace gpuhost::telemetry {
namespace {

constexpr std::string_view k_landing_page = R"(<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>gpuhost</title></head>
<body>
<h1>gpuhost</h1>
<p>Prometheus metrics of this host's GPUs (dcgm-exporter names): <a href="metrics">/metrics</a></p>
<p>Metric reference: doc/metrics.md in the gpuhost sources.</p>
</body>
</html>
)";

}  // namespace

MetricsExporter::MetricsExporter(std::string hostname) : m_hostname(std::move(hostname)) {}

MetricsExporter::MetricsExporter(std::string hostname, SnapshotSource source)
    : m_hostname(std::move(hostname)), m_source(std::move(source)) {}

gpu::GpuSnapshot MetricsExporter::collect() {
  if (m_source) return m_source();
  if (!m_nvml || !m_nvml->initialized()) {
    m_nvml.reset();  // shut the old one down before loading again
    m_nvml.emplace(gpu::NvmlLibrary::open());
  }
  return gpu::collect_snapshot(*m_nvml);
}

std::string MetricsExporter::scrape() {
  std::lock_guard lock(m_mutex);
  const auto started = std::chrono::steady_clock::now();
  MetricSet set;
  append_gpu_metrics(collect(), m_hostname, set);

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
  const std::string path = request.path();
  const bool known = path == "/" || path == "/metrics";
  if (!known) {
    Response r;
    r.status = 404;
    r.body = "not found; try /metrics\n";
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
  if (path == "/metrics") {
    r.content_type = std::string(k_prometheus_content_type);
    r.body = scrape();
  } else {
    r.content_type = "text/html; charset=utf-8";
    r.body = std::string(k_landing_page);
    r.headers.emplace_back("Content-Security-Policy", "default-src 'none'");
  }
  return r;
}

}  // namespace gpuhost::telemetry
