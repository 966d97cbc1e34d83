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
#include "platform/files.h"
#include "platform/process.h"
#include "platform/system_info.h"
#include "platform/termination.h"
#include "crypt/cipher_suite.h"
#include "supervise/checkpoint_ledger.h"
#include "supervise/job_mirror.h"
#include "supervise/job_recorder.h"
#include "supervise/output_log.h"
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

std::int64_t to_ms(SteadyClock::duration d) { return duration_cast<milliseconds>(d).count(); }

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

// Which metadata service to watch: the spec's cloud, or the one this host's DMI data names.
std::optional<NoticeSource> watched_cloud(const JobSpec& spec, std::string& detected_evidence) {
  std::string cloud = spec.cloud;
  if (cloud == "none") return std::nullopt;
  if (cloud == "auto") {
    platform::CloudDetection detection = platform::collect_system_info().cloud;
    detected_evidence = detection.evidence;
    cloud = platform::cloud_vendor_id(detection.cloud);
  }
  static constexpr std::pair<std::string_view, NoticeSource> k_sources[] = {
      {"aws", NoticeSource::aws},         {"azure", NoticeSource::azure},     {"gcp", NoticeSource::gcp},
      {"alibaba", NoticeSource::alibaba}, {"tencent", NoticeSource::tencent}, {"volcengine", NoticeSource::volcengine},
  };
  for (const auto& [id, source] : k_sources)
    if (cloud == id) return source;
  return std::nullopt;  // none detected, or a cloud without an in-guest notice (Huawei)
}

// Notices arrive on watcher threads; the supervisor loop takes them.
class NoticeInbox {
 public:
  void push(PreemptionNotice notice) {
    std::lock_guard lock(m_mutex);
    m_notices.push_back(std::move(notice));
  }
  std::optional<PreemptionNotice> pop() {
    std::lock_guard lock(m_mutex);
    if (m_notices.empty()) return std::nullopt;
    PreemptionNotice notice = std::move(m_notices.front());
    m_notices.pop_front();
    return notice;
  }

 private:
  std::mutex m_mutex;
  std::deque<PreemptionNotice> m_notices;  // guarded by m_mutex
};

using StopReason = StopCause;

void merge(StopActions& into, const StopActions& more) {
  into.request_save |= more.request_save;
  into.send_stop |= more.send_stop;
  into.kill |= more.kill;
  into.save_completed |= more.save_completed;
  into.save_timed_out |= more.save_timed_out;
  into.resume_training |= more.resume_training;
}

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
                                           on_committed(c, written);
                                         },
                                         [this](const CommittedCheckpoint& c) {
                                           if (m_mirror) m_mirror->retired(c);
                                         }}),
        m_stdout_log(m_paths.logs() / "stdout.log"), m_stderr_log(m_paths.logs() / "stderr.log"),
        m_stop(StopTiming{m_spec.safety_margin, m_spec.stop_grace}) {}

  Result<SupervisorResult> run();

 private:
  bool record(std::string_view type, json::Value fields) { return m_recorder.record(type, std::move(fields)); }
  void message(std::string_view text) const { m_recorder.message(text); }
  const JobState& state() const { return m_recorder.state(); }

  void start_watcher();
  void start_training_metrics();
  void record_progress(bool now = false);
  void scan_checkpoints(bool settled) { m_ledger.scan(settled); }
  // A checkpoint was committed: the mirror uploads it, the stop controller judges whether it is
  // the save a notice asked for.
  void on_committed(const CommittedCheckpoint& checkpoint, SystemClock::time_point written);
  Result<platform::ChildProcess> launch(const ResumePoint& resume);

  // One life of the child; returns how it ended.
  struct AttemptEnd {
    Attempt attempt;
    StopReason stop = StopReason::none;
    bool drill_kill = false;
    platform::ChildExit exit;
  };
  Result<AttemptEnd> supervise_child(platform::ChildProcess& child, const ResumePoint& resume);

  void handle_notice(platform::ChildProcess& child, const PreemptionNotice& notice,
                     StopReason reason = StopReason::preemption);
  void request_save(platform::ChildProcess& child);
  // Carries out what the stop controller decided (and what commits decided meanwhile).
  void apply(platform::ChildProcess& child, StopActions actions);
  // The newest step the trainer reported and the newest committed checkpoint's step.
  std::optional<std::int64_t> newest_reported_step() const;
  std::optional<std::int64_t> newest_checkpoint_step() const;
  void acknowledge_notice();
  void check_disk_after_failure();
  std::optional<StopReason> wait_between_attempts(milliseconds delay);
  // After a stop: which checkpoint was saved, or what is lost and where a rerun resumes.
  std::string stop_report() const;
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
  std::optional<SteadyClock::time_point> m_first_start;
  std::vector<bool> m_drills_done;
  std::chrono::microseconds m_child_cpu{0};
  std::uint64_t m_child_peak_rss = 0;
  std::unique_ptr<TrainingMetricsRecorder> m_metrics;  // null with training_metrics off
  std::unique_ptr<JobMirror> m_mirror;                 // null without a remote
  std::filesystem::path m_metrics_channel;
  SteadyClock::time_point m_next_progress{};
  std::optional<std::int64_t> m_last_progress_step;

  // The stop logic (stop_controller.h) and the notice it acts on in this attempt (for the
  // acknowledgement and the mirror's deadline, also after the trainer has exited).
  StopController m_stop;
  std::optional<PreemptionNotice> m_notice;
  bool m_ack_pending = false;  // with a mirror, the acknowledgement waits for the upload
  StopActions m_pending;       // decided by a commit inside a scan, carried out by the loop
  std::string m_saved_id;      // the checkpoint saved for this attempt's notice, if one was
  // When this attempt started and when each checkpoint it committed was written: the trainer's
  // rhythm (the start stands in for a first save, so one checkpoint already gives an estimate,
  // a cautious one: it includes the start-up).
  std::vector<SystemClock::time_point> m_checkpoint_writes;
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
  std::optional<NoticeSource> cloud = watched_cloud(m_spec, evidence);
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

void Supervisor::on_committed(const CommittedCheckpoint& checkpoint, SystemClock::time_point written) {
  if (m_mirror) m_mirror->committed(checkpoint);
  if (!m_checkpoint_writes.empty() && written >= m_checkpoint_writes.front()) m_checkpoint_writes.push_back(written);
  const auto received = m_stop.received();
  StopActions actions = m_stop.checkpoint_committed(written, SteadyClock::now());
  if (actions.save_completed) {
    m_saved_id = checkpoint.id;
    json::Value done = json::Value::object();
    done["id"] = checkpoint.id;
    done["duration_ms"] = received ? to_ms(SteadyClock::now() - *received) : 0;
    done["written"] = journal_time(written);
    record("save_completed", std::move(done));
    // With a mirror, the cloud is told to go ahead only once the upload is durable (or the
    // deadline came): Azure evicts right after the acknowledgement.
    if (m_mirror) {
      m_ack_pending = true;
    } else {
      acknowledge_notice();
    }
  }
  merge(m_pending, actions);
}

void Supervisor::acknowledge_notice() {
  m_ack_pending = false;
  if (!m_notice || !m_watcher || m_notice->event_id.empty()) return;
  auto acknowledged = m_watcher->acknowledge(*m_notice);
  json::Value ack = json::Value::object();
  ack["source"] = notice_source_name(m_notice->source);
  ack["event_id"] = m_notice->event_id;
  if (acknowledged) {
    record("notice_acknowledged", std::move(ack));
  } else {
    message("could not acknowledge the notice: " + acknowledged.error().message);
  }
}

Result<platform::ChildProcess> Supervisor::launch(const ResumePoint& resume) {
  TrainerLaunchInputs inputs;
  m_run_token = random_hex(16);
  inputs.run_token = m_run_token;
  inputs.attempt = state().child_starts + 1;
  inputs.resume = resume;
  inputs.metrics_channel = m_metrics_channel;
  inputs.inherited_pythonunbuffered = platform::get_env("PYTHONUNBUFFERED").has_value();
  inputs.inherited_metrics_file = platform::get_env("GPUHOST_METRICS_FILE").has_value();
  platform::ChildOptions child = GPUHOST_TRY(trainer_launch(m_spec, m_paths, inputs));
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
  m_checkpoint_writes.assign(1, SystemClock::now());
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

std::optional<std::int64_t> Supervisor::newest_reported_step() const {
  std::optional<std::int64_t> step = m_metrics ? m_metrics->newest_step() : std::nullopt;
  if (!step) step = state().last_step;
  return step;
}

std::optional<std::int64_t> Supervisor::newest_checkpoint_step() const {
  auto live = resume_candidates(state());
  for (const CommittedCheckpoint* c : live)
    if (c->step) return c->step;
  return std::nullopt;
}

// The save request goes to the processes that can take it: on Linux those whose SigCgt has the
// save signal (a launcher such as torchrun's agent, or a trainer with no handler, would die of
// it), on Windows the whole group only when the job declared a handler. When nothing can take
// it, nothing is sent: the trainer's next periodic checkpoint is the save, and the journal says
// when it is expected from the rhythm seen so far.
void Supervisor::request_save(platform::ChildProcess& child) {
  json::Value fields = json::Value::object();
  const bool by_file = m_spec.save_request == JobSpec::SaveRequest::file || m_spec.save_request == JobSpec::SaveRequest::both;
  const bool by_signal =
      m_spec.save_request == JobSpec::SaveRequest::signal || m_spec.save_request == JobSpec::SaveRequest::both;
  if (by_file) {
    json::Value request = json::Value::object();
    request["source"] = notice_source_name(m_notice->source);
    request["deadline"] = journal_time(m_notice->deadline);
    auto written = platform::write_file_atomic(m_paths.save_request(), json::dump(request) + "\n");
    if (!written) message("could not write the save request file: " + written.error().message);
  }
  fields["method"] = by_file && by_signal ? "both" : by_file ? "file" : "signal";
  int signalled = 0;
  if (by_signal) {
    const char* name = platform::child_signal_name(m_spec.save_signal);
    fields["signal"] = name;
    auto members = child.members(m_spec.save_signal);
    if (!members) message(std::string("could not list the trainer's processes: ") + members.error().message);
    SaveTargets targets = choose_save_targets(members ? *members : std::vector<platform::TreeMember>{},
                                              m_spec.save_signal_declared);
    if (targets.unknown) {
      // Windows: a console event goes to the whole group.
      if (!targets.pids.empty()) {
        auto sent = child.send(m_spec.save_signal);
        if (sent) signalled = static_cast<int>(members->size());
        else message(std::string("could not send ") + name + ": " + sent.error().message);
      } else {
        fields["undeclared"] = true;
      }
    } else {
      for (long pid : targets.pids) {
        auto sent = child.send_to(pid, m_spec.save_signal);
        if (sent) ++signalled;
        else message(std::string("could not send ") + name + ": " + sent.error().message);
      }
    }
    fields["signalled"] = signalled;
    fields["spared"] = string_array(targets.spared);
    if (targets.launcher != Launcher::none) fields["launcher"] = launcher_name(targets.launcher);
  }
  if (signalled == 0 && !by_file) {
    // Nothing was asked: the next periodic checkpoint is the save.
    fields["waiting"] = "periodic";
    auto cadence = checkpoint_cadence(m_checkpoint_writes);
    if (cadence) fields["cadence_ms"] = cadence->count();
    const auto now_wall = SystemClock::now();
    const auto save_deadline_wall = m_notice->deadline - m_spec.safety_margin;
    if (cadence) {
      auto expected = m_checkpoint_writes.back() + *cadence;
      if (expected < now_wall) expected = now_wall;
      if (expected <= save_deadline_wall) fields["expected_in_ms"] = duration_cast<milliseconds>(expected - now_wall).count();
    }
  }
  record("save_requested", std::move(fields));
}

void Supervisor::apply(platform::ChildProcess& child, StopActions actions) {
  merge(actions, m_pending);
  m_pending = {};
  if (actions.save_timed_out) {
    json::Value fields = json::Value::object();
    const auto received = m_stop.received();
    fields["waited_ms"] = received ? to_ms(SteadyClock::now() - *received) : 0;
    auto last = newest_reported_step();
    auto kept = newest_checkpoint_step();
    fields["last_step"] = last ? json::Value(*last) : json::Value();
    fields["checkpoint_step"] = kept ? json::Value(*kept) : json::Value();
    fields["lost_steps"] = last ? json::Value(*last - kept.value_or(0)) : json::Value();
    record("save_timed_out", std::move(fields));
  }
  if (actions.resume_training) m_notice.reset();  // advisory handled: training goes on
  if (actions.send_stop) {
    auto sent = child.send(m_spec.stop_signal);
    if (!sent) {
      message(std::string("could not send ") + platform::child_signal_name(m_spec.stop_signal) + ": " +
              sent.error().message + "; killing the trainer");
      actions.kill = true;
    }
  }
  if (actions.kill) child.kill_tree();
}

void Supervisor::handle_notice(platform::ChildProcess& child, const PreemptionNotice& notice, StopReason reason) {
  if (notice.event_id == "\x01trouble") {
    json::Value fields = json::Value::object();
    fields["source"] = notice_source_name(notice.source);
    fields["message"] = notice.detail;
    record("watcher_trouble", std::move(fields));
    return;
  }
  json::Value fields = json::Value::object();
  fields["source"] = notice_source_name(notice.source);
  fields["kind"] = reason == StopReason::user_stop       ? "stop"
                   : notice.kind == NoticeKind::advisory ? "advisory"
                                                         : "preemption";
  fields["deadline"] = journal_time(notice.deadline);
  fields["detail"] = notice.detail;
  fields["event_id"] = notice.event_id;
  record("notice", std::move(fields));

  const auto now = SteadyClock::now();
  const auto now_wall = SystemClock::now();
  StopController::Notice input;
  input.cause = reason;
  input.advisory = notice.kind == NoticeKind::advisory;
  input.now = now;
  input.now_wall = now_wall;
  input.deadline = now + duration_cast<SteadyClock::duration>(notice.deadline - now_wall);
  // The first notice is the one acknowledged, unless a later one carries the event to answer.
  if (!m_notice || (m_notice->event_id.empty() && !notice.event_id.empty()) ||
      (m_notice->kind == NoticeKind::advisory && notice.kind == NoticeKind::preemption))
    m_notice = notice;
  StopActions actions = m_stop.notice(input, m_spec.save_request != JobSpec::SaveRequest::none);
  if (actions.kill && reason == StopReason::user_stop) message("second interrupt: killing the trainer now");
  if (actions.request_save) request_save(child);
  apply(child, actions);
}

Result<Supervisor::AttemptEnd> Supervisor::supervise_child(platform::ChildProcess& child, const ResumePoint& resume) {
  AttemptEnd end;
  end.attempt.resumed_from = resume.id;
  const auto started = SteadyClock::now();
  auto next_scan = started;
  bool drill_kill = false;
  m_notice.reset();
  m_stop.reset();
  m_pending = {};
  m_saved_id.clear();

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
      handle_notice(child, notice,
                    *request == platform::TerminationRequest::interrupt ? StopReason::user_stop : StopReason::preemption);
    }

    while (auto notice = m_inbox.pop()) handle_notice(child, *notice);
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
        handle_notice(child, notice);
      }
    }

    if (now >= next_scan) {
      scan_checkpoints(false);
      next_scan = now + m_options.scan_interval;
    }

    apply(child, m_stop.tick(SteadyClock::now()));
  }

  end.attempt.ran_for = duration_cast<milliseconds>(SteadyClock::now() - started);
  // The child's group died with it (platform/child_process.h); what left the group (setsid,
  // a daemonised helper) still carries the attempt's token. Nothing of this attempt may run
  // beside the next one.
  if (int stragglers = platform::kill_processes_with_environment(k_run_token_variable, m_run_token); stragglers > 0) {
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
  end.stop = m_stop.outcome();
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

std::string Supervisor::stop_report() const {
  auto step_text = [](const CommittedCheckpoint& c) {
    return c.step ? c.id + " (step " + std::to_string(*c.step) + ")" : c.id;
  };
  auto live = resume_candidates(state());
  if (!m_saved_id.empty()) {
    for (const CommittedCheckpoint* c : live)
      if (c->id == m_saved_id) return "after saving " + step_text(*c) + "; run the same command again to resume from it";
  }
  const auto last = newest_reported_step();
  if (live.empty()) {
    std::string text = "before any checkpoint";
    if (last && *last > 0) text += ": steps 1-" + std::to_string(*last) + " are lost";
    return text + "; run the same command again to start over";
  }
  std::string text = "without a new checkpoint: the next run resumes from " + step_text(*live.front());
  const auto kept = live.front()->step;
  if (last && kept && *last > *kept) text += ", steps " + std::to_string(*kept + 1) + "-" + std::to_string(*last) + " are lost";
  return text + "; run the same command again to resume";
}

SupervisorResult Supervisor::finish(Outcome outcome, std::string reason) {
  if (m_mirror) {
    if (outcome == Outcome::preempted) {
      if (m_notice) m_mirror->wait_for_newest(m_notice->deadline);
      if (m_ack_pending) acknowledge_notice();
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
  int leftovers = 0;
  if (!state().run_token.empty()) leftovers = platform::kill_processes_with_environment(k_run_token_variable, state().run_token);

  std::string evidence;
  json::Value started = json::Value::object();
  started["pid"] = platform::current_process_id();
  auto cloud = watched_cloud(m_spec, evidence);
  started["cloud"] = cloud ? notice_source_name(*cloud) : "none";
  started["after_crash"] = after_crash;
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
      return finish(Outcome::preempted, "stopped for a preemption notice " + stop_report());
    if (end->stop == StopReason::user_stop) return finish(Outcome::stopped, "stopped on request " + stop_report());
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

Result<Drill> parse_drill(std::string_view text) {
  auto usage = [&] {
    return make_error(ErrorCode::invalid_argument,
                      "bad drill '" + std::string(text) + "': use preempt@SECONDS[/DEADLINE_SECONDS] or kill@SECONDS");
  };
  auto at = text.find('@');
  if (at == std::string_view::npos) return usage();
  Drill drill;
  std::string_view action = text.substr(0, at);
  if (action == "preempt") {
    drill.action = Drill::Action::preempt;
  } else if (action == "kill") {
    drill.action = Drill::Action::kill;
  } else {
    return usage();
  }
  std::string_view rest = text.substr(at + 1);
  std::string_view lead;
  if (auto slash = rest.find('/'); slash != std::string_view::npos) {
    if (drill.action != Drill::Action::preempt) return usage();
    lead = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  auto seconds = parse_double(rest);
  if (!seconds || *seconds < 0 || !std::isfinite(*seconds)) return usage();
  drill.at = milliseconds(static_cast<std::int64_t>(std::llround(*seconds * 1000)));
  if (!lead.empty()) {
    auto lead_seconds = parse_double(lead);
    if (!lead_seconds || *lead_seconds < 1 || !std::isfinite(*lead_seconds)) return usage();
    drill.lead = std::chrono::seconds(static_cast<std::int64_t>(std::llround(*lead_seconds)));
  }
  return drill;
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
