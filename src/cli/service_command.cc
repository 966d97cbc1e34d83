// gpuhost service: `serve` and supervised jobs as Windows services (platform/service.h). Linux
// has systemd units for the same (deploy/systemd/), which this command names there.
#include <filesystem>
#include <ostream>
#include <sstream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/command.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "job/job_paths.h"
#include "platform/service.h"
#include "supervise/job.h"

namespace gpuhost::cli {

const char k_service_help[] =
    R"(Usage: gpuhost service install serve [--name NAME] [--manual] [-- SERVE_FLAGS...]
       gpuhost service install job FILE [--name NAME] [--manual] [--preshutdown D] [-- RUN_FLAGS...]
       gpuhost service start|stop|status|uninstall NAME [--timeout D] [--json]

Windows: runs `gpuhost serve`, or `gpuhost run --job-file FILE`, as a Windows service through the
Service Control Manager, as LocalSystem, started at boot (--manual: on request). Stopping the
service, or shutting Windows down, is the preemption path: a supervised job has its trainer save,
waits for the checkpoint to commit, and stops (its journal records the notice as "service stop");
`serve` stops serving. Starts, stop requests and exits are written to the Windows Application
Event Log (source "gpuhost"), the job's events to its own journal (gpuhost status NAME).

On Linux the systemd units do this (README, "Installing as a package"): gpuhost-serve.service and
gpuhost-run@NAME.service.

  install serve          register `gpuhost serve SERVE_FLAGS` as NAME (default gpuhost-serve);
                         restarted 5 s after a failure
  install job FILE       register `gpuhost run --job-file FILE RUN_FLAGS` as NAME (default
                         gpuhost-run-<file name>); FILE is stored as an absolute path
  start NAME             start the service
  stop NAME              ask it to stop and wait (--timeout, default 10m) until it has: for a
                         job, until the save has committed
  status NAME            state, process id, last exit code and command line
  uninstall NAME         remove a stopped service

Flags:
  --name NAME            the service's name ([A-Za-z0-9._-], at most 64)
  --manual               start on request only, not at boot
  --preshutdown D        install job: how long Windows waits at shutdown for the save
                         (default 5m; Windows' own default since 1703 is 10 s)
  --timeout D            stop: how long to wait (default 10m)
  --json                 print the result as JSON
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  done (stop: the service stopped cleanly; a job that saved and stopped counts as clean)
  1  stop: the service ended with an error (its exit code is shown), or is still stopping
  2  bad command line; not Windows; a service of that name exists (install), or none does
  3  the Service Control Manager refused (not elevated: run from an administrator prompt)

Examples:
  gpuhost service install serve -- --port 9808
  gpuhost service install job C:\jobs\llama.toml --name llama
  gpuhost service start llama
  gpuhost service stop llama                 # the trainer saves, then the service stops
  gpuhost service status llama --json
  gpuhost service uninstall llama
)";

namespace {

constexpr FlagSpec k_service_flags[] = {
    {"--name", true}, {"--manual", false}, {"--preshutdown", true}, {"--timeout", true}};

// What `service run` reports to the SCM as a clean end: 0, and 75 for `run` (saved and stopped
// on request: the service's stop path), as the systemd unit's SuccessExitStatus=75.
const std::vector<int> k_clean_exit_codes = {k_exit_ok, k_exit_preempted};

int service_error(CommandContext& context, const Error& error) {
  const bool usage = error.code == ErrorCode::unsupported || error.code == ErrorCode::invalid_argument ||
                     error.code == ErrorCode::not_found;
  return report_error(context.err, error.message, usage ? "see gpuhost service --help" : "",
                      usage ? k_exit_usage : k_exit_error);
}

json::Value state_json(const std::string& name, const platform::ServiceState& s) {
  json::Value doc = json::Value::object();
  doc["name"] = name;
  doc["state"] = s.state;
  doc["process_id"] = static_cast<std::int64_t>(s.process_id);
  doc["exit_code"] = static_cast<std::int64_t>(s.exit_code);
  doc["never_started"] = s.never_started;
  doc["start"] = s.automatic_start ? "automatic" : "manual";
  doc["command_line"] = s.image_path;
  return doc;
}

void print_state(CommandContext& context, bool as_json, const std::string& name,
                 const platform::ServiceState& s) {
  if (as_json) {
    context.out << json::dump(state_json(name, s)) << "\n";
    return;
  }
  context.out << name << ": " << s.state;
  if (s.process_id) context.out << ", process " << s.process_id;
  if (s.state == "stopped") {
    if (s.never_started)
      context.out << ", never started";
    else
      context.out << ", last exit code " << s.exit_code;
  }
  context.out << "\n  start: " << (s.automatic_start ? "automatic" : "manual")
              << "\n  command: " << s.image_path << "\n";
}

// `service run NAME -- COMMAND ARGS`: what the SCM starts.
int run_service_process(CommandContext& context, const std::vector<std::string>& positionals) {
  if (positionals.size() < 3)
    return report_error(context.err, "service run needs NAME and a gpuhost command",
                        "see gpuhost service --help", k_exit_usage);
  const std::string& name = positionals[1];
  const Command* command = find_command(positionals[2]);
  if (!command || (command->name != "serve" && command->name != "run"))
    return report_error(context.err, "service run: only serve and run can run as a service",
                        "see gpuhost service --help", k_exit_usage);
  std::vector<std::string> args(positionals.begin() + 3, positionals.end());
  // The command's own messages (a job file it refuses, a port in use) go into the Event Log
  // when it fails; a service has nowhere else to print them.
  std::ostringstream out, err;
  auto body = [&]() {
    platform::report_event(
        platform::EventType::information,
        "service " + name + " started: gpuhost " + std::string(command->name) + " " + join(args, " "));
    CommandContext inner{args, out, err};
    int code = command->run(inner);
    std::string said = err.str();
    if (code != k_exit_ok && code != k_exit_preempted && !said.empty())
      platform::report_event(
          platform::EventType::error,
          "service " + name + ": " + (said.size() > 2000 ? said.substr(said.size() - 2000) : said));
    return code;
  };
  auto code = platform::run_as_service(name, body, k_clean_exit_codes);
  if (!code && code.error().code == ErrorCode::unavailable)  // started from a prompt
    return report_error(context.err, code.error().message, "", k_exit_usage);
  if (!code) return service_error(context, code.error());
  return *code;
}

}  // namespace

int run_service(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_service_flags), std::end(k_service_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed)
    return report_error(context.err, parsed.error().message, "see gpuhost service --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_service_help;
    return k_exit_ok;
  }
  const auto& p = parsed->positionals;
  if (p.empty())
    return report_error(context.err, "service needs an action: install, start, stop, status, uninstall",
                        "see gpuhost service --help", k_exit_usage);
  const std::string& action = p[0];
  if (action == "run") return run_service_process(context, p);

  auto duration_flag = [&](const char* flag,
                           std::chrono::milliseconds fallback) -> Result<std::chrono::milliseconds> {
    auto text = parsed->value(flag);
    if (!text) return fallback;
    auto d = supervise::parse_duration(*text);
    if (!d)
      return make_error(ErrorCode::invalid_argument,
                        std::string(flag) + " " + *text + ": " + d.error().message);
    return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  };
  auto timeout = duration_flag("--timeout", std::chrono::minutes(10));
  if (!timeout) return report_error(context.err, timeout.error().message, "", k_exit_usage);
  auto preshutdown = duration_flag("--preshutdown", std::chrono::minutes(5));
  if (!preshutdown) return report_error(context.err, preshutdown.error().message, "", k_exit_usage);
  if (auto name = parsed->value("--name"); name && !job::is_valid_job_name(*name))
    return report_error(context.err,
                        "--name " + *name + ": use letters, digits, '.', '_' and '-' (at most 64)", "",
                        k_exit_usage);

  if (action == "install") {
    if (p.size() < 2 || (p[1] != "serve" && p[1] != "job"))
      return report_error(context.err, "service install needs what to install: serve, or job FILE",
                          "see gpuhost service --help", k_exit_usage);
    platform::ServiceDefinition d;
    d.automatic_start = !parsed->has("--manual");
    std::vector<std::string> extra;
    if (p[1] == "serve") {
      d.name = parsed->value("--name").value_or("gpuhost-serve");
      d.display_name = "gpuhost serve (" + d.name + ")";
      d.description =
          "Prometheus /metrics and the dashboard for this host's GPUs and training jobs (gpuhost serve)";
      d.arguments = {"service", "run", d.name, "--", "serve"};
      d.restart_on_failure = true;
      extra.assign(p.begin() + 2, p.end());
    } else {
      if (p.size() < 3)
        return report_error(context.err, "service install job needs the job file",
                            "see gpuhost service --help", k_exit_usage);
      std::error_code ec;
      std::filesystem::path file = std::filesystem::absolute(p[2], ec);
      if (ec || !std::filesystem::is_regular_file(file))
        return report_error(context.err, "job file " + p[2] + ": not found",
                            "give the path of a gpuhost.toml", k_exit_usage);
      std::string stem = file.stem().string();
      d.name = parsed->value("--name").value_or("gpuhost-run-" + stem);
      if (!job::is_valid_job_name(d.name))
        return report_error(context.err, "service name " + d.name + " from the file name is not usable",
                            "give --name", k_exit_usage);
      d.display_name = "gpuhost run (" + d.name + ")";
      d.description = "Supervised training job " + file.string() + " (gpuhost run --job-file)";
      // --quiet: the trainer's output goes to the job's logs only (a service has no console).
      d.arguments = {"service", "run", d.name, "--", "run", "--job-file", file.string(), "--quiet"};
      d.preshutdown_timeout = *preshutdown;
      extra.assign(p.begin() + 3, p.end());
    }
    d.arguments.insert(d.arguments.end(), extra.begin(), extra.end());
    auto installed = platform::install_service(d);
    if (!installed) return service_error(context, installed.error());
    for (const std::string& warning : *installed) context.err << "gpuhost: warning: " << warning << "\n";
    auto state = platform::query_service(d.name);
    if (!state) return service_error(context, state.error());
    print_state(context, common->json, d.name, *state);
    return k_exit_ok;
  }

  if (p.size() != 2)
    return report_error(context.err, "service " + action + " needs the service's name",
                        "see gpuhost service --help", k_exit_usage);
  const std::string& name = p[1];
  if (action == "start") {
    // Then the state, as status prints it (start_pending or running).
    if (auto started = platform::start_service(name); !started)
      return service_error(context, started.error());
  } else if (action == "stop") {
    auto state = platform::stop_service(name, *timeout);
    if (!state) return service_error(context, state.error());
    print_state(context, common->json, name, *state);
    if (state->state != "stopped") {
      context.err << "gpuhost: " << name << " is still " << state->state << " after --timeout\n";
      return k_exit_findings;
    }
    return state->exit_code == 0 ? k_exit_ok : k_exit_findings;
  } else if (action == "uninstall") {
    if (auto removed = platform::uninstall_service(name); !removed)
      return service_error(context, removed.error());
    if (common->json) {
      json::Value doc = json::Value::object();
      doc["name"] = name;
      doc["uninstalled"] = true;
      context.out << json::dump(doc) << "\n";
    } else {
      context.out << name << ": uninstalled\n";
    }
    return k_exit_ok;
  } else if (action != "status") {
    return report_error(context.err, "unknown service action '" + action + "'",
                        "use install, start, stop, status or uninstall", k_exit_usage);
  }
  auto state = platform::query_service(name);
  if (!state) return service_error(context, state.error());
  print_state(context, common->json, name, *state);
  return k_exit_ok;
}

}  // namespace gpuhost::cli
