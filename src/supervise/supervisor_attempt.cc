// One attempt of the trainer under the supervisor (supervisor_loop.h): its launch, the loop turn
// (exit, termination requests, notices, peers, drills, scans) and how it ended.
#include "supervise/supervisor_loop.h"

#include <algorithm>
#include <cstdio>
#include <system_error>
#include <utility>

#include "base/strings.h"
#include "platform/environment.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/system_info.h"
#include "platform/termination.h"
#include "supervise/trainer_launch.h"

namespace gpuhost::supervise::detail {

namespace fs = std::filesystem;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

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
  std::optional<std::string> own_channel = spec_environment_value(m_spec, "GPUHOST_METRICS_FILE");
  if (!own_channel) own_channel = platform::get_env("GPUHOST_METRICS_FILE");
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
                                job::journal_time(SystemClock::now()) +
                                (resume.id ? ", resuming from " + *resume.id : std::string(", fresh start")) +
                                " ====\n";
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
  advisor_attempt_started(child.pid());

  for (;;) {
    auto exited = child.wait_for(milliseconds(100));
    if (!exited) return std::unexpected(exited.error());
    if (*exited) {
      end.exit = **exited;
      advisor_attempt_ended();
      break;
    }
    const auto now = SteadyClock::now();

    while (auto request = platform::wait_termination_request(milliseconds(0))) {
      PreemptionNotice notice;
      notice.source = NoticeSource::signal;
      notice.detail = platform::termination_request_name(*request);
      notice.deadline = SystemClock::now() + m_options.signal_deadline;
      // SIGTERM may be the preemption itself (a drained spot node): the cloud's own notice, if
      // there is one, brings the real deadline now rather than at the next poll.
      if (m_watcher && *request != platform::TerminationRequest::interrupt) m_watcher->poll_now();
      local_notice(child, notice,
                   *request == platform::TerminationRequest::interrupt ? StopReason::user_stop : StopReason::preemption);
    }

    while (auto notice = m_inbox.pop()) local_notice(child, *notice, StopReason::preemption);
    pump_peers(child);
    record_progress();
    record_advice();
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
        local_notice(child, notice, StopReason::preemption);
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

void Supervisor::local_notice(platform::ChildProcess& child, const PreemptionNotice& notice, StopReason cause) {
  // Watcher trouble travels as a pseudo-notice (start_watcher): it stays on this node.
  if (m_peers && notice.event_id != "\x01trouble") m_peers->local_notice(notice);
  m_response.notice(child, notice, cause);
}

// Peers' notices are acted on as this node's own (the earliest deadline wins: a later notice only
// brings it forward). A peer lost while no notice is under way breaks the gang: this node's ranks
// wait in a collective that cannot complete (for minutes in NCCL or torchrun's barrier), so the
// trainer is stopped now, killed after a short grace, and the run ends resumable.
void Supervisor::pump_peers(platform::ChildProcess& child) {
  if (!m_peers) return;
  JobPeers::Turn turn = m_peers->pump();
  for (const PreemptionNotice& notice : turn.notices) m_response.notice(child, notice, StopReason::preemption);
  const auto now = SteadyClock::now();
  if (turn.broken && !m_peer_break && m_response.outcome() == StopReason::none) {
    m_peer_break = turn.broken;
    message("stopping the trainer: " + *turn.broken);
    (void)child.send(platform::ChildSignal::terminate);
    m_peer_kill_at = now + std::chrono::seconds(5);
  }
  if (m_peer_kill_at && now >= *m_peer_kill_at) {
    m_peer_kill_at.reset();
    child.kill_tree();
  }
}

// A multi-node job: the channel to the other nodes, and the step every node resumes from (the

}  // namespace gpuhost::supervise::detail
