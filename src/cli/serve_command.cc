#include <algorithm>
#include <chrono>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/jobs_dir.h"
#include "platform/files.h"
#include "platform/socket.h"
#include "platform/system_info.h"
#include "platform/termination.h"
#include "supervise/job.h"
#include "telemetry/telemetry_server.h"

namespace gpuhost::cli {

const char k_serve_help[] = R"(Usage: gpuhost serve [FLAGS]

Serves Prometheus metrics of this host's GPUs at /metrics (text format 0.0.4), read through
NVML when scraped, with dcgm-exporter's metric names, units and labels, so dashboards and alerts
written for dcgm-exporter (Grafana dashboard 12239) work unchanged, on Windows too. Also
gpuhost_* metrics: NVML up/error, metrics NVML cannot give here and why, gpuhost's own CPU
time, memory and scrape duration, and for every job supervised by `gpuhost run` its phase,
checkpoints, restarts and training scalars (loss ...). Every metric: doc/metrics.md.

The same address serves a dashboard at / (one page, compiled into gpuhost, works offline):
training curves of the jobs with TensorBoard's smoothing, throughput, per-GPU utilisation,
memory, temperature and power, and markers for checkpoints, preemption notices and restarts,
updated live. Its JSON API: doc/dashboard.md. Runs until Ctrl-C or SIGTERM.

Security: listens on 127.0.0.1 by default. Any other address needs --token-file/--token
(clients send "Authorization: Bearer TOKEN"; a browser opens the dashboard once as
/?token=TOKEN and then keeps it in a cookie) or an explicit --insecure-no-auth. Requests whose
Host header names another host are refused (DNS rebinding). Pages never contain the token.

Flags:
  --bind ADDR[:PORT]     address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all);
                         HOST:PORT, [V6]:PORT and :PORT (every address) as node_exporter takes
  --port P               TCP port (default 9808; 0 picks a free one, printed at start)
  --jobs-dir DIR         the jobs `gpuhost run` supervises (default: $GPUHOST_HOME/jobs, else
                         ~/.local/state/gpuhost/jobs; %LOCALAPPDATA%\gpuhost\jobs on Windows)
  --token-file F         require this bearer token (the file's first line)
  --token T              the same, given inline (visible in process listings: prefer a file)
  --allow-host NAME      also accept this Host header name (a DNS name of this machine);
                         repeatable
  --insecure-no-auth     allow a non-loopback --bind without a token
  --json                 print {"url": ..., "dashboard": ..., "port": ...} on one line once
                         listening
  -h, --help

Exit codes:
  0  stopped by Ctrl-C / SIGTERM
  2  bad command line (also: a non-loopback --bind without --token-file or --insecure-no-auth)
  3  cannot listen (address in use, permission denied) or unreadable token file

Examples:
  gpuhost serve                      # then open http://127.0.0.1:9808/ in a browser
  curl -s http://127.0.0.1:9808/metrics | grep DCGM_FI_DEV_GPU_UTIL
  curl -s http://127.0.0.1:9808/api/jobs
  gpuhost serve --bind 0.0.0.0 --token-file /etc/gpuhost/token
                                     # browser: http://HOST:9808/?token=TOKEN once
  ssh -L 9808:127.0.0.1:9808 gpu-box # a remote dashboard without opening the port
  gpuhost serve --port 0 --json --jobs-dir /data/gpuhost-jobs
)";

namespace {

constexpr FlagSpec k_serve_flags[] = {
    {"--bind", true},  {"--port", true},       {"--jobs-dir", true},         {"--token-file", true},
    {"--token", true}, {"--allow-host", true}, {"--insecure-no-auth", false}};

}  // namespace

int run_serve(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_serve_flags), std::end(k_serve_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed)
    return report_error(context.err, parsed.error().message, "see gpuhost serve --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_serve_help;
    return k_exit_ok;
  }
  if (!parsed->positionals.empty())
    return report_error(context.err, "unexpected argument '" + parsed->positionals[0] + "'",
                        "see gpuhost serve --help", k_exit_usage);

  std::string bind = parsed->value("--bind").value_or("127.0.0.1");
  // --bind HOST:PORT, [V6]:PORT or :PORT, like node_exporter's and dcgm-exporter's listen
  // addresses; a bare IPv6 address (several colons, no brackets) has no port.
  std::optional<std::string> bind_port;
  if (bind.starts_with('[')) {
    const auto close = bind.find(']');
    if (close == std::string::npos) return report_error(context.err, "--bind " + bind + ": no closing ']'", "", k_exit_usage);
    if (close + 1 < bind.size()) {
      if (bind[close + 1] != ':')
        return report_error(context.err, "--bind " + bind + ": expected [ADDRESS]:PORT", "", k_exit_usage);
      bind_port = bind.substr(close + 2);
    }
    bind = bind.substr(1, close - 1);
  } else if (std::count(bind.begin(), bind.end(), ':') == 1) {
    const auto colon = bind.find(':');
    bind_port = bind.substr(colon + 1);
    bind = colon == 0 ? "0.0.0.0" : bind.substr(0, colon);
  }
  std::uint16_t port = 9808;
  auto port_of = [](const std::string& text) -> std::optional<std::uint16_t> {
    auto n = parse_int(text);
    if (!n || *n < 0 || *n > 65535) return std::nullopt;
    return static_cast<std::uint16_t>(*n);
  };
  if (bind_port) {
    auto n = port_of(*bind_port);
    if (!n) return report_error(context.err, "--bind: the port must be 0..65535, not '" + *bind_port + "'", "", k_exit_usage);
    port = *n;
  }
  if (auto p = parsed->value("--port")) {
    auto n = port_of(*p);
    if (!n) return report_error(context.err, "--port must be 0..65535, not '" + *p + "'", "", k_exit_usage);
    if (bind_port && *n != port)
      return report_error(context.err, "--bind names port " + std::to_string(port) + ", --port " + *p,
                          "give the port once", k_exit_usage);
    port = *n;
  }

  std::string token;
  if (auto file = parsed->value("--token-file")) {
    auto text = platform::read_file(*file);
    if (!text)
      return report_error(context.err, "cannot read --token-file: " + text.error().message, "", k_exit_error);
    auto lines = split_lines(*text);
    token = lines.empty() ? "" : std::string(trim(lines[0]));
    if (token.empty())
      return report_error(context.err, "--token-file " + *file + " is empty", "", k_exit_usage);
  } else if (auto inline_token = parsed->value("--token")) {
    token = std::string(trim(*inline_token));
    if (token.empty()) return report_error(context.err, "--token is empty", "", k_exit_usage);
  }
  const bool insecure = parsed->has("--insecure-no-auth");
  if (!token.empty() && insecure)
    return report_error(context.err, "--insecure-no-auth contradicts --token/--token-file",
                        "give one of them", k_exit_usage);
  if (!platform::is_loopback_address(bind) && token.empty() && !insecure)
    return report_error(
        context.err, "--bind " + bind + " would expose GPU metrics to the network without authentication",
        "give --token-file FILE (clients send Authorization: Bearer TOKEN), or --insecure-no-auth "
        "to allow it knowingly",
        k_exit_usage);

  telemetry::TelemetryServerOptions options;
  options.bind_address = bind;
  options.port = port;
  options.token = token;
  options.hostname = platform::collect_system_info().hostname;
  options.extra_hosts = parsed->values("--allow-host");
  options.jobs_root = jobs_root_from(*parsed);
  const std::string jobs_dir = options.jobs_root.string();

  platform::install_termination_handlers();
  auto server = telemetry::TelemetryServer::start(std::move(options));
  if (!server)
    return report_error(context.err, "cannot listen: " + server.error().message,
                        "another program may hold port " + std::to_string(port) +
                            " (another gpuhost serve, dcgm-exporter): pick one with --port N, or --port 0 for a free one",
                        k_exit_error);

  if (common->json) {
    json::Value doc = json::Value::object();
    doc["url"] = (*server)->metrics_url();
    doc["dashboard"] = (*server)->dashboard_url();
    doc["port"] = static_cast<std::int64_t>((*server)->port());
    doc["bind"] = bind;
    doc["auth"] = token.empty() ? "none" : "bearer";
    doc["jobs_dir"] = jobs_dir;
    context.out << json::dump(doc) << std::endl;
  } else {
    context.out << "gpuhost serve: metrics at " << (*server)->metrics_url() << ", dashboard at "
                << (*server)->dashboard_url() << (token.empty() ? "" : "?token=TOKEN (bearer token required)")
                << " (jobs in " << jobs_dir << "); Ctrl-C to stop" << std::endl;
  }

  while (!platform::wait_termination_request(std::chrono::seconds(1))) {
  }
  (*server)->stop();
  platform::notify_shutdown_complete();
  return k_exit_ok;
}

}  // namespace gpuhost::cli
