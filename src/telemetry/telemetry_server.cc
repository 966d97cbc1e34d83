#include "telemetry/telemetry_server.h"

namespace gpuhost::telemetry {
namespace {

bool is_wildcard(const std::string& address) {
  return address == "0.0.0.0" || address == "::";
}

}  // namespace

TelemetryServer::TelemetryServer(std::string url_host, std::unique_ptr<MetricsExporter> exporter)
    : m_url_host(std::move(url_host)), m_exporter(std::move(exporter)) {}

Result<std::unique_ptr<TelemetryServer>> TelemetryServer::start(TelemetryServerOptions options) {
  std::string bind = options.bind_address;
  if (bind.starts_with('[') && bind.ends_with(']')) bind = bind.substr(1, bind.size() - 2);
  const bool wildcard = is_wildcard(bind);

  HttpServerOptions http;
  http.bind_address = bind;
  http.port = options.port;
  http.access.token = options.token;
  std::vector<std::string> extra = options.extra_hosts;
  if (!options.hostname.empty()) extra.push_back(options.hostname);
  // A wildcard bind is reached by names we cannot list; there the token is the protection.
  if (!(wildcard && !options.token.empty())) http.access.allowed_hosts = allowed_host_names(bind, extra);

  auto exporter = std::make_unique<MetricsExporter>(
      ExporterOptions{options.hostname, std::move(options.jobs_root), std::move(options.only_job),
                      std::move(options.source)});
  const std::string url_host = wildcard                              ? std::string("127.0.0.1")
                               : bind.find(':') != std::string::npos ? "[" + bind + "]"
                                                                     : bind;
  std::unique_ptr<TelemetryServer> server(new TelemetryServer(url_host, std::move(exporter)));
  MetricsExporter* handler_target = server->m_exporter.get();
  auto http_server = HttpServer::start(std::move(http), [handler_target](const RequestHead& request) {
    return handler_target->handle(request);
  });
  if (!http_server) return std::unexpected(http_server.error());
  server->m_server = std::move(*http_server);
  return server;
}

TelemetryServer::~TelemetryServer() {
  stop();
}

std::uint16_t TelemetryServer::port() const {
  return m_server->port();
}

std::string TelemetryServer::dashboard_url() const {
  return "http://" + m_url_host + ":" + std::to_string(port()) + "/";
}

std::string TelemetryServer::metrics_url() const {
  return dashboard_url() + "metrics";
}

void TelemetryServer::stop() {
  if (m_server) m_server->stop();
}

}  // namespace gpuhost::telemetry
