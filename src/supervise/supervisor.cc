#include "supervise/supervisor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <mutex>
#include <set>
#include <system_error>
#include <utility>

#include "base/strings.h"
#include "platform/child_process.h"
#include "platform/environment.h"
#include "platform/file_lock.h"
#include "platform/job_cgroup.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/system_info.h"
#include "platform/termination.h"
#include "crypt/cipher_suite.h"
#include "supervise/checkpoint_ledger.h"
#include "supervise/job_mirror.h"
#include "supervise/job_recorder.h"
#include "supervise/output_log.h"
#include "supervise/notice_response.h"
#include "supervise/stop_controller.h"
#include "supervise/trainer_launch.h"
#include "supervise/training_metrics.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// A disk with less than this free (or less than the newest checkpoint's size) is reported when
// the trainer fails: the usual cause of a crash in the middle of a save.
constexpr std::uint64_t k_low_disk_bytes = 256ull << 20;

std::string seconds_text(milliseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1fs", std::chrono::duration<double>(d).count());
  return text;
}

json::Value string_array(const std::vector<std::string>& items) {
  json::Value array = json::Value::array();
  for (const auto& item : items) array.push_back(item);
  return array;
}

using StopReason = StopCause;

// The supervisor's loop: one trainer attempt after another, notices turned into saves and stops
// (stop_controller.h), restarts by the policy. The journal and the state folded from it are the
// recorder's; checkpoints are the ledger's; the remote is the mirror's.
class Supervisor {
 public:
  Supervisor(const SupervisorOptions& options, JobSpec spec, JobPaths paths, Journal journal)
      : m_options(options), m_spec(std::move(spec)), m_paths(std::move(paths)),
        m_recorder(std::move(journal), JobRecorder::Callbacks{options.on_record, options.on_message}),
        m_ledger(m_recorder, m_spec, m_paths, options.snapshots,
                 CheckpointLedger::Hooks{[this](const CommittedCheckpoint& c, SystemClock::time_point written) {
                                           if (m_mirror) m_mirror->committed(c);
                                           m_response.committed(c, written);
                                         },
                                         [this](const CommittedCheckpoint& c) {
                                           if (m_mirror) m_mirror->retired(c);
                                         }}),
        m_stdout_log(m_paths.logs() / "stdout.log"), m_stderr_log(m_paths.logs() / "stderr.log"),
        m_response(NoticeResponse::Context{
            m_recorder, m_spec, m_paths,
            [this](const PreemptionNotice& notice) -> Result<void> {
              if (!m_watcher) return {};
              return m_watcher->acknowledge(notice);
            },
            [this]() -> std::optional<std::int64_t> { return m_metrics ? m_metrics->newest_step() : std::nullopt; },
            !m_spec.remote.empty()}) {}

  Result<SupervisorResult> run();

 private:
  bool record(std::string_view type, json::Value fields) { return m_recorder.record(type, std::move(fields)); }
  void message(std::string_view text) const { m_recorder.message(text); }
  const JobState& state() const { return m_recorder.state(); }

  void start_watcher();
  void start_training_metrics();
  void record_progress(bool now = false);
  void scan_checkpoints(bool settled) { m_ledger.scan(settled); }
  Result<platform::ChildProcess> launch(const ResumePoint& resume);

  // One life of the child; returns how it ended.
  struct AttemptEnd {
    Attempt attempt;
    StopReason stop = StopReason::none;
    bool drill_kill = false;
    platform::ChildExit exit;
  };
  Result<AttemptEnd> supervise_child(platform::ChildProcess& child, const ResumePoint& resume);

  void check_disk_after_failure();
  std::optional<StopReason> wait_between_attempts(milliseconds delay);
  SupervisorResult finish(Outcome outcome, std::string reason);

  const SupervisorOptions& m_options;
  JobSpec m_spec;
  JobPaths m_paths;
  JobRecorder m_recorder;
  CheckpointLedger m_ledger;
  RotatingLog m_stdout_log;
  RotatingLog m_stderr_log;
  OutputTail m_stderr_tail;  // the last attempt's stderr, for the failure message
  NoticeInbox m_inbox;
  std::unique_ptr<NoticeWatcher> m_watcher;
  std::string m_run_token;
  // The job's own cgroup v2 (platform/job_cgroup.h): null where none is delegated to us and on
  // Windows (the Job Object holds the tree there).
  std::unique_ptr<platform::JobCgroup> m_cgroup;
  std::optional<SteadyClock::time_point> m_first_start;
  std::vector<bool> m_drills_done;
  std::chrono::microseconds m_child_cpu{0};
  std::uint64_t m_child_peak_rss = 0;
  std::unique_ptr<TrainingMetricsRecorder> m_metrics;  // null with training_metrics off
  std::unique_ptr<JobMirror> m_mirror;                 // null without a remote
  std::filesystem::path m_metrics_channel;
  SteadyClock::time_point m_next_progress{};
  std::optional<std::int64_t> m_last_progress_step;

  // Notices, saves and stops of the current attempt (notice_response.h).
  NoticeResponse m_response;
};

void Supervisor::start_training_metrics() {
  if (!m_options.training_metrics) return;
  TrainingMetricsOptions options;
  options.metrics_dir = m_paths.metrics();
  std::error_code ec;
  options.roots.push_back(m_spec.working_directory ? fs::absolute(*m_spec.working_directory, ec) : fs::current_path(ec));
  fs::path checkpoints = m_spec.checkpoint_location;
  // A single-file checkpoint (weights/last.pt): its run folder holds the loggers' files.
  if (!fs::is_directory(checkpoints, ec) && checkpoints.has_extension()) checkpoints = checkpoints.parent_path();
  if (checkpoints.filename() == "weights") checkpoints = checkpoints.parent_path();  // Ultralytics runs/*/weights
  if (!checkpoints.empty()) options.roots.push_back(checkpoints);
  std::optional<std::string> own_channel = platform::get_env("GPUHOST_METRICS_FILE");
  for (const auto& [name, value] : m_spec.environment)
    if (name == "GPUHOST_METRICS_FILE") own_channel = value;
  options.channel = own_channel ? fs::path(*own_channel) : m_paths.metrics() / "channel.jsonl";
  if (options.channel.is_relative()) options.channel = options.roots.front() / options.channel;
  m_metrics_channel = options.channel;
  options.on_message = m_options.on_message;
  m_metrics = std::make_unique<TrainingMetricsRecorder>(std::move(options));
}

// The newest step the trainer reported, journalled now and then so `gpuhost status` and the
// dashboard's markers know where training was; never more often than progress_interval.
void Supervisor::record_progress(bool right_now) {
  if (!m_metrics) return;
  const auto now = SteadyClock::now();
  if (now < m_next_progress && !right_now) return;
  m_next_progress = now + m_options.progress_interval;
  auto step = m_metrics->newest_step();
  // Compared with the last progress record, not the job's last step: a checkpoint whose name
  // carries the same step does not say the trainer was seen there.
  if (!step || (m_last_progress_step && *m_last_progress_step == *step)) return;
  m_last_progress_step = step;
  json::Value fields = json::Value::object();
  fields["step"] = *step;
  record("progress", std::move(fields));
}

void Supervisor::start_watcher() {
  std::string evidence;
  std::optional<NoticeSource> cloud = watched_cloud(m_spec.cloud, evidence);
  if (!cloud) return;
  WatcherOptions options;
  options.cloud = *cloud;
  options.endpoint = m_spec.metadata_endpoint;
  options.poll_interval = m_spec.poll_interval;
  WatcherCallbacks callbacks;
  callbacks.on_notice = [this](const PreemptionNotice& notice) { m_inbox.push(notice); };
  // Trouble is reported from the watcher's thread; the journal belongs to this thread, so it
  // travels as a pseudo-notice the loop turns into a watcher_trouble record.
  callbacks.on_trouble = [this, source = *cloud](std::string_view text) {
    PreemptionNotice trouble;
    trouble.source = source;
    trouble.kind = NoticeKind::advisory;
    trouble.detail = std::string(text);
    trouble.event_id = "\x01trouble";
    m_inbox.push(std::move(trouble));
  };
  m_watcher = std::make_unique<NoticeWatcher>(options, callbacks);
}

Result<platform::ChildProcess> Supervisor::launch(const ResumePoint& resume) {
  TrainerLaunchInputs inputs;
  m_run_token = random_hex(16);
  inputs.run_token = m_run_token;
  // GPUHOST_ATTEMPT folds the engine's restarts of the whole job (Slurm's SLURM_RESTART_COUNT):
  // a requeued job on a node whose job folder was lost still counts on from the engine's number,
  // and one whose folder survived is not counted twice.
  inputs.attempt = std::max(state().child_starts + 1, m_options.topology.engine_restarts + 1);
  if (m_options.topology.multi_node()) {
    inputs.nnodes = m_options.topology.nnodes_max;
    inputs.node_rank = m_options.topology.node_rank;
  }
  inputs.resume = resume;
  inputs.metrics_channel = m_metrics_channel;
  inputs.inherited_pythonunbuffered = platform::get_env("PYTHONUNBUFFERED").has_value();
  inputs.inherited_metrics_file = platform::get_env("GPUHOST_METRICS_FILE").has_value();
  platform::ChildOptions child = GPUHOST_TRY(trainer_launch(m_spec, m_paths, inputs));
  child.cgroup = m_cgroup.get();
  if (m_metrics) m_metrics->child_started();
  m_stderr_tail.clear();
  child.on_output = [this](platform::OutputStream stream, std::string_view chunk) {
    if (stream == platform::OutputStream::out) {
      m_stdout_log.write(chunk);
    } else {
      m_stderr_log.write(chunk);
      m_stderr_tail.write(chunk);
    }
    if (m_metrics) m_metrics->on_output(stream, chunk);
    if (m_options.echo) m_options.echo(stream, chunk);
  };
  std::error_code ec;
  fs::remove(m_paths.save_request(), ec);

  // The token is durable before the attempt exists: a supervisor killed between here and
  // child_started leaves a trainer the next one still finds (and kills) by it.
  json::Value starting = json::Value::object();
  starting["attempt"] = inputs.attempt;
  starting["run_token"] = m_run_token;
  if (!record("child_starting", std::move(starting)))
    return make_error(ErrorCode::io_error, "cannot write the job journal: the trainer is not started without a record of it");
  // One line in each log between attempts, so a reader sees where one ended and the next began.
  const std::string separator = "==== gpuhost: attempt " + std::to_string(inputs.attempt) + " at " +
                                journal_time(SystemClock::now()) +
                                (resume.id ? ", resuming from " + *resume.id : std::string(", fresh start")) + " ====\n";
  m_stdout_log.write(separator);
  m_stderr_log.write(separator);
  auto spawned = platform::ChildProcess::spawn(child);
  if (!spawned) return std::unexpected(spawned.error());
  m_response.begin_attempt(SystemClock::now());
  json::Value fields = json::Value::object();
  fields["pid"] = spawned->pid();
  fields["attempt"] = inputs.attempt;
  fields["run_token"] = m_run_token;
  fields["command"] = string_array(child.argv);
  fields["resume_from"] = resume.id ? json::Value(*resume.id) : json::Value();
  fields["resume_path"] = resume.path ? json::Value(*resume.path) : json::Value();
  record("child_started", std::move(fields));
  if (!m_first_start) m_first_start = SteadyClock::now();
  return spawned;
}

Result<Supervisor::AttemptEnd> Supervisor::supervise_child(platform::ChildProcess& child, const ResumePoint& resume) {
  AttemptEnd end;
  end.attempt.resumed_from = resume.id;
  const auto started = SteadyClock::now();
  auto next_scan = started;
  bool drill_kill = false;

  for (;;) {
    auto exited = child.wait_for(milliseconds(100));
    if (!exited) return std::unexpected(exited.error());
    if (*exited) {
      end.exit = **exited;
      break;
    }
    const auto now = SteadyClock::now();

    while (auto request = platform::wait_termination_request(milliseconds(0))) {
      PreemptionNotice notice;
      notice.source = NoticeSource::signal;
      notice.detail = platform::termination_request_name(*request);
      notice.deadline = SystemClock::now() + default_lead_time(NoticeSource::signal);
      m_response.notice(child, notice,
                    *request == platform::TerminationRequest::interrupt ? StopReason::user_stop : StopReason::preemption);
    }

    while (auto notice = m_inbox.pop()) m_response.notice(child, *notice, StopReason::preemption);
    record_progress();
    if (m_mirror) m_mirror->pump();

    for (std::size_t i = 0; i < m_options.drills.size(); ++i) {
      if (m_drills_done[i] || now - *m_first_start < m_options.drills[i].at) continue;
      m_drills_done[i] = true;
      const Drill& drill = m_options.drills[i];
      json::Value fields = json::Value::object();
      fields["action"] = drill.action == Drill::Action::kill ? "kill" : "preempt";
      fields["at_s"] = std::chrono::duration<double>(drill.at).count();
      record("drill", std::move(fields));
      if (drill.action == Drill::Action::kill) {
        drill_kill = true;
        child.kill_tree();
      } else {
        PreemptionNotice notice;
        notice.source = NoticeSource::drill;
        notice.deadline = SystemClock::now() + drill.lead;
        notice.detail = "drill preempt@" + seconds_text(drill.at);
        m_response.notice(child, notice, StopReason::preemption);
      }
    }

    if (now >= next_scan) {
      scan_checkpoints(false);
      next_scan = now + m_options.scan_interval;
    }

    m_response.tick(child);
  }

  end.attempt.ran_for = duration_cast<milliseconds>(SteadyClock::now() - started);
  // The child's group and cgroup died with it (platform/child_process.h); without a cgroup, what
  // left the group (setsid, a daemonised helper) still carries the attempt's token. Nothing of
  // this attempt may run beside the next one.
  int stragglers = platform::kill_processes_with_environment(k_run_token_variable, m_run_token);
  if (m_cgroup) {
    auto killed = m_cgroup->kill_all(std::chrono::seconds(10));
    if (killed) stragglers += *killed;
    else message("processes of the last attempt are still alive: " + killed.error().message);
  }
  if (stragglers > 0) {
    json::Value fields = json::Value::object();
    fields["count"] = stragglers;
    fields["attempt"] = state().child_starts;
    record("leftovers_killed", std::move(fields));
  }
  m_child_cpu += end.exit.cpu_time;
  m_child_peak_rss = std::max(m_child_peak_rss, end.exit.peak_rss_bytes);
  scan_checkpoints(true);

  // A notice that arrived while the child was ending on its own still ends this run: the machine
  // is going away either way.
  end.stop = m_response.outcome();
  end.drill_kill = drill_kill;
  end.attempt.succeeded = end.exit.succeeded() && end.stop == StopReason::none;
  end.attempt.preempted = end.stop != StopReason::none;
  end.attempt.failure = end.exit.describe();

  std::string cause = end.stop == StopReason::preemption ? "preempted"
                      : end.stop == StopReason::user_stop ? "stopped"
                      : drill_kill                        ? "drill_kill"
                      : end.exit.succeeded()              ? "success"
                                                          : "crash";
  record_progress(true);  // the step the trainer reached, journalled before its exit
  json::Value fields = json::Value::object();
  fields["pid"] = child.pid();
  fields["exit_code"] = end.exit.exit_code;
  fields["signaled"] = end.exit.signaled;
  fields["signal"] = end.exit.signal;
  fields["description"] = end.exit.describe();
  fields["ran_for_ms"] = end.attempt.ran_for.count();
  fields["cause"] = cause;
  record("child_exited", std::move(fields));
  return end;
}

void Supervisor::check_disk_after_failure() {
  std::error_code ec;
  fs::path where = m_spec.checkpoint_location;
  while (!where.empty() && !fs::exists(where, ec)) where = where.parent_path();
  if (where.empty()) return;
  auto space = platform::disk_space(where);
  if (!space) return;
  std::uint64_t newest = 0;
  if (!state().checkpoints.empty()) newest = state().checkpoints.back().size_bytes;
  if (space->available_bytes >= std::max(k_low_disk_bytes, newest)) return;
  json::Value fields = json::Value::object();
  fields["path"] = where.string();
  fields["available_bytes"] = space->available_bytes;
  record("disk_low", std::move(fields));
}

// Sleeps out a restart backoff, still answering SIGTERM/Ctrl-C and notices (there is no child
// to save, so either ends the run at once).
std::optional<StopReason> Supervisor::wait_between_attempts(milliseconds delay) {
  const auto until = SteadyClock::now() + delay;
  for (;;) {
    auto now = SteadyClock::now();
    if (now >= until) return std::nullopt;
    auto request = platform::wait_termination_request(std::min<milliseconds>(duration_cast<milliseconds>(until - now), milliseconds(100)));
    if (request) return *request == platform::TerminationRequest::interrupt ? StopReason::user_stop : StopReason::preemption;
    while (auto notice = m_inbox.pop()) {
      if (notice->event_id == "\x01trouble" || notice->kind != NoticeKind::preemption) continue;
      json::Value fields = json::Value::object();
      fields["source"] = notice_source_name(notice->source);
      fields["kind"] = "preemption";
      fields["deadline"] = journal_time(notice->deadline);
      fields["detail"] = notice->detail;
      fields["event_id"] = notice->event_id;
      record("notice", std::move(fields));
      return StopReason::preemption;
    }
  }
}

SupervisorResult Supervisor::finish(Outcome outcome, std::string reason) {
  if (m_mirror) {
    if (outcome == Outcome::preempted) {
      if (m_response.acted_on()) m_mirror->wait_for_newest(m_response.acted_on()->deadline);
      if (m_response.acknowledgement_pending()) m_response.acknowledge();
    } else {
      // The checkpoints committed last go up before gpuhost exits, for as long as
      // --final-upload-timeout allows (Ctrl-C or SIGTERM leaves the rest to the next supervisor,
      // which resumes the uploads).
      m_mirror->drain(m_options.final_upload_timeout);
    }
    // What this run handed to the mirror must be durable there; otherwise the run says so and
    // does not end as a success.
    JobMirror::Ending ending = m_mirror->stop();
    m_mirror.reset();
    const auto& undurable = ending.undurable;
    if (!undurable.empty()) {
      std::string list;
      const std::size_t first = undurable.size() > 5 ? undurable.size() - 5 : 0;
      if (first > 0) list = "..., ";
      for (std::size_t i = first; i < undurable.size(); ++i) list += (i > first ? ", " : "") + undurable[i];
      std::string what = std::to_string(undurable.size()) + (undurable.size() == 1 ? " checkpoint is" : " checkpoints are") +
                         " NOT durable on " + redact_store_url(m_spec.remote) + " (" + list + ")";
      if (!ending.last_error.empty()) what += "; last error: " + ending.last_error;
      if (outcome == Outcome::finished) {
        outcome = Outcome::unmirrored;
        reason = "the trainer finished, but " + what + "; run the same command again to retry the uploads";
      } else {
        reason += "; " + what;
      }
    }
  }
  m_ledger.delete_retired(true);  // no upload holds the files retention retired any more
  platform::ResourceUsage self = platform::self_resource_usage();
  json::Value fields = json::Value::object();
  fields["outcome"] = outcome_name(outcome);
  fields["reason"] = reason;
  fields["supervisor_cpu_ms"] = self.cpu_time.count() / 1000;
  fields["supervisor_peak_rss_bytes"] = self.peak_rss_bytes;
  fields["child_cpu_ms"] = m_child_cpu.count() / 1000;
  fields["child_peak_rss_bytes"] = m_child_peak_rss;
  record("supervisor_stopped", std::move(fields));
  platform::notify_shutdown_complete();
  SupervisorResult result;
  result.outcome = outcome;
  result.reason = std::move(reason);
  if (outcome == Outcome::failed) {
    result.last_stderr = m_stderr_tail.last_lines(5);
    result.stderr_log = m_paths.logs() / "stderr.log";
  }
  result.job_name = m_spec.name;
  result.job_dir = m_paths.dir;
  result.state = state();
  return result;
}

Result<SupervisorResult> Supervisor::run() {
  const bool new_job = m_recorder.contents().records.empty();
  if (new_job) {
    json::Value fields = json::Value::object();
    fields["name"] = m_spec.name;
    fields["command"] = string_array(m_spec.command);
    fields["checkpoint_location"] = m_spec.checkpoint_location.string();
    fields["fresh"] = m_options.fresh;
    if (!record("job_created", std::move(fields))) return make_error(ErrorCode::io_error, "cannot write the job journal in " + m_paths.dir.string());
  }
  const bool after_crash = state().supervisor_pid.has_value();
  // Leftovers of an earlier supervisor of this job: everything in the job's cgroup (one name per
  // job folder, so the same cgroup as last time), and whatever carries its last run token.
  int leftovers = 0;
  std::string cgroup_unavailable;
  if (auto cgroup = platform::JobCgroup::open(platform::job_cgroup_name(m_spec.name, m_paths.dir.string()))) {
    m_cgroup = std::move(*cgroup);
    auto killed = m_cgroup->kill_all(std::chrono::seconds(10));
    if (killed) leftovers += *killed;
    else message("processes of an earlier run are still alive: " + killed.error().message);
  } else {
    cgroup_unavailable = cgroup.error().message;
  }
  if (!state().run_token.empty()) leftovers += platform::kill_processes_with_environment(k_run_token_variable, state().run_token);

  std::string evidence;
  json::Value started = json::Value::object();
  started["pid"] = platform::current_process_id();
  auto cloud = watched_cloud(m_spec.cloud, evidence);
  started["cloud"] = cloud ? notice_source_name(*cloud) : "none";
  started["after_crash"] = after_crash;
  if (m_cgroup) started["cgroup"] = m_cgroup->path().string();
  else if (platform::current_os() != platform::OsFamily::windows) started["cgroup_unavailable"] = cgroup_unavailable;
  if (const Topology& t = m_options.topology; !t.engine.empty() || t.multi_node()) {
    json::Value where = json::Value::object();
    where["engine"] = t.engine;
    where["nnodes"] = t.nnodes;
    where["nnodes_max"] = t.nnodes_max;
    where["node_rank"] = t.node_rank ? json::Value(*t.node_rank) : json::Value();
    where["leader"] = t.leader_host;
    where["job_key"] = t.job_key;
    where["engine_restarts"] = t.engine_restarts;
    where["restart_owner"] = t.restart_owner();
    where["describe"] = t.describe();
    started["topology"] = std::move(where);
  }
  if (!record("supervisor_started", std::move(started)))
    return make_error(ErrorCode::io_error, "cannot write the job journal in " + m_paths.dir.string());
  if (leftovers > 0) {
    json::Value fields = json::Value::object();
    fields["count"] = leftovers;
    record("leftovers_killed", std::move(fields));
  }

  platform::install_termination_handlers();
  platform::become_child_subreaper();
  start_watcher();
  start_training_metrics();
  if (m_options.on_job_ready) m_options.on_job_ready(m_spec.name, m_paths.dir);
  m_ledger.prime();
  m_drills_done.assign(m_options.drills.size(), false);
  if (m_options.fresh) m_ledger.ignore_present();
  // No trainer of ours runs yet (leftovers were killed above), so what is on disk has settled:
  // checkpoints written before this run (by a trainer run without gpuhost, or in the last
  // moments before a supervisor was killed) are committed now and can be resumed from, instead
  // of being found only after a fresh start has overwritten them.
  scan_checkpoints(true);
  if (new_job && !m_options.fresh) m_ledger.announce_present();
  auto mirror = m_spec.remote.empty() ? Result<std::unique_ptr<JobMirror>>() : JobMirror::start(m_recorder, m_spec, m_paths);
  if (!mirror) {
    json::Value fields = json::Value::object();
    // Store errors quote the URL: what is journalled holds no secret a bad URL may carry.
    const std::string url = redact_store_url(m_spec.remote);
    fields["reason"] = "the remote store " + url +
                       " cannot be used: " + replace_all(mirror.error().message, m_spec.remote, url);
    record("gave_up", fields);
    return finish(Outcome::failed, fields.get_string("reason"));
  }
  m_mirror = std::move(*mirror);
  if (m_mirror) {
    m_mirror->restore();
    scan_checkpoints(true);
    m_mirror->resume_pending();
  }

  std::vector<Attempt> history;
  for (;;) {
    ResumePoint resume = m_ledger.choose_resume_point();
    auto child = launch(resume);
    if (!child) {
      json::Value fields = json::Value::object();
      fields["reason"] = child.error().message;
      record("gave_up", std::move(fields));
      return finish(Outcome::failed, "the trainer could not be started: " + child.error().message);
    }
    auto end = supervise_child(*child, resume);
    if (!end) {
      child->kill_tree();
      return finish(Outcome::failed, "lost track of the trainer: " + end.error().message);
    }
    if (end->stop == StopReason::preemption)
      return finish(Outcome::preempted, "stopped for a preemption notice " + m_response.stop_report());
    if (end->stop == StopReason::user_stop) return finish(Outcome::stopped, "stopped on request " + m_response.stop_report());
    if (end->attempt.succeeded) return finish(Outcome::finished, "the trainer finished");

    history.push_back(end->attempt);
    check_disk_after_failure();
    RestartDecision decision = decide_restart(m_spec.restart, history);
    if (decision.mark_bad) {
      json::Value fields = json::Value::object();
      fields["id"] = *decision.mark_bad;
      fields["reason"] = decision.reason;
      record("checkpoint_bad", std::move(fields));
    }
    if (decision.action != RestartDecision::Action::restart) {
      json::Value fields = json::Value::object();
      fields["reason"] = decision.reason;
      record("gave_up", std::move(fields));
      return finish(Outcome::failed, decision.reason);
    }
    json::Value fields = json::Value::object();
    fields["delay_ms"] = decision.delay.count();
    fields["reason"] = decision.reason;
    record("restart_scheduled", std::move(fields));
    if (auto stop = wait_between_attempts(decision.delay)) {
      return *stop == StopReason::user_stop ? finish(Outcome::stopped, "stopped on request while waiting to restart")
                                            : finish(Outcome::preempted, "preempted while waiting to restart");
    }
  }
}

}  // namespace

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::finished: return "finished";
    case Outcome::unmirrored: return "unmirrored";
    case Outcome::preempted: return "preempted";
    case Outcome::failed: return "failed";
    case Outcome::stopped: return "stopped";
  }
  return "failed";
}

Result<SupervisorResult> run_supervisor(const SupervisorOptions& options) {
  JobSpec spec = options.spec;
  std::error_code ec;
  if (spec.checkpoint_location.is_relative()) spec.checkpoint_location = fs::absolute(spec.checkpoint_location, ec);
  const bool name_given = !spec.name.empty();
  if (!name_given) spec.name = default_job_name(spec);
  if (auto valid = validate_job_spec(spec); !valid) return std::unexpected(valid.error());
  // Before the job directory, the lock or the trainer: --encrypt sm4 on the Windows build, or a
  // misspelled suite, fails here and not after the first checkpoint.
  if (!spec.encrypt.empty()) {
    if (auto suite = crypt::choose_suite(spec.encrypt); !suite)
      return std::unexpected(with_context(suite.error(), suite.error().code == ErrorCode::unsupported
                                                             ? "checking the job: unsupported on this build"
                                                             : "checking the job"));
  }
  JobIdentity identity = GPUHOST_TRY(resolve_job_identity(options.jobs_root, spec, name_given));
  if (!identity.renamed_from.empty() && options.on_message)
    options.on_message("job '" + identity.renamed_from + "' supervises the checkpoints of another folder: this run is job '" +
                       identity.name + "' (--name to choose one)");
  spec.name = identity.name;

  JobPaths paths = job_paths(options.jobs_root, spec.name);
  fs::create_directories(paths.logs(), ec);
  if (ec) return make_error(ErrorCode::io_error, "creating the job directory " + paths.dir.string() + ": " + ec.message());
  fs::create_directories(paths.snapshots(), ec);

  auto lock = platform::FileLock::try_lock(paths.lock());
  if (!lock) {
    if (lock.error().code == ErrorCode::unavailable)
      return make_error(ErrorCode::unavailable, "job '" + spec.name + "' is already supervised by another gpuhost run (" +
                                                    paths.lock().string() + " is locked)");
    return std::unexpected(lock.error());
  }
  auto journal = GPUHOST_TRY(Journal::open(paths.journal()));
  auto spec_written = platform::write_file_atomic(paths.spec(), job_spec_to_json(spec));
  if (!spec_written) return std::unexpected(with_context(spec_written.error(), "saving the job spec"));

  Supervisor supervisor(options, spec, paths, std::move(journal));
  return supervisor.run();
}

}  // namespace gpuhost::supervise
