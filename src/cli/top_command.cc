#include "cli/top_command.h"

#include <chrono>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "base/time_format.h"
#include "cli/exit_codes.h"
#include "cli/jobs_dir.h"
#include "cli/top_job.h"
#include "cli/top_view.h"
#include "gpu/collector.h"
#include "gpu/nvml_session.h"
#include "platform/environment.h"
#include "platform/process_info.h"
#include "platform/system_info.h"
#include "platform/terminal.h"
#include "supervise/job.h"

namespace gpuhost::cli {

const char k_top_help[] = R"(Usage: gpuhost top [FLAGS]

A live view of this host's GPUs and the training job on them, refreshed every second: per GPU
its utilisation, memory, power (bars), temperature, clocks and the processes using it (pid, name,
GPU memory; "n/a" where the OS keeps that to itself, as Windows WDDM does); and the current job
of `gpuhost run`: phase, step, the latest loss and throughput from its training scalars, the
newest committed checkpoint and its age. The job is the newest running one (--job picks one).
Without a driver or NVML it says why and still shows the job.

Keys: q (or Ctrl-C) quits. The terminal (screen, cursor, input mode) is restored on every
way out, SIGTERM and SIGHUP included. Colour follows --color and NO_COLOR.

Flags:
  --interval D           time between refreshes (default 1s; "500ms", "2s"; at least 100ms)
  --job NAME             show this job instead of the newest running one
  --jobs-dir DIR         where jobs live (default as for gpuhost run)
  --once                 print one frame to stdout and exit (for scripts; no terminal needed)
  --json                 print one snapshot as JSON and exit:
                           {"time", "hostname", "nvml": {"available", "error", "driver_version",
                            "cuda_driver_version", ...}, "gpus": [{"index", "name", "uuid",
                            "utilization_percent", "memory_used_bytes", "memory_total_bytes",
                            "temperature_c", "power_watts", "power_limit_watts",
                            "sm_clock_mhz", "memory_clock_mhz", ..., "processes": [{"pid",
                            "name", "type", "used_memory_bytes"}]}], "job": {"name", "phase",
                            "step", "restarts", "preemptions", "loss": {"name", "value",
                            "step", "time"}, "throughput": {"name", "per_second",
                            "derived_from_steps"}, "checkpoint": {"id", "step", "size_bytes",
                            "committed_at", "age_seconds"}} or null, "job_note"}
                         values NVML or the job cannot give are null; a loss that is not a
                         number is the string "nan", "inf" or "-inf"
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  quit (q, Ctrl-C, SIGTERM), or the frame / JSON was printed
  2  bad command line, or no job named --job (with the closest name)
  3  the live view needs a terminal and stdin/stdout is not one (use --once or --json)

Examples:
  gpuhost top
  gpuhost top --job llama-lora --interval 2s
  gpuhost top --once
  gpuhost top --json | jq '.gpus[] | {index, utilization_percent, processes}'
)";

namespace {

constexpr FlagSpec k_top_flags[] = {
    {"--interval", true}, {"--job", true}, {"--jobs-dir", true}, {"--once", false}};

constexpr auto k_min_interval = std::chrono::milliseconds(100);

// One frame. `named_job_missing` is set when --job names no job (job_note then says so and
// names the closest one).
TopFrame collect_frame(gpu::NvmlSession& gpus, JobWatcher& watcher, const std::string& hostname,
                       bool& named_job_missing) {
  TopFrame frame;
  frame.time = std::chrono::system_clock::now();
  frame.hostname = hostname;
  frame.gpus = gpus.collect();
  for (const auto& d : frame.gpus.devices) {
    if (!d.processes.has_value()) continue;
    for (const auto& p : *d.processes)
      if (!frame.process_names.contains(p.pid))
        if (auto name = platform::process_name(p.pid)) frame.process_names[p.pid] = *name;
  }
  named_job_missing = false;
  auto job = watcher.poll(unix_seconds(frame.time));
  if (!job) {
    named_job_missing = job.error().code == ErrorCode::invalid_argument;
    frame.job_note = named_job_missing ? job.error().message : "cannot read the jobs: " + job.error().message;
  } else if (!*job) {
    frame.job_note = "no job in " + watcher.root().string() + " (gpuhost run starts one)";
  } else {
    frame.job = std::move(**job);
  }
  return frame;
}

// --once: the terminal's width; into a pipe or file, whole lines with bars sized for $COLUMNS
// or 120 columns.
TopLayout printed_layout(std::chrono::milliseconds interval) {
  if (auto size = platform::terminal_size()) return TopLayout{size->columns, true, false, interval};
  int columns = 120;
  if (auto text = platform::get_env("COLUMNS"))
    if (auto n = parse_int(*text); n && *n >= 40 && *n <= 1000) columns = static_cast<int>(*n);
  return TopLayout{columns, false, false, interval};
}

// The whole screen in one write: home, each line then erase-to-end, erase below. Lines stop one
// column short of the edge: a character in the last column leaves the cursor pending a wrap,
// where "erase to end of line" would take that character away again.
std::string screen_text(const TopFrame& frame, platform::TerminalSize size,
                        std::chrono::milliseconds interval, const TerminalStyle& style) {
  const int columns = std::max(size.columns - 1, 20);
  auto lines = render_top(frame, TopLayout{columns, true, true, interval}, style);
  const auto rows = static_cast<std::size_t>(std::max(size.rows, 2));
  if (lines.size() > rows) {
    const std::size_t hidden = lines.size() - (rows - 1);
    lines.resize(rows - 1);
    lines.push_back(fit_line(
        style.dim("... " + std::to_string(hidden) + " more lines: make the window taller"), columns));
  }
  std::string text = "\x1b[H";
  for (std::size_t i = 0; i < lines.size(); ++i) {
    text += lines[i];
    text += "\x1b[0m\x1b[K";
    if (i + 1 < lines.size()) text += "\r\n";
  }
  text += "\x1b[J";
  return text;
}

bool is_quit_key(char32_t key) {
  return key == U'q' || key == U'Q' || key == 0x03;
}

}  // namespace

int run_top(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_top_flags), std::end(k_top_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed)
    return report_error(context.err, parsed.error().message, "see gpuhost top --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_top_help;
    return k_exit_ok;
  }
  if (!parsed->positionals.empty())
    return report_error(context.err, "unexpected argument '" + parsed->positionals.front() + "'",
                        "to show one job: gpuhost top --job " + parsed->positionals.front(), k_exit_usage);
  std::chrono::milliseconds interval{1000};
  if (auto text = parsed->value("--interval")) {
    auto d = supervise::parse_duration(*text);
    if (!d)
      return report_error(context.err, "--interval: " + d.error().message, "e.g. --interval 2s",
                          k_exit_usage);
    if (*d < k_min_interval)
      return report_error(context.err, "--interval " + *text + " is shorter than 100ms", "", k_exit_usage);
    interval = *d;
  }
  std::optional<std::string> job_name = parsed->value("--job");
  if (job_name && !job::is_valid_job_name(*job_name))
    return report_error(context.err, "--job '" + *job_name + "' is not a job name",
                        "gpuhost jobs lists the jobs", k_exit_usage);
  const std::filesystem::path root = jobs_root_from(*parsed);

  const std::string hostname = platform::collect_system_info().hostname;
  // NVML kept open across refreshes, opened again while it is unusable, and closed while
  // gpuhost mig apply resets a GPU (gpu/nvml_session.h).
  gpu::NvmlSession gpus;
  JobWatcher watcher(root, job_name);
  bool named_job_missing = false;
  TopFrame frame = collect_frame(gpus, watcher, hostname, named_job_missing);
  if (named_job_missing)
    return report_error(context.err, frame.job_note, "gpuhost jobs lists the jobs", k_exit_usage);

  if (common->json) {
    context.out << json::dump(top_json(frame), 2) << "\n";
    return k_exit_ok;
  }
  const TerminalStyle style = TerminalStyle::for_stdout(common->color);
  if (parsed->has("--once")) {
    for (const auto& line : render_top(frame, printed_layout(interval), style)) context.out << line << "\n";
    return k_exit_ok;
  }

  context.out.flush();
  auto session = platform::TerminalSession::open();
  if (!session)
    return report_error(context.err, "gpuhost top: " + session.error().message,
                        "the live view needs a terminal; gpuhost top --once or --json print one frame",
                        k_exit_error);
  auto& terminal = **session;
  terminal.write(screen_text(frame, terminal.size(), interval, style));
  auto next = std::chrono::steady_clock::now() + interval;
  for (;;) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= next) {
      // A job that disappears later (its folder deleted) is a note in the frame, not an exit.
      frame = collect_frame(gpus, watcher, hostname, named_job_missing);
      terminal.write(screen_text(frame, terminal.size(), interval, style));
      next = std::max(next + interval, std::chrono::steady_clock::now());
      continue;
    }
    const auto event = terminal.wait_event(std::chrono::duration_cast<std::chrono::milliseconds>(next - now) +
                                           std::chrono::milliseconds(1));
    switch (event.kind) {
      case platform::TerminalEvent::Kind::key:
        if (is_quit_key(event.key)) return k_exit_ok;
        break;
      case platform::TerminalEvent::Kind::resize:
        terminal.write("\x1b[2J");
        terminal.write(screen_text(frame, terminal.size(), interval, style));
        break;
      case platform::TerminalEvent::Kind::stop: return k_exit_ok;
      case platform::TerminalEvent::Kind::timeout: break;
    }
  }
}

}  // namespace gpuhost::cli
