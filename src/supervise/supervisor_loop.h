#pragma once

// The supervisor's loop as one class, for its two source files: supervisor.cc (the run from
// start to outcome: peers, restarts, the end) and supervisor_attempt.cc (one trainer attempt:
// launch, the loop turn, notices, peers' notices and a broken gang). Internal to supervise/.

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "platform/child_process.h"
#include "platform/job_cgroup.h"
#include "supervise/checkpoint_ledger.h"
#include "supervise/job_advisor.h"
#include "supervise/job_mirror.h"
#include "supervise/job_peers.h"
#include "supervise/job_recorder.h"
#include "supervise/notice_response.h"
#include "supervise/output_log.h"
#include "supervise/stop_controller.h"
#include "supervise/supervisor.h"
#include "supervise/training_metrics.h"

namespace gpuhost::supervise::detail {

using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;
using StopReason = StopCause;
using std::chrono::milliseconds;

[[nodiscard]] std::string seconds_text(std::chrono::milliseconds d);
[[nodiscard]] json::Value string_array(const std::vector<std::string>& items);

// The supervisor's loop: one trainer attempt after another, notices turned into saves and stops
// (stop_controller.h), restarts by the policy. The journal and the state folded from it are the
// recorder's; checkpoints are the ledger's; the remote is the mirror's.
class Supervisor {
 public:
  Supervisor(const SupervisorOptions& options, JobSpec spec, job::JobPaths paths, job::Journal journal)
      : m_options(options),
        m_spec(std::move(spec)),
        m_paths(std::move(paths)),
        m_recorder(std::move(journal), JobRecorder::Callbacks{options.on_record, options.on_message}),
        m_ledger(m_recorder, m_spec, m_paths, options.snapshots,
                 CheckpointLedger::Hooks{
                     [this](const job::CommittedCheckpoint& c, SystemClock::time_point written) {
                       if (m_mirror) m_mirror->committed(c);
                       if (m_peers) m_peers->committed(c.step);
                       m_response.committed(c, written);
                     },
                     [this](const job::CommittedCheckpoint& c) {
                       if (m_mirror) m_mirror->retired(c);
                     }}),
        m_stdout_log(m_paths.logs() / "stdout.log"),
        m_stderr_log(m_paths.logs() / "stderr.log"),
        m_response(NoticeResponse::Context{m_recorder, m_spec, m_paths,
                                           [this](const PreemptionNotice& notice) -> Result<void> {
                                             if (!m_watcher) return {};
                                             return m_watcher->acknowledge(notice);
                                           },
                                           [this]() -> std::optional<std::int64_t> {
                                             return m_metrics ? m_metrics->newest_step() : std::nullopt;
                                           },
                                           !m_spec.remote.empty()}) {}

  Result<SupervisorResult> run();

 private:
  bool record(std::string_view type, json::Value fields) { return m_recorder.record(type, std::move(fields)); }
  void message(std::string_view text) const { m_recorder.message(text); }
  const job::JobState& state() const { return m_recorder.state(); }

  void start_watcher();
  void start_training_metrics();
  void record_progress(bool now = false);
  void start_advisor();
  void advisor_attempt_started(long group);
  void advisor_attempt_ended();
  void record_advice();
  [[nodiscard]] std::optional<std::pair<double, std::string>> computed_mfu(
      std::optional<double> step_seconds) const;
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
  void check_signal_deadline();
  std::optional<StopReason> wait_between_attempts(milliseconds delay);
  // A notice of this node: acted on here, and sent to the other nodes of a multi-node job.
  void local_notice(platform::ChildProcess& child, const PreemptionNotice& notice, StopReason cause);
  void pump_peers(platform::ChildProcess& child);
  // supervisor_join.cc: the peers of a multi-node job, the mirror and the first resume point.
  Result<std::optional<SupervisorResult>> join_peers(ResumePoint& resume);
  JobPeers::Joining joining();
  // Starts the mirror of the copies under `scope` (nothing without a remote); a result ends the run.
  std::optional<SupervisorResult> start_mirror(const std::string& scope);
  [[nodiscard]] bool has_committed_step(std::int64_t step) const;
  SupervisorResult finish(Outcome outcome, std::string reason);
  // Under Slurm, node 0 of a preempted job requeues it (journalled as engine_requeue).
  void request_engine_requeue();

  const SupervisorOptions& m_options;
  JobSpec m_spec;
  job::JobPaths m_paths;
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
  std::unique_ptr<JobPeers> m_peers;                   // null on one node
  // Why the gang of a multi-node job is broken (a peer vanished mid-training), once it is; the
  // trainer is stopped, killed at m_peer_kill_at.
  std::optional<std::string> m_peer_break;
  std::optional<SteadyClock::time_point> m_peer_kill_at;
  std::filesystem::path m_metrics_channel;
  SteadyClock::time_point m_next_progress{};
  std::optional<std::int64_t> m_last_progress_step;
  std::unique_ptr<JobAdvisor> m_advisor;  // null with the advisor off
  // Where the trainer was when the advisor's last window was taken (for the step time), and the
  // last advice journalled (a new record only when it changes).
  struct AdviceMark {
    SteadyClock::time_point at;
    std::optional<std::int64_t> step;
  };
  std::optional<AdviceMark> m_advice_mark;
  std::optional<std::string> m_last_advice_key;
  std::optional<double> m_last_advice_step_seconds;

  // Notices, saves and stops of the current attempt (notice_response.h).
  NoticeResponse m_response;
};


}  // namespace gpuhost::supervise::detail
