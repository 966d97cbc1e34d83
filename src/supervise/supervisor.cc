#include "supervise/supervisor.h"

#include <algorithm>
#include <cstdio>
#include <system_error>
#include <utility>

#include "base/strings.h"
#include "platform/environment.h"
#include "platform/file_lock.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/system_info.h"
#include "platform/termination.h"
#include "supervise/remote_probe.h"
#include "supervise/supervisor_loop.h"
#include "supervise/trainer_launch.h"

namespace gpuhost::supervise {
namespace detail {

namespace fs = std::filesystem;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// A disk with less than this free (or less than the newest checkpoint's size) is reported when
// the trainer fails: the usual cause of a crash in the middle of a save.
constexpr std::uint64_t k_low_disk_bytes = 256ull << 20;

// A save that took longer than a signal leaves (less the safety margin) will not land in time
// when the engine's SIGTERM comes: said at the start, while it can still be changed.
void Supervisor::check_signal_deadline() {
  if (!state().last_save_ms) return;
  const milliseconds save(*state().last_save_ms);
  const milliseconds budget = m_options.signal_deadline - m_spec.safety_margin;
  if (save <= budget) return;
  json::Value fields = json::Value::object();
  fields["signal_deadline_ms"] = static_cast<std::int64_t>(m_options.signal_deadline.count());
  fields["safety_margin_ms"] = static_cast<std::int64_t>(m_spec.safety_margin.count());
  fields["last_save_ms"] = static_cast<std::int64_t>(save.count());
  record("grace_too_short", std::move(fields));
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
      fields["deadline"] = job::journal_time(notice->deadline);
      fields["detail"] = notice->detail;
      fields["event_id"] = notice->event_id;
      record("notice", std::move(fields));
      return StopReason::preemption;
    }
  }
}

// Slurm ends a job whose steps exit by themselves after a preemption signal as COMPLETED, never
// requeued (research/06 §4.2 ★): node 0 asks for the requeue itself, once its checkpoint is in
// and the other nodes have ended (a requeue kills what still runs of the job),
// as Lightning's SLURMEnvironment(auto_requeue=True) does. The batch script then starts again
// from its beginning with SLURM_RESTART_COUNT one higher (sbatch --requeue; a job submitted with
// --no-requeue is refused, and the refusal is journalled).
void Supervisor::request_engine_requeue() {
  const Topology& t = m_options.topology;
  if (t.engine != "slurm" || t.job_key.empty()) return;
  if (t.multi_node() && t.node_rank.value_or(-1) != 0) return;
  platform::ProcessOptions options;
  options.argv = {"scontrol", "requeue", t.job_key};
  options.timeout = std::chrono::seconds(30);
  auto ran = platform::run_process(options);
  json::Value fields = json::Value::object();
  fields["command"] = string_array(options.argv);
  std::string said;
  if (!ran) {
    said = ran.error().message;
  } else {
    said = std::string(trim(ran->stderr_text + ran->stdout_text));
    fields["exit_code"] = ran->exit_code;
  }
  const bool requeued = ran && ran->succeeded();
  fields["requeued"] = requeued;
  fields["output"] = said;
  record("engine_requeue", std::move(fields));
  message(requeued ? "Slurm job " + t.job_key + " requeued (scontrol requeue): it resumes when Slurm starts it again"
                   : "Slurm job " + t.job_key + " NOT requeued: scontrol requeue said: " + (said.empty() ? "nothing" : said) +
                         " (submit with sbatch --requeue)");
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
  const bool requeue = outcome == Outcome::preempted || outcome == Outcome::peer_lost;
  if (m_peers && requeue) m_peers->wait_for_peers_to_end(std::chrono::seconds(30));
  platform::ResourceUsage self = platform::self_resource_usage();
  json::Value fields = json::Value::object();
  fields["outcome"] = outcome_name(outcome);
  fields["reason"] = reason;
  fields["supervisor_cpu_ms"] = self.cpu_time.count() / 1000;
  fields["supervisor_peak_rss_bytes"] = self.peak_rss_bytes;
  fields["child_cpu_ms"] = m_child_cpu.count() / 1000;
  fields["child_peak_rss_bytes"] = m_child_peak_rss;
  // Lost output lines never stop training, but are said (a full disk, a folder gone).
  const std::uint64_t lost_writes = m_stdout_log.failed_writes() + m_stderr_log.failed_writes();
  fields["log_writes_failed"] = lost_writes;
  if (lost_writes > 0)
    message(std::to_string(lost_writes) + " writes of the trainer's output to " + m_paths.logs().string() +
            " failed (a full disk?): those lines are not in the logs");
  record("supervisor_stopped", std::move(fields));
  // The peers learn of the end once it is journalled: node 0 may requeue the job when they have.
  if (m_peers) m_peers->end(outcome_name(outcome));
  // Last: a requeue ends this Slurm job (and this process) at once.
  if (requeue) request_engine_requeue();
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
  check_signal_deadline();

  platform::install_termination_handlers();
  platform::become_child_subreaper();
  start_watcher();
  start_training_metrics();
  start_advisor();
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
  ResumePoint first_resume;
  auto joined = join_peers(first_resume);
  if (!joined) return std::unexpected(joined.error());
  if (*joined) return std::move(**joined);

  std::vector<Attempt> history;
  for (bool first = true;; first = false) {
    ResumePoint resume = first ? first_resume : m_ledger.choose_resume_point();
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
    // A trainer whose peer vanished usually fails on its next collective before a heartbeat is
    // missed: the channel gets a moment to say so, and the run ends resumable, not failed.
    if (m_peers && !m_peer_break) m_peer_break = m_peers->wait_for_break(std::chrono::seconds(3));
    if (m_peer_break) return finish(Outcome::peer_lost, "the trainer was stopped: " + *m_peer_break +
                                                            "; run every node again (the engine's restart does) to resume from the newest "
                                                            "step all nodes committed");

    // A peer that finished is not coming back: a restarted torchrun would wait at its rendezvous
    // for ranks that never join. The run ends failed, with the nodes' state as it is.
    if (m_peers) {
      if (auto ended = m_peers->ended_peer()) {
        const std::string reason =
            "the trainer failed after " + *ended +
            ": it is not restarted, since the other nodes' ranks will not join again; run every "
            "node again to resume from the newest step all nodes committed";
        json::Value fields = json::Value::object();
        fields["reason"] = reason;
        record("gave_up", std::move(fields));
        return finish(Outcome::failed, reason);
      }
    }
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


}  // namespace detail

namespace fs = std::filesystem;

const char* outcome_name(Outcome outcome) {
  switch (outcome) {
    case Outcome::finished: return "finished";
    case Outcome::unmirrored: return "unmirrored";
    case Outcome::preempted: return "preempted";
    case Outcome::failed: return "failed";
    case Outcome::stopped: return "stopped";
    case Outcome::peer_lost: return "peer_lost";
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
  // Before the job directory, the lock or the trainer: a suite this build cannot run (sm4-gcm on
  // OpenSSL 3.0, SM4 on a Windows install without libgcrypt-20.dll) or a misspelled one fails
  // here and not after the first checkpoint. Both are the command line's fault: `unsupported`.
  if (!spec.encrypt.empty())
    if (auto suite = job_cipher_suite(spec.encrypt); !suite) return std::unexpected(suite.error());
  JobIdentity identity = GPUHOST_TRY(resolve_job_identity(options.jobs_root, spec, name_given));
  if (!identity.renamed_from.empty() && options.on_message)
    options.on_message("job '" + identity.renamed_from + "' supervises the checkpoints of another folder: this run is job '" +
                       identity.name + "' (--name to choose one)");
  spec.name = identity.name;

  job::JobPaths paths = job::job_paths(options.jobs_root, spec.name);
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
  auto journal = GPUHOST_TRY(job::Journal::open(paths.journal()));
  auto spec_written = platform::write_file_atomic(paths.spec(), job_spec_to_json(spec));
  if (!spec_written) return std::unexpected(with_context(spec_written.error(), "saving the job spec"));

  detail::Supervisor supervisor(options, spec, paths, std::move(journal));
  return supervisor.run();
}

}  // namespace gpuhost::supervise