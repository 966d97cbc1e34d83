#include "job/job_state.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/strings.h"
#include "base/time_format.h"

namespace gpuhost::job {
namespace {

// "1 s", "12.3 s", "4 min 5 s", "3 h 12 min".
std::string duration_text(std::int64_t ms) {
  if (ms < 0) ms = 0;
  if (ms < 60'000) {
    if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms) / 1000.0);
    return buf;
  }
  std::int64_t s = ms / 1000;
  if (s < 3600) return std::to_string(s / 60) + " min " + std::to_string(s % 60) + " s";
  return std::to_string(s / 3600) + " h " + std::to_string(s % 3600 / 60) + " min";
}

std::optional<std::int64_t> optional_int(const json::Value& fields, std::string_view key) {
  const json::Value* v = fields.find(key);
  if (!v || !v->is_integer()) return std::nullopt;
  return v->as_int();
}

CommittedCheckpoint* find_checkpoint(JobState& state, std::string_view id) {
  for (auto& checkpoint : state.checkpoints)
    if (checkpoint.id == id) return &checkpoint;
  return nullptr;
}

std::string notice_summary(const JournalRecord& record) {
  const json::Value& f = record.fields;
  const std::string kind = f.get_string("kind", "preemption");
  // Ctrl-C is the user's own stop, not a preemption.
  std::string summary = kind == "stop"
                            ? "stop requested (" + f.get_string("detail", "signal") + "): saving first"
                            : "notice from " + f.get_string("source", "?") + ": " + kind;
  auto deadline = parse_journal_time(f.get_string("deadline"));
  if (!deadline) return summary;
  // "HH:MM:SSZ" of the deadline.
  summary += " at " + format_rfc3339_utc(*deadline).substr(11);
  if (auto now = parse_journal_time(record.time)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - *now).count();
    auto secs = static_cast<long long>(std::llround(static_cast<double>(left) / 1000.0));
    summary += secs >= 0 ? " (deadline in " + std::to_string(secs) + " s)"
                         : " (deadline passed " + std::to_string(-secs) + " s before)";
  }
  return summary;
}

// "save requested with SIGUSR1 (2 processes; torchrun (pid 7) left alone: no handler)", or what
// is waited for when nothing could be asked.
std::string save_request_summary(const json::Value& f) {
  const std::string method = f.get_string("method");
  const std::string signal = f.get_string("signal", "a signal");
  std::vector<std::string> spared;
  if (const json::Value* list = f.find("spared"); list && list->is_array())
    for (const auto& item : list->items())
      if (item.is_string()) spared.push_back(item.as_string());
  std::int64_t signalled = f.get_int("signalled", -1);
  std::string summary;
  if (method == "file") {
    summary = "save requested with the request file";
  } else if (signalled == 0 && method == "signal") {
    summary = "no process handles " + signal;
  } else {
    summary = "save requested with " + signal;
    if (method == "both") summary += " and the request file";
    if (signalled > 0)
      summary += " (" + std::to_string(signalled) + (signalled == 1 ? " process" : " processes");
    if (signalled > 0 && !spared.empty()) {
      summary += "; left alone, no handler: ";
      for (std::size_t i = 0; i < spared.size() && i < 3; ++i) summary += (i ? ", " : "") + spared[i];
      if (spared.size() > 3) summary += ", ...";
    }
    if (signalled > 0) summary += ")";
  }
  if (f.get_string("waiting") == "periodic") {
    const std::string every =
        f.get_int("cadence_ms", -1) > 0 ? " (every ~" + duration_text(f.get_int("cadence_ms")) + ")" : "";
    if (auto in = optional_int(f, "expected_in_ms"))
      summary +=
          ": waiting for the next periodic checkpoint" + every + ", expected in ~" + duration_text(*in);
    else
      summary += ": no periodic checkpoint expected before the deadline" + every +
                 "; the trainer is stopped then and what it did since its last checkpoint is lost";
  }
  return summary;
}

JobState::PeerNode& peer_node(JobState& state, int node) {
  auto it = std::find_if(state.nodes.begin(), state.nodes.end(),
                         [&](const JobState::PeerNode& n) { return n.node >= node; });
  if (it != state.nodes.end() && it->node == node) return *it;
  JobState::PeerNode added;
  added.node = node;
  return *state.nodes.insert(it, added);
}

void add_event(JobState& state, const JournalRecord& record, std::string summary) {
  state.events.push_back(JobEvent{record.time, record.type, std::move(summary)});
}

void fold_checkpoint_committed(JobState& state, const JournalRecord& record) {
  const json::Value& f = record.fields;
  CommittedCheckpoint checkpoint;
  checkpoint.id = "ck-" + std::to_string(record.seq);
  checkpoint.path = f.get_string("path");
  checkpoint.snapshot = f.get_string("snapshot");
  checkpoint.format = f.get_string("format");
  checkpoint.size_bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(0, f.get_int("size_bytes")));
  checkpoint.content_hash = f.get_string("content_hash");
  checkpoint.step = optional_int(f, "step");
  checkpoint.committed_at = record.time;
  checkpoint.modified = f.get_string("modified");
  // Where training is: a checkpoint moves it forward, never back (an older checkpoint committed
  // after the trainer reported a later step — a late settle, a save of an earlier step — does
  // not say training went back; a resume does, at child_started).
  if (checkpoint.step && (!state.last_step || *checkpoint.step > *state.last_step))
    state.last_step = checkpoint.step;

  std::string summary = "checkpoint " + checkpoint.id + " committed: ";
  if (checkpoint.step) summary += "step " + std::to_string(*checkpoint.step) + ", ";
  summary += format_bytes(static_cast<double>(checkpoint.size_bytes));
  if (auto ms = optional_int(f, "validate_ms")) summary += ", validated in " + duration_text(*ms);

  // The same path committed again: the file was rewritten in place, so the older record now
  // describes bytes that are gone, unless gpuhost kept a snapshot of them.
  for (auto& older : state.checkpoints) {
    if (older.path != checkpoint.path || older.status != CheckpointStatus::committed ||
        !older.snapshot.empty())
      continue;
    older.status = CheckpointStatus::retired;
    older.retired_reason =
        older.content_hash == checkpoint.content_hash ? "committed again as " + checkpoint.id : "overwritten";
    summary += "; replaces " + older.id;
  }
  state.checkpoints.push_back(std::move(checkpoint));
  add_event(state, record, std::move(summary));
}

void fold_child_exited(JobState& state, const JournalRecord& record) {
  const json::Value& f = record.fields;
  std::string description = f.get_string("description");
  if (description.empty())
    description = f.get_bool("signaled") ? "killed by signal " + std::to_string(f.get_int("signal"))
                                         : "exit code " + std::to_string(f.get_int("exit_code"));
  state.last_exit = description;
  std::string cause = f.get_string("cause");
  if (cause == "success")
    state.phase = JobPhase::finished;
  else if (cause == "preempted")
    state.phase = JobPhase::preempted;
  else if (cause == "stopped")
    state.phase = JobPhase::stopped;
  else
    state.phase = JobPhase::waiting_restart;
  std::string summary = "child exited: " + description;
  if (auto ms = optional_int(f, "ran_for_ms")) summary += " after " + duration_text(*ms);
  if (!cause.empty()) summary += " (" + cause + ")";
  add_event(state, record, std::move(summary));
}

void fold_restart_scheduled(JobState& state, const JournalRecord& record) {
  ++state.restarts;
  state.phase = JobPhase::waiting_restart;
  std::string delay = duration_text(record.fields.get_int("delay_ms"));
  // Read together with the exit that caused it: "child exited: ... (crash); restart in 1 s".
  if (!state.events.empty() && state.events.back().type == "child_exited") {
    state.events.back().summary += "; restart in " + delay;
    return;
  }
  // The reason already names the delay ("restart 2 of 10 in 2 s").
  std::string reason = record.fields.get_string("reason");
  add_event(state, record, reason.empty() ? "restart in " + delay : reason);
}

void fold_mirror_record(JobState& state, const JournalRecord& record) {
  const json::Value& f = record.fields;
  const std::string& type = record.type;
  const std::string id = f.get_string("id");
  state.mirrored = true;
  auto drop_uploads = [&](auto&& match) { std::erase_if(state.pending_uploads, match); };
  if (type == "mirror_upload_started") {
    PendingUpload upload;
    upload.checkpoint_id = id;
    upload.remote_id = f.get_string("remote_id");
    upload.object = f.get_string("object");
    upload.upload_id = f.get_string("upload_id");
    upload.part_size = static_cast<std::uint64_t>(std::max<std::int64_t>(0, f.get_int("part_size")));
    // Started again by a resumed attempt: the parts journalled before still count.
    for (const PendingUpload& earlier : state.pending_uploads)
      if (earlier.upload_id == upload.upload_id) upload.parts = earlier.parts;
    drop_uploads([&](const PendingUpload& u) { return u.upload_id == upload.upload_id; });
    state.pending_uploads.push_back(std::move(upload));
  } else if (type == "mirror_part_uploaded") {
    for (auto& upload : state.pending_uploads)
      if (upload.upload_id == f.get_string("upload_id"))
        upload.parts.push_back(
            PendingUpload::Part{static_cast<int>(f.get_int("number")), f.get_string("etag"),
                                static_cast<std::uint64_t>(std::max<std::int64_t>(0, f.get_int("size"))),
                                f.get_string("sha256")});
  } else if (type == "mirror_upload_aborted") {
    drop_uploads([&](const PendingUpload& u) { return u.upload_id == f.get_string("upload_id"); });
  } else if (type == "mirror_durable") {
    drop_uploads([&](const PendingUpload& u) { return u.checkpoint_id == id; });
    if (CommittedCheckpoint* checkpoint = find_checkpoint(state, id)) {
      checkpoint->remote_id = f.get_string("remote_id");
      checkpoint->durable_at = record.time;
    }
    std::string summary = "checkpoint " + id + " durable remotely as " + f.get_string("remote_id");
    if (auto ms = optional_int(f, "upload_ms")) summary += " (uploaded in " + duration_text(*ms) + ")";
    add_event(state, record, std::move(summary));
  } else if (type == "mirror_removed") {
    if (CommittedCheckpoint* checkpoint = find_checkpoint(state, id)) checkpoint->remote_id.clear();
    add_event(state, record, "remote copy " + f.get_string("remote_id") + " of " + id + " deleted");
  } else if (type == "mirror_failed") {
    // One short line per retry (the console prints each); the journal keeps the whole error.
    std::string error = f.get_string("error");
    if (auto newline = error.find('\n'); newline != std::string::npos) error.resize(newline);
    constexpr std::size_t k_shown = 160;
    const bool cut = error.size() > k_shown;
    if (cut) error = error.substr(0, k_shown) + "...";
    std::string summary = (id.empty() ? std::string("mirror: ") : "upload of " + id + " failed: ") + error;
    if (auto ms = optional_int(f, "retry_in_ms")) summary += "; retry in " + duration_text(*ms);
    if (cut) summary += " (the whole error is in the job's journal.jsonl)";
    add_event(state, record, std::move(summary));
  } else if (type == "mirror_incomplete") {
    std::size_t count = 0;
    if (const json::Value* ids = f.find("ids"); ids && ids->is_array()) count = ids->items().size();
    add_event(state, record,
              std::to_string(count) + " checkpoint(s) NOT durable on the remote when the run ended");
  } else if (type == "mirror_deadline") {
    add_event(state, record,
              f.get_bool("durable") ? "checkpoint " + id + " durable remotely before the notice deadline"
                                    : "checkpoint " + id + " NOT durable remotely by the notice deadline");
  } else if (type == "checkpoint_restored") {
    state.restored.push_back(
        RestoredCheckpoint{f.get_string("remote_id"), f.get_string("path"), f.get_string("content_hash")});
    add_event(state, record,
              "restored " + f.get_string("remote_id") + " from " + f.get_string("store") + " into " +
                  f.get_string("path"));
  }
}

std::optional<JobPhase> phase_of_outcome(std::string_view outcome) {
  if (outcome == "finished" || outcome == "unmirrored") return JobPhase::finished;
  if (outcome == "preempted" || outcome == "peer_lost") return JobPhase::preempted;
  if (outcome == "failed") return JobPhase::failed;
  if (outcome == "stopped") return JobPhase::stopped;
  return std::nullopt;
}

// "step 0.52 s (0.21 s in the last run: +148 %)".
std::string step_time_text(double seconds, std::optional<double> before) {
  char text[96];
  if (!before || *before <= 0) {
    std::snprintf(text, sizeof text, "step %.3g s", seconds);
  } else {
    std::snprintf(text, sizeof text, "step %.3g s (%.3g s in the last run: %+.0f %%)", seconds, *before,
                  (seconds / *before - 1) * 100);
  }
  return text;
}

void fold_advice(JobState& state, const JournalRecord& record) {
  const json::Value& f = record.fields;
  JobAdvice advice;
  advice.time = record.time;
  if (const json::Value* list = f.find("findings"); list && list->is_array()) {
    for (const json::Value& item : list->items()) {
      if (!item.is_object()) continue;
      JobAdvice::Finding finding;
      finding.id = item.get_string("id");
      finding.strength = item.get_string("strength");
      finding.gpu = optional_int(item, "gpu");
      finding.limit = item.get_string("limit");
      finding.fix = item.get_string("fix");
      finding.expected = item.get_string("expected");
      if (const json::Value* evidence = item.find("evidence"); evidence && evidence->is_array())
        for (const json::Value& line : evidence->items())
          if (line.is_string()) finding.evidence.push_back(line.as_string());
      advice.findings.push_back(std::move(finding));
    }
  }
  if (const json::Value* v = f.find("step_seconds"); v && v->is_number())
    advice.step_seconds = v->as_number();
  if (const json::Value* v = f.find("last_run_step_seconds"); v && v->is_number())
    advice.last_run_step_seconds = v->as_number();
  if (const json::Value* v = f.find("mfu_percent"); v && v->is_number()) advice.mfu_percent = v->as_number();
  advice.mfu_basis = f.get_string("mfu_basis");
  advice.unseen = f.get_string("gpu_unseen");
  if (std::string host = f.get_string("host_unseen"); !host.empty())
    advice.unseen += (advice.unseen.empty() ? "" : "; ") + host;
  std::string summary = "advice: ";
  if (advice.findings.empty()) summary += "no finding";
  for (std::size_t i = 0; i < advice.findings.size(); ++i) {
    const auto& finding = advice.findings[i];
    summary += (i ? ", " : "") + finding.strength + " " + finding.id +
               (finding.gpu ? " (GPU " + std::to_string(*finding.gpu) + ")" : std::string());
  }
  if (advice.step_seconds) {
    summary += "; " + step_time_text(*advice.step_seconds, advice.last_run_step_seconds);
    state.run_step_seconds = advice.step_seconds;
  }
  if (advice.mfu_percent) {
    char text[48];
    std::snprintf(text, sizeof text, "; MFU %.3g %%", *advice.mfu_percent);
    summary += text;
  }
  add_event(state, record, std::move(summary));
  state.advice = std::move(advice);
}

void fold_record(JobState& state, const JournalRecord& record) {
  const json::Value& f = record.fields;
  const std::string& type = record.type;
  if (type == "job_created") {
    add_event(state, record, "job " + f.get_string("name") + " created");
  } else if (type == "supervisor_started") {
    ++state.supervisor_runs;
    if (state.run_step_seconds) state.last_run_step_seconds = state.run_step_seconds;
    state.run_step_seconds.reset();
    state.advice.reset();
    state.phase = JobPhase::running;
    state.supervisor_pid = static_cast<long>(f.get_int("pid"));
    std::string summary = "supervisor started (pid " + std::to_string(f.get_int("pid"));
    if (std::string cloud = f.get_string("cloud"); !cloud.empty() && cloud != "none")
      summary += ", cloud " + cloud;
    summary += ")";
    state.topology.clear();
    if (const json::Value* where = f.find("topology"); where != nullptr && where->is_object()) {
      state.topology = where->get_string("describe");
      if (!state.topology.empty()) summary += " as " + state.topology;
    }
    if (f.get_bool("after_crash")) summary += " after the previous supervisor died without stopping";
    add_event(state, record, std::move(summary));
  } else if (type == "leftovers_killed") {
    std::int64_t count = f.get_int("count");
    add_event(state, record,
              "killed " + std::to_string(count) + (count == 1 ? " process" : " processes") +
                  (f.contains("attempt") ? " left over from attempt " + std::to_string(f.get_int("attempt"))
                                         : std::string(" left over from the previous supervisor")));
  } else if (type == "child_starting") {
    // Written before the trainer is started: its token finds what a supervisor killed in
    // between left behind.
    state.run_token = f.get_string("run_token");
  } else if (type == "child_started") {
    ++state.child_starts;
    state.phase = JobPhase::running;
    state.run_token = f.get_string("run_token");
    state.child_pid = static_cast<long>(f.get_int("pid"));
    std::string summary = "child started (pid " + std::to_string(f.get_int("pid")) + ", attempt " +
                          std::to_string(f.get_int("attempt", state.child_starts)) + ")";
    std::string from = f.get_string("resume_from");
    summary += from.empty() ? ", fresh start" : ", resuming from " + from;
    add_event(state, record, std::move(summary));
    // A new attempt trains on from its resume checkpoint's step (or from the start).
    state.last_step.reset();
    if (const CommittedCheckpoint* resumed = from.empty() ? nullptr : find_checkpoint(state, from))
      state.last_step = resumed->step;
  } else if (type == "child_exited") {
    state.child_pid.reset();
    fold_child_exited(state, record);
  } else if (type == "checkpoint_committed") {
    fold_checkpoint_committed(state, record);
    if (const json::Value* step = f.find("step"); state.self_node && step && step->is_integer())
      peer_node(state, *state.self_node).step = step->as_int();
  } else if (type == "checkpoint_rejected") {
    std::string summary = "checkpoint rejected: " + f.get_string("path");
    if (std::string problem = f.get_string("problem"); !problem.empty()) summary += ": " + problem;
    add_event(state, record, std::move(summary));
  } else if (type == "checkpoint_bad") {
    std::string id = f.get_string("id");
    if (CommittedCheckpoint* checkpoint = find_checkpoint(state, id)) {
      checkpoint->status = CheckpointStatus::bad;
      checkpoint->bad_reason = f.get_string("reason");
    }
    add_event(state, record, "checkpoint " + id + " marked bad: " + f.get_string("reason"));
  } else if (type == "checkpoint_retired") {
    std::string id = f.get_string("id");
    if (CommittedCheckpoint* checkpoint = find_checkpoint(state, id)) {
      checkpoint->status = CheckpointStatus::retired;
      checkpoint->retired_reason = f.get_string("reason");
    }
    add_event(state, record, "checkpoint " + id + " retired: " + f.get_string("reason"));
  } else if (type == "checkpoints_found") {
    std::string summary = std::to_string(f.get_int("count")) + " checkpoint(s) were already in " +
                          f.get_string("location") + " when this job was created: resuming from " +
                          f.get_string("newest");
    if (auto step = optional_int(f, "step")) summary += " (step " + std::to_string(*step) + ")";
    summary += "; --fresh starts from scratch instead";
    add_event(state, record, std::move(summary));
  } else if (type == "checkpoint_pinned") {
    std::string id = f.get_string("id");
    if (CommittedCheckpoint* checkpoint = find_checkpoint(state, id)) checkpoint->pinned = true;
    add_event(state, record, "checkpoint " + id + " pinned");
  } else if (type == "notice") {
    if (f.get_string("kind", "preemption") == "preemption") ++state.preemptions;
    add_event(state, record, notice_summary(record));
  } else if (type == "save_requested") {
    add_event(state, record, save_request_summary(f));
  } else if (type == "save_completed") {
    state.last_save_ms = f.get_int("duration_ms");
    std::string summary = "save completed in " + duration_text(f.get_int("duration_ms"));
    if (std::string id = f.get_string("id"); !id.empty()) summary += " (" + id + ")";
    add_event(state, record, std::move(summary));
  } else if (type == "save_timed_out") {
    std::string summary =
        "save timed out: no checkpoint written after the notice in " + duration_text(f.get_int("waited_ms"));
    auto last = optional_int(f, "last_step");
    auto kept = optional_int(f, "checkpoint_step");
    if (last && kept && *last > *kept)
      summary += "; steps " + std::to_string(*kept + 1) + "-" + std::to_string(*last) +
                 " are lost (resume from step " + std::to_string(*kept) + ")";
    else if (last && !kept)
      summary += "; steps 1-" + std::to_string(*last) + " are lost (no checkpoint to resume from)";
    add_event(state, record, std::move(summary));
  } else if (type == "notice_acknowledged") {
    add_event(
        state, record,
        "notice acknowledged to " + f.get_string("source") + " (event " + f.get_string("event_id") + ")");
  } else if (type == "restart_scheduled") {
    fold_restart_scheduled(state, record);
  } else if (type == "gave_up") {
    state.phase = JobPhase::failed;
    add_event(state, record, "gave up: " + f.get_string("reason"));
  } else if (type == "drill") {
    std::string summary = "drill: " + f.get_string("action");
    if (const json::Value* at = f.find("at_s"); at && at->is_number()) {
      char text[32];
      std::snprintf(text, sizeof text, " at %g s", at->as_number());
      summary += text;
    }
    add_event(state, record, std::move(summary));
  } else if (type == "disk_low") {
    add_event(state, record,
              "disk low: " + format_bytes(static_cast<double>(f.get_int("available_bytes"))) +
                  " available for " + f.get_string("path"));
  } else if (type == "peers_started") {
    state.peer_lost.clear();
    state.nodes.clear();
    state.self_node = static_cast<int>(f.get_int("node"));
    peer_node(state, *state.self_node);
    add_event(state, record,
              "peer channel: " + f.get_string("role") + " of " + std::to_string(f.get_int("nnodes")) +
                  " nodes at " + f.get_string("leader"));
  } else if (type == "peers_unavailable") {
    add_event(state, record, "no peer channel: " + f.get_string("reason"));
  } else if (type == "peer_joined") {
    JobState::PeerNode& node = peer_node(state, static_cast<int>(f.get_int("node")));
    node.state = "joined";
    node.reason.clear();
    add_event(state, record, "node " + std::to_string(f.get_int("node")) + " joined");
  } else if (type == "resume_agreed") {
    const json::Value* step = f.find("step");
    const std::string storage = f.get_string("storage");
    // Every node starts from the agreed step: its newest one until it commits another.
    if (step && step->is_integer())
      for (auto& node : state.nodes)
        if (!node.step || *node.step < step->as_int()) node.step = step->as_int();
    add_event(state, record,
              (step && step->is_integer()
                   ? "all nodes resume from step " + std::to_string(step->as_int())
                   : std::string("all nodes start fresh (no step committed on every node)")) +
                  (storage == "node_local" ? " (node-local checkpoint folders)"
                   : storage == "shared"   ? " (one shared checkpoint folder)"
                                           : ""));
  } else if (type == "mirror_by_leader") {
    add_event(state, record, "not mirrored from this node: " + f.get_string("reason"));
  } else if (type == "peer_committed") {
    if (const json::Value* step = f.find("step"); step && step->is_integer())
      peer_node(state, static_cast<int>(f.get_int("node"))).step = step->as_int();
  } else if (type == "global_commit") {
    if (const json::Value* step = f.find("step"); step && step->is_integer()) {
      state.global_step = step->as_int();
      add_event(state, record, "step " + std::to_string(step->as_int()) + " committed on every node");
    }
  } else if (type == "peer_lost") {
    const std::string outcome = f.get_string("outcome");
    std::string summary = "node " + std::to_string(f.get_int("node")) + " " +
                          (outcome.empty() ? "lost: " + f.get_string("reason") : "ended: " + outcome);
    if (outcome != "finished") state.peer_lost = summary;
    JobState::PeerNode& node = peer_node(state, static_cast<int>(f.get_int("node")));
    node.state = outcome.empty() ? "lost" : "ended: " + outcome;
    node.reason = f.get_string("reason");
    add_event(state, record, std::move(summary));
  } else if (type == "grace_too_short") {
    add_event(state, record,
              "the last save took " + duration_text(f.get_int("last_save_ms")) + ", more than a signal's " +
                  duration_text(f.get_int("signal_deadline_ms")) + " less the " +
                  duration_text(f.get_int("safety_margin_ms")) +
                  " margin: raise the engine's grace (Kubernetes terminationGracePeriodSeconds, Slurm "
                  "GraceTime) and "
                  "--signal-deadline, or save more often");
  } else if (type == "engine_requeue") {
    add_event(state, record,
              f.get_bool("requeued")
                  ? std::string("the engine was asked to requeue the job (scontrol requeue)")
                  : "requeue failed: " + f.get_string("output"));
  } else if (type == "peer_refused") {
    add_event(state, record, "refused by node 0: " + f.get_string("reason"));
  } else if (type == "watcher_trouble") {
    add_event(state, record, f.get_string("source") + " watcher: " + f.get_string("message"));
  } else if (type == "supervisor_stopped") {
    std::string outcome = f.get_string("outcome");
    if (auto phase = phase_of_outcome(outcome)) state.phase = *phase;
    state.supervisor_pid.reset();
    state.child_pid.reset();
    std::string summary = "supervisor stopped: " + outcome;
    if (auto code = optional_int(f, "exit_code")) summary += " (exit code " + std::to_string(*code) + ")";
    add_event(state, record, std::move(summary));
  } else if (type.starts_with("mirror_") || type == "checkpoint_restored") {
    fold_mirror_record(state, record);
  } else if (type == "advice") {
    fold_advice(state, record);
  } else if (type == "progress") {
    // The newest step the trainer reported (its output or logger files), now and then.
    if (auto step = optional_int(f, "step")) state.last_step = step;
  }
}

}  // namespace

bool JobState::node_late(const PeerNode& node) const {
  if (!knows_every_node() || node.state != "joined") return false;
  std::optional<std::int64_t> newest;
  for (const auto& each : nodes)
    if (each.step && (!newest || *each.step > *newest)) newest = each.step;
  return newest && (!node.step || *node.step < *newest);
}

const char* job_phase_name(JobPhase phase) {
  switch (phase) {
    case JobPhase::new_job: return "new";
    case JobPhase::running: return "running";
    case JobPhase::waiting_restart: return "waiting_restart";
    case JobPhase::preempted: return "preempted";
    case JobPhase::finished: return "finished";
    case JobPhase::failed: return "failed";
    case JobPhase::stopped: return "stopped";
  }
  return "unknown";
}

JobState fold_journal(const std::vector<JournalRecord>& records) {
  JobState state;
  fold_more(state, records);
  return state;
}

void fold_more(JobState& state, std::span<const JournalRecord> records) {
  for (const JournalRecord& record : records) fold_record(state, record);
}

std::vector<const CommittedCheckpoint*> resume_candidates(const JobState& state) {
  std::vector<const CommittedCheckpoint*> candidates;
  for (auto it = state.checkpoints.rbegin(); it != state.checkpoints.rend(); ++it)
    if (it->status == CheckpointStatus::committed) candidates.push_back(&*it);
  return candidates;
}

}  // namespace gpuhost::job

namespace gpuhost::job {

// Folding the record alone gives the same wording as `gpuhost status`, minus what needs earlier
// records (which older checkpoint a commit replaces).
std::string summarize_record(const JournalRecord& record) {
  JobState alone = fold_journal({record});
  return alone.events.empty() ? std::string() : alone.events.back().summary;
}

}  // namespace gpuhost::job
