#include <filesystem>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/job_render.h"
#include "cli/jobs_dir.h"
#include "job/job_state.h"
#include "job/journal.h"
#include "platform/file_lock.h"
#include "platform/files.h"
#include "supervise/job.h"

namespace gpuhost::cli {

const char k_jobs_help[] = R"(Usage: gpuhost jobs [FLAGS]

Lists the jobs `gpuhost run` has supervised on this machine: state (running, preempted,
finished, failed ...), checkpoints (committed / bad), the newest step, restarts and preemptions.

Flags:
  --jobs-dir DIR         where jobs live (default: $GPUHOST_HOME/jobs, else
                         ~/.local/state/gpuhost/jobs; Windows %LOCALAPPDATA%\gpuhost\jobs)
  --json                 print the list as JSON (schema: doc/run-json.md)
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  listed (also when there are no jobs)
  2  bad command line
  3  the jobs directory cannot be read, or the one --jobs-dir names does not exist

Examples:
  gpuhost jobs
  gpuhost jobs --json | jq '.[] | select(.phase == "preempted") | .name'
)";

const char k_status_help[] = R"(Usage: gpuhost status [JOB] [FLAGS]

Shows one supervised job from its journal (without JOB: the only job, or the one whose journal
changed last, named on stderr): state, every checkpoint (committed, bad with the
reason, retired, pinned), and its events: preemption notices with their deadlines, save requests
and how long each save took, restarts with their cause, steps lost, watcher trouble.

Flags:
  --events N             how many of the latest events to show (default 20; 0 = all)
  --pin ID               keep checkpoint ID (ck-N) whatever --keep says, e.g. the best one
  --jobs-dir DIR         where jobs live (default as for gpuhost run)
  --json                 print the status as JSON (schema: doc/run-json.md)
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  shown
  2  bad command line, no such job (with the closest name), or no job at all
  3  the journal cannot be read

Examples:
  gpuhost status
  gpuhost status llama-lora
  gpuhost status llama-lora --events 0 --json
  gpuhost status llama-lora --pin ck-42
)";

namespace {

constexpr FlagSpec k_jobs_flags[] = {{"--jobs-dir", true}};
constexpr FlagSpec k_status_flags[] = {{"--jobs-dir", true}, {"--events", true}, {"--pin", true}};

// Pins a checkpoint: straight into the journal when no supervisor holds the job, otherwise as a
// request file the running supervisor journals on its next scan (one writer per journal).
int pin_checkpoint(CommandContext& context, const job::JobPaths& paths, const job::JobState& state,
                   const std::string& id) {
  bool known = false;
  for (const auto& c : state.checkpoints)
    known = known || (c.id == id && c.status == job::CheckpointStatus::committed);
  if (!known)
    return report_error(context.err, "no committed checkpoint '" + id + "' in this job",
                        "gpuhost status JOB lists the ids (ck-N)", k_exit_usage);
  auto lock = platform::FileLock::try_lock(paths.lock());
  if (lock) {
    auto journal = job::Journal::open(paths.journal());
    if (!journal) return report_error(context.err, journal.error().message, "", k_exit_error);
    json::Value fields = json::Value::object();
    fields["id"] = id;
    auto appended = journal->append("checkpoint_pinned", std::move(fields));
    if (!appended) return report_error(context.err, appended.error().message, "", k_exit_error);
  } else {
    std::error_code ec;
    std::filesystem::create_directories(paths.dir / "pins", ec);
    auto written = platform::write_file_atomic(paths.dir / "pins" / id, "");
    if (!written) return report_error(context.err, written.error().message, "", k_exit_error);
  }
  context.out << "pinned " << id << "\n";
  return k_exit_ok;
}

}  // namespace

int run_jobs(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_jobs_flags), std::end(k_jobs_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed) return report_error(context.err, parsed.error().message, "see gpuhost jobs --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_jobs_help;
    return k_exit_ok;
  }
  if (!parsed->positionals.empty())
    return report_error(context.err, "unexpected argument '" + parsed->positionals.front() + "'",
                        "for one job use: gpuhost status " + parsed->positionals.front(), k_exit_usage);
  const auto root = jobs_root_from(*parsed);
  // No folder at the default place means no job has run here yet; a folder the user named that
  // is not there is a mistake (a typo, an unmounted share), never "no jobs".
  if (std::error_code ec; parsed->value("--jobs-dir") && !std::filesystem::is_directory(root, ec))
    return report_error(context.err, "--jobs-dir " + root.string() + ": no such folder",
                        "check the path; without --jobs-dir the jobs of this user are listed", k_exit_error);
  auto names = job::list_jobs(root);
  if (!names) return report_error(context.err, names.error().message, "", k_exit_error);

  std::vector<JobSummary> jobs;
  for (const auto& name : *names) {
    auto journal = job::read_journal(job::job_paths(root, name).journal());
    if (!journal) continue;  // a directory without a journal is not a job
    jobs.push_back(JobSummary{name, job::fold_journal(journal->records)});
  }
  if (common->json) {
    json::Value list = json::Value::array();
    for (const auto& job : jobs) {
      json::Value doc = job_status_json(job.state);
      doc["name"] = job.name;
      list.push_back(std::move(doc));
    }
    context.out << json::dump(list, 2) << "\n";
    return k_exit_ok;
  }
  render_job_list(context.out, jobs, TerminalStyle::for_stdout(common->color), root);
  return k_exit_ok;
}

int run_status(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_status_flags), std::end(k_status_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed) return report_error(context.err, parsed.error().message, "see gpuhost status --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_status_help;
    return k_exit_ok;
  }
  if (parsed->positionals.size() > 1)
    return report_error(context.err, "gpuhost status takes one job name", "gpuhost jobs lists them", k_exit_usage);
  std::size_t events = 20;
  if (auto v = parsed->value("--events")) {
    auto n = parse_int(*v);
    if (!n || *n < 0) return report_error(context.err, "--events expects a count, got '" + *v + "'", "", k_exit_usage);
    events = static_cast<std::size_t>(*n);
  }
  const auto root = jobs_root_from(*parsed);
  std::string name;
  if (!parsed->positionals.empty()) {
    name = parsed->positionals.front();
  } else {
    // The job the user most likely means: the only one, else the one that changed last.
    auto names = job::list_jobs(root);
    std::optional<std::filesystem::file_time_type> newest;
    std::size_t count = 0;
    for (const auto& each : names ? *names : std::vector<std::string>{}) {
      std::error_code ec;
      const auto changed = std::filesystem::last_write_time(job::job_paths(root, each).journal(), ec);
      if (ec) continue;  // a directory without a journal is not a job
      ++count;
      if (!newest || changed > *newest) {
        newest = changed;
        name = each;
      }
    }
    if (name.empty())
      return report_error(context.err, "no jobs in " + root.string(),
                          "start one with: gpuhost run --checkpoints DIR -- COMMAND (or pass --jobs-dir)", k_exit_usage);
    if (count > 1) context.err << "gpuhost status: " << name << ", the newest of " << count << " jobs (gpuhost jobs lists them)\n";
  }
  const auto paths = job::job_paths(root, name);
  auto journal = job::read_journal(paths.journal());
  if (!journal) {
    if (journal.error().code != ErrorCode::not_found) return report_error(context.err, journal.error().message, "", k_exit_error);
    std::string hint = "gpuhost jobs lists the jobs in " + root.string();
    if (auto names = job::list_jobs(root)) {
      if (auto close = closest_match(name, *names)) hint = "did you mean '" + *close + "'?";
    }
    return report_error(context.err, "no job '" + name + "' in " + root.string(), hint, k_exit_usage);
  }
  auto state = job::fold_journal(journal->records);
  if (auto id = parsed->value("--pin")) return pin_checkpoint(context, paths, state, *id);

  if (common->json) {
    json::Value doc = job_status_json(state);
    doc["name"] = name;
    doc["job_dir"] = paths.dir.string();
    doc["journal_torn_tail_bytes"] = journal->damage.torn_tail_bytes;
    json::Value corrupt = json::Value::array();
    for (auto line : journal->damage.corrupt_lines) corrupt.push_back(line);
    doc["journal_corrupt_lines"] = std::move(corrupt);
    context.out << json::dump(doc, 2) << "\n";
    return k_exit_ok;
  }
  render_job_status(context.out, name, paths.dir, state, journal->damage, events, TerminalStyle::for_stdout(common->color));
  return k_exit_ok;
}

}  // namespace gpuhost::cli
