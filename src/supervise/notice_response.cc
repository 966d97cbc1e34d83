#include "supervise/notice_response.h"

#include <utility>

#include "platform/files.h"

namespace gpuhost::supervise {

namespace {

using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

std::int64_t to_ms(SteadyClock::duration d) { return duration_cast<milliseconds>(d).count(); }

json::Value string_array(const std::vector<std::string>& items) {
  json::Value array = json::Value::array();
  for (const auto& item : items) array.push_back(item);
  return array;
}

void merge(StopActions& into, const StopActions& more) {
  into.request_save |= more.request_save;
  into.send_stop |= more.send_stop;
  into.kill |= more.kill;
  into.save_completed |= more.save_completed;
  into.save_timed_out |= more.save_timed_out;
  into.resume_training |= more.resume_training;
}

}  // namespace

NoticeResponse::NoticeResponse(Context context)
    : m_context(std::move(context)), m_stop(StopTiming{m_context.spec.safety_margin, m_context.spec.stop_grace}) {}

void NoticeResponse::begin_attempt(SystemClock::time_point started) {
  m_notice.reset();
  m_stop.reset();
  m_pending = {};
  m_saved_id.clear();
  m_checkpoint_writes.assign(1, started);
  m_last_commit.reset();
}

void NoticeResponse::tick(platform::ChildProcess& child) { apply(child, m_stop.tick(SteadyClock::now())); }

void NoticeResponse::committed(const job::CommittedCheckpoint& checkpoint, SystemClock::time_point written) {
  if (!m_checkpoint_writes.empty() && written >= m_checkpoint_writes.front()) {
    m_checkpoint_writes.push_back(written);
    m_last_commit.emplace(checkpoint, written);
  }
  recognise_save(checkpoint, written);
}

void NoticeResponse::recognise_save(const job::CommittedCheckpoint& checkpoint,
                                    SystemClock::time_point written) {
  const auto received = m_stop.received();
  StopActions actions = m_stop.checkpoint_committed(written, SteadyClock::now());
  if (actions.save_completed) {
    m_saved_id = checkpoint.id;
    json::Value done = json::Value::object();
    done["id"] = checkpoint.id;
    done["duration_ms"] = received ? to_ms(SteadyClock::now() - *received) : 0;
    done["written"] = job::journal_time(written);
    m_context.recorder.record("save_completed", std::move(done));
    // With a mirror, the cloud is told to go ahead only once the upload is durable (or the
    // deadline came): Azure evicts right after the acknowledgement.
    if (m_context.acknowledge_after_upload) {
      m_ack_pending = true;
    } else {
      acknowledge();
    }
  }
  merge(m_pending, actions);
}

void NoticeResponse::acknowledge() {
  m_ack_pending = false;
  if (!m_notice || !m_context.acknowledge || m_notice->event_id.empty()) return;
  auto acknowledged = m_context.acknowledge(*m_notice);
  json::Value ack = json::Value::object();
  ack["source"] = notice_source_name(m_notice->source);
  ack["event_id"] = m_notice->event_id;
  if (acknowledged) {
    m_context.recorder.record("notice_acknowledged", std::move(ack));
  } else {
    m_context.recorder.message("could not acknowledge the notice: " + acknowledged.error().message);
  }
}

std::optional<std::int64_t> NoticeResponse::newest_reported_step() const {
  std::optional<std::int64_t> step = m_context.newest_step ? m_context.newest_step() : std::nullopt;
  if (!step) step = m_context.recorder.state().last_step;
  return step;
}

std::optional<std::int64_t> NoticeResponse::newest_checkpoint_step() const {
  auto live = job::resume_candidates(m_context.recorder.state());
  for (const job::CommittedCheckpoint* c : live)
    if (c->step) return c->step;
  return std::nullopt;
}

// The save request goes to the processes that can take it: on Linux those whose SigCgt has the
// save signal (a launcher such as torchrun's agent, or a trainer with no handler, would die of
// it), on Windows the whole group only when the job declared a handler. When nothing can take
// it, nothing is sent: the trainer's next periodic checkpoint is the save, and the journal says
// when it is expected from the rhythm seen so far.
void NoticeResponse::request_save(platform::ChildProcess& child, const Result<std::vector<platform::TreeMember>>& members) {
  json::Value fields = json::Value::object();
  const bool by_file = m_context.spec.save_request == JobSpec::SaveRequest::file || m_context.spec.save_request == JobSpec::SaveRequest::both;
  const bool by_signal =
      m_context.spec.save_request == JobSpec::SaveRequest::signal || m_context.spec.save_request == JobSpec::SaveRequest::both;
  if (by_file) {
    json::Value request = json::Value::object();
    request["source"] = notice_source_name(m_notice->source);
    request["deadline"] = job::journal_time(m_notice->deadline);
    auto written = platform::write_file_atomic(m_context.paths.save_request(), json::dump(request) + "\n");
    if (!written) m_context.recorder.message("could not write the save request file: " + written.error().message);
  }
  fields["method"] = by_file && by_signal ? "both" : by_file ? "file" : "signal";
  int signalled = 0;
  if (by_signal) {
    const char* name = platform::child_signal_name(m_context.spec.save_signal);
    fields["signal"] = name;
    SaveTargets targets = choose_save_targets(members ? *members : std::vector<platform::TreeMember>{},
                                              m_context.spec.save_signal_declared);
    if (targets.unknown) {
      // Windows: a console event goes to the whole group.
      if (!targets.pids.empty()) {
        auto sent = child.send(m_context.spec.save_signal);
        if (sent) signalled = static_cast<int>(members->size());
        else m_context.recorder.message(std::string("could not send ") + name + ": " + sent.error().message);
      } else {
        fields["undeclared"] = true;
      }
    } else {
      for (long pid : targets.pids) {
        auto sent = child.send_to(pid, m_context.spec.save_signal);
        if (sent) ++signalled;
        else m_context.recorder.message(std::string("could not send ") + name + ": " + sent.error().message);
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
    const auto save_deadline_wall = m_notice->deadline - m_context.spec.safety_margin;
    if (cadence) {
      auto expected = m_checkpoint_writes.back() + *cadence;
      if (expected < now_wall) expected = now_wall;
      if (expected <= save_deadline_wall) fields["expected_in_ms"] = duration_cast<milliseconds>(expected - now_wall).count();
    }
  }
  m_context.recorder.record("save_requested", std::move(fields));
}

void NoticeResponse::apply(platform::ChildProcess& child, StopActions actions) {
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
    m_context.recorder.record("save_timed_out", std::move(fields));
  }
  if (actions.resume_training) m_notice.reset();  // advisory handled: training goes on
  if (actions.send_stop) {
    auto sent = child.send(m_context.spec.stop_signal);
    if (!sent) {
      m_context.recorder.message(std::string("could not send ") + platform::child_signal_name(m_context.spec.stop_signal) + ": " +
              sent.error().message + "; killing the trainer");
      actions.kill = true;
    }
  }
  if (actions.kill) child.kill_tree();
}

void NoticeResponse::notice(platform::ChildProcess& child, const PreemptionNotice& notice, StopCause reason) {
  if (notice.event_id == "\x01trouble") {
    json::Value fields = json::Value::object();
    fields["source"] = notice_source_name(notice.source);
    fields["message"] = notice.detail;
    m_context.recorder.record("watcher_trouble", std::move(fields));
    return;
  }
  json::Value fields = json::Value::object();
  fields["source"] = notice_source_name(notice.source);
  fields["kind"] = reason == StopCause::user_stop       ? "stop"
                   : notice.kind == NoticeKind::advisory ? "advisory"
                                                         : "preemption";
  fields["deadline"] = job::journal_time(notice.deadline);
  fields["detail"] = notice.detail;
  fields["event_id"] = notice.event_id;
  m_context.recorder.record("notice", std::move(fields));

  const auto now = SteadyClock::now();
  // A peer's notice counts from when its node saw it (never from the future: clocks differ).
  const auto now_wall = notice.noticed ? std::min(SystemClock::now(), *notice.noticed) : SystemClock::now();
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
  // The tree as it is now: who can take the save signal, and whether a launcher such as torchrun
  // needs its own shutdown time before the kill.
  auto members = child.members(m_context.spec.save_signal);
  if (!members) m_context.recorder.message(std::string("could not list the trainer's processes: ") + members.error().message);
  const SaveTargets tree = choose_save_targets(members ? *members : std::vector<platform::TreeMember>{}, false);
  m_stop.set_launcher(tree.launcher);
  StopActions actions = m_stop.notice(input, m_context.spec.save_request != JobSpec::SaveRequest::none);
  if (actions.kill && reason == StopCause::user_stop) m_context.recorder.message("second interrupt: killing the trainer now");
  // A checkpoint this attempt already committed that was written after the notice was first
  // seen (the ranks saved for another node's notice before it reached this one) is the save.
  if (m_last_commit && m_stop.phase() == StopController::Phase::saving) {
    const job::CommittedCheckpoint checkpoint = m_last_commit->first;
    recognise_save(checkpoint, m_last_commit->second);
    merge(actions, m_pending);
    m_pending = {};
    if (m_stop.phase() != StopController::Phase::saving) actions.request_save = false;
  }
  if (actions.request_save) request_save(child, members);
  apply(child, actions);
}

std::string NoticeResponse::stop_report() const {
  auto step_text = [](const job::CommittedCheckpoint& c) {
    return c.step ? c.id + " (step " + std::to_string(*c.step) + ")" : c.id;
  };
  auto live = job::resume_candidates(m_context.recorder.state());
  if (!m_saved_id.empty()) {
    for (const job::CommittedCheckpoint* c : live)
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

}  // namespace gpuhost::supervise
