// gpuhost advise: watches a running job's trainer for a few seconds (NVML and its threads) and
// says what limits it, with the fix (advise/judge.h; doc/advise.md).

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <ostream>
#include <thread>

#include "advise/judge.h"
#include "advise/watch.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/job_render.h"
#include "cli/jobs_dir.h"
#include "gpu/nvml_session.h"
#include "job/job_state.h"
#include "job/journal.h"
#include "platform/files.h"
#include "supervise/job.h"

namespace gpuhost::cli {

const char k_advise_help[] = R"(Usage: gpuhost advise JOB [FLAGS]

Watches a running job for a few seconds and says what limits it, with the fix in the trainer's
framework and the change to expect in step time. No change to the trainer: it reads NVML
(utilisation, memory, clock-event reasons; GPM tensor and SM activity on Hopper and later) and
the trainer's threads (Linux /proc: the main thread, PyTorch's pt_data_worker loader processes
and pt_data_pin thread, storage reads, major faults) with the host's pressure (PSI) and swap.

A verdict rests on two signals that agree (the GPU waits and the loader is saturated); a hint
on one. Each names its threshold and where it comes from (doc/advise.md). A healthy job gets
none. On Windows the trainer's process tree is read instead (each thread's CPU time, the
processes' reads; no ready-queue time or major faults, which Windows does not keep per thread).

Flags:
  --seconds N            how long to watch (default 10; 1..600)
  --processes N          trainer processes on this host, for the DataLoader worker suggestion
                         (torchrun's --nproc_per_node; default 1)
  --jobs-dir DIR         where jobs live (default as for gpuhost run)
  --json                 print the observation and the findings as JSON (doc/advise.md)
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  watched; the findings (or none) are printed
  2  bad command line, or no such job
  3  the job is not running, or its journal cannot be read

Examples:
  gpuhost advise llama-lora
  gpuhost advise resnet50 --seconds 30 --processes 8
  gpuhost advise resnet50 --json | jq '.findings[] | select(.strength == "verdict") | .fix'
)";

namespace {

constexpr FlagSpec k_advise_flags[] = {{"--jobs-dir", true}, {"--seconds", true}, {"--processes", true}};

// The GPUs the job's spec gives its trainer (--gpu, --env CUDA_VISIBLE_DEVICES); empty (every
// GPU) when it gives none: what the trainer inherited is not written down.
std::vector<std::string> job_visible_devices(const job::JobPaths& paths) {
  auto text = platform::read_file(paths.spec());
  if (!text) return {};
  auto spec = supervise::job_spec_from_json(*text);
  if (!spec) return {};
  auto visible = supervise::spec_environment_value(*spec, "CUDA_VISIBLE_DEVICES");
  return visible ? advise::split_visible_devices(*visible) : std::vector<std::string>{};
}

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

void render(std::ostream& out, const std::string& job, double watched, const advise::Observation& o,
            const std::vector<advise::Finding>& findings, const std::string& gpu_unseen,
            const TerminalStyle& style) {
  out << style.bold(job) << ": watched for " << fixed(watched, 1) << " s\n";
  for (const auto& g : o.gpus) {
    out << "  GPU " << g.index << " " << g.name << ": busy "
        << (g.busy_percent ? fixed(*g.busy_percent, 0) + " %" : std::string("unknown")) << ", memory "
        << (g.memory_used_share ? fixed(*g.memory_used_share * 100, 0) + " % used" : std::string("unknown"));
    if (g.tensor_percent) out << ", tensor " << fixed(*g.tensor_percent, 0) << " %";
    out << "\n";
  }
  if (o.gpus.empty()) out << "  GPUs: not seen (" << gpu_unseen << ")\n";
  if (o.host) {
    const auto& h = *o.host;
    out << "  trainer: busiest thread " << h.main_thread_name << " " << fixed(h.main_thread_cores, 2)
        << " cores (busy " << fixed(h.main_thread_busy * 100, 0) << " %), " << h.loader_workers
        << " DataLoader workers";
    if (h.loader_workers)
      out << " at " << fixed(h.loader_cores_mean, 2) << " cores each (busy " << fixed(h.loader_busy_mean * 100, 0)
          << " %)";
    out << (h.pin_thread ? ", pinned memory" : "") << "\n";
  } else {
    out << "  trainer: not seen (" << o.host_unseen << ")\n";
  }
  if (findings.empty()) {
    out << style.green("no finding") << ": nothing seen holds the job back\n";
    return;
  }
  for (const auto& f : findings) {
    const bool verdict = f.strength == advise::Strength::verdict;
    out << "\n"
        << (verdict ? style.yellow("verdict") : style.cyan("hint")) << " " << style.bold(f.id)
        << (f.gpu ? " (GPU " + std::to_string(*f.gpu) + ")" : std::string()) << ": " << f.limit << "\n";
    for (const auto& e : f.evidence) out << "  evidence: " << e << "\n";
    if (!f.fix.empty()) out << "  fix:      " << f.fix << "\n";
    out << "  expected: " << f.expected << "\n";
    for (const auto& s : f.sources) out << style.dim("  source:   " + s) << "\n";
  }
}

}  // namespace

int run_advise(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_advise_flags), std::end(k_advise_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed)
    return report_error(context.err, parsed.error().message, "see gpuhost advise --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_advise_help;
    return k_exit_ok;
  }
  if (parsed->positionals.size() != 1)
    return report_error(context.err, "gpuhost advise takes one job name", "gpuhost jobs lists them",
                        k_exit_usage);
  auto count_flag = [&](const char* name, int fallback, int most) -> std::optional<int> {
    auto v = parsed->value(name);
    if (!v) return fallback;
    auto n = parse_int(*v);
    if (!n || *n < 1 || *n > most) return std::nullopt;
    return static_cast<int>(*n);
  };
  const auto seconds = count_flag("--seconds", 10, 600);
  if (!seconds)
    return report_error(context.err, "--seconds expects 1..600, got '" + *parsed->value("--seconds") + "'",
                        "", k_exit_usage);
  const auto processes = count_flag("--processes", 1, 4096);
  if (!processes)
    return report_error(context.err,
                        "--processes expects a count, got '" + *parsed->value("--processes") + "'", "",
                        k_exit_usage);

  const std::string name = parsed->positionals.front();
  const std::filesystem::path root = jobs_root_from(*parsed);
  const auto paths = job::job_paths(root, name);
  auto journal = job::read_journal(paths.journal());
  if (!journal) {
    if (journal.error().code != ErrorCode::not_found)
      return report_error(context.err, journal.error().message, "", k_exit_error);
    return report_error(context.err, "no job '" + name + "' in " + root.string(), "gpuhost jobs lists them",
                        k_exit_usage);
  }
  const auto state = job::fold_journal(journal->records);
  const std::string phase = shown_phase(state);
  if (phase != "running" || !state.child_pid)
    return report_error(
        context.err, "job '" + name + "' is not running (" + phase + "): advise watches a running trainer",
        "start it with gpuhost run, then run gpuhost advise " + name + " while it trains", k_exit_error);

  advise::WatchOptions watch;
  watch.group = *state.child_pid;
  watch.window = std::chrono::seconds(*seconds);
  watch.local_processes = static_cast<unsigned>(*processes);
  watch.visible_devices = job_visible_devices(paths);
  if (!common->json) context.err << "gpuhost advise: watching " << name << " for " << *seconds << " s\n";
  gpu::NvmlSession session;
  auto watched = advise::watch(watch, session);
  if (!watched)
    return report_error(context.err, "job '" + name + "': " + watched.error().message,
                        "gpuhost status " + name + " says what happened", k_exit_error);
  const advise::Observation& observation = watched->observation;
  const double watched_seconds = watched->seconds;
  const std::string& gpu_unseen = watched->gpu_unseen;
  const auto findings = advise::judge(observation);

  if (common->json) {
    json::Value doc = json::Value::object();
    doc["job"] = name;
    doc["seconds"] = watched_seconds;
    doc["observation"] = advise::to_json(observation);
    if (observation.gpus.empty()) doc["gpu_unseen"] = gpu_unseen;
    json::Value list = json::Value::array();
    for (const auto& f : findings) list.push_back(advise::to_json(f));
    doc["findings"] = std::move(list);
    context.out << json::dump(doc, 2) << "\n";
    return k_exit_ok;
  }
  render(context.out, name, watched_seconds, observation, findings, gpu_unseen,
         TerminalStyle::for_stdout(common->color));
  return k_exit_ok;
}

}  // namespace gpuhost::cli
