#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "gpu/snapshot.h"
#include "telemetry/exporter.h"
#include "telemetry/http_server.h"

namespace gpuhost::telemetry {

struct TelemetryServerOptions {
  std::string bind_address = "127.0.0.1";  // "0.0.0.0" / "::" for every interface
  std::uint16_t port = 0;                  // 0 picks a free port
  // Bearer token; empty for none. The caller decides whether a non-loopback bind may go without
  // (gpuhost serve refuses unless --insecure-no-auth).
  std::string token;
  std::string hostname;                      // dcgm-exporter's Hostname label; also an accepted Host name
  std::vector<std::string> extra_hosts;      // further Host header names to accept
  std::filesystem::path jobs_root;           // empty: GPU metrics only
  std::optional<std::string> only_job;       // just this job of jobs_root
  std::function<gpu::GpuSnapshot()> source;  // empty for NVML; tests pass a function
};

// What `gpuhost serve` runs, and `gpuhost run --dashboard` for its one job: /metrics, the
// dashboard and its API (dashboard.h) on one HttpServer with Host and token checks. Owns both;
// stop() or the destructor stops the server, then the exporter.
//
//   TelemetryServerOptions o;
//   o.port = 0;
//   o.jobs_root = job::jobs_root();
//   o.only_job = spec.name;
//   auto server = TelemetryServer::start(std::move(o));   // Result<unique_ptr<TelemetryServer>>
//   err << "dashboard at " << (*server)->dashboard_url() << "\n";
class TelemetryServer {
 public:
  // Errors: the listener's (address in use, permission denied).
  [[nodiscard]] static Result<std::unique_ptr<TelemetryServer>> start(TelemetryServerOptions options);
  ~TelemetryServer();
  TelemetryServer(const TelemetryServer&) = delete;
  TelemetryServer& operator=(const TelemetryServer&) = delete;

  [[nodiscard]] std::uint16_t port() const;
  // "http://127.0.0.1:PORT/" (a wildcard bind shows as 127.0.0.1; IPv6 in brackets). Never holds
  // the token.
  [[nodiscard]] std::string dashboard_url() const;
  [[nodiscard]] std::string metrics_url() const;  // dashboard_url() + "metrics"
  void stop();

 private:
  TelemetryServer(std::string url_host, std::unique_ptr<MetricsExporter> exporter);

  const std::string m_url_host;
  std::unique_ptr<MetricsExporter> m_exporter;
  std::unique_ptr<HttpServer> m_server;  // uses *m_exporter: stopped first
};

}  // namespace gpuhost::telemetry
