#include "cli/job_render.h"

#include <algorithm>
#include <cstdio>

#include "base/strings.h"
#include "cli/wording.h"
#include "platform/process_info.h"

namespace gpuhost::cli {

namespace {

using job::CheckpointStatus;

const char* status_name(CheckpointStatus status) {
  switch (status) {
    case CheckpointStatus::committed: return "committed";
    case CheckpointStatus::bad: return "bad";
    case CheckpointStatus::retired: return "retired";
  }
  return "committed";
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string phase_colored(const job::JobState& state, const TerminalStyle& style) {
  const job::JobPhase phase = state.phase;
  std::string name = shown_phase(state);
  if (name == "interrupted") return style.yellow(name);
  switch (phase) {
    case job::JobPhase::finished: return style.green(name);
    case job::JobPhase::failed: return style.red(name);
    case job::JobPhase::preempted:
    case job::JobPhase::stopped: return style.yellow(name);
    default: return style.cyan(name);
  }
}

}  // namespace

std::string shown_phase(const job::JobState& state) {
  using job::JobPhase;
  const bool active = state.phase == JobPhase::running || state.phase == JobPhase::waiting_restart ||
                      state.phase == JobPhase::new_job;
  if (active && state.supervisor_pid) {
    // pid reuse: a live process that is not a gpuhost is not our supervisor.
    auto name = platform::process_name(static_cast<unsigned>(*state.supervisor_pid));
    if (!name || !name->starts_with("gpuhost")) return "interrupted";
  }
  return job::job_phase_name(state.phase);
}

std::string render_record_line(const job::JournalRecord& record, const TerminalStyle& style) {
  std::string line = job::summarize_record(record);
  if (line.empty()) return line;
  const std::string& type = record.type;
  if (type == "notice" || type == "save_timed_out" || type == "disk_low" || type == "watcher_trouble" ||
      type == "drill" || type == "leftovers_killed" || type == "peer_lost" || type == "peers_unavailable")
    return style.yellow(line);
  if (type == "checkpoint_committed" || type == "save_completed") return style.green(line);
  if (type == "checkpoint_bad" || type == "checkpoint_rejected" || type == "gave_up" || type == "peer_refused")
    return style.red(line);
  if (type == "child_exited" && record.fields.get_string("cause") == "crash") return style.red(line);
  return line;
}

namespace {

json::Value advice_json(const job::JobAdvice& advice) {
  json::Value doc = json::Value::object();
  doc["time"] = advice.time;
  doc["step_seconds"] = advice.step_seconds ? json::Value(*advice.step_seconds) : json::Value();
  doc["last_run_step_seconds"] =
      advice.last_run_step_seconds ? json::Value(*advice.last_run_step_seconds) : json::Value();
  doc["mfu_percent"] = advice.mfu_percent ? json::Value(*advice.mfu_percent) : json::Value();
  doc["mfu_basis"] = advice.mfu_basis;
  doc["unseen"] = advice.unseen;
  json::Value findings = json::Value::array();
  for (const auto& f : advice.findings) {
    json::Value item = json::Value::object();
    item["id"] = f.id;
    item["strength"] = f.strength;
    item["gpu"] = f.gpu ? json::Value(*f.gpu) : json::Value();
    item["limit"] = f.limit;
    item["fix"] = f.fix;
    item["expected"] = f.expected;
    json::Value evidence = json::Value::array();
    for (const auto& e : f.evidence) evidence.push_back(e);
    item["evidence"] = std::move(evidence);
    findings.push_back(std::move(item));
  }
  doc["findings"] = std::move(findings);
  return doc;
}

// The advisor's newest judgement: each finding with its fix, and the step time.
void render_advice(std::ostream& out, const job::JobAdvice& advice, const TerminalStyle& style) {
  out << "\n" << style.bold("Advice") << "  " << style.dim(advice.time) << "\n";
  if (advice.findings.empty())
    out << "  " << style.green("no finding") << ": nothing seen holds the job back\n";
  for (const auto& f : advice.findings) {
    out << "  " << (f.strength == "verdict" ? style.yellow("verdict") : style.cyan("hint")) << " "
        << style.bold(f.id) << (f.gpu ? " (GPU " + std::to_string(*f.gpu) + ")" : std::string()) << ": "
        << f.limit << "\n";
    if (!f.fix.empty()) out << "    fix:      " << f.fix << "\n";
    if (!f.expected.empty()) out << "    expected: " << f.expected << "\n";
  }
  if (advice.step_seconds) {
    char text[128];
    std::snprintf(text, sizeof text, "  step time  %.3g s", *advice.step_seconds);
    out << text;
    if (advice.last_run_step_seconds && *advice.last_run_step_seconds > 0) {
      std::snprintf(text, sizeof text, " (last run %.3g s: %+.0f %%)", *advice.last_run_step_seconds,
                    (*advice.step_seconds / *advice.last_run_step_seconds - 1) * 100);
      out << text;
    }
    out << "\n";
  }
  if (advice.mfu_percent) {
    char text[48];
    std::snprintf(text, sizeof text, "  MFU        %.3g %%", *advice.mfu_percent);
    out << text << " (" << (advice.mfu_basis.empty() ? "the trainer's own figure" : advice.mfu_basis)
        << ")\n";
  }
  if (!advice.unseen.empty()) out << "  " << style.dim("not seen: " + advice.unseen) << "\n";
}

}  // namespace

json::Value job_status_json(const job::JobState& state) {
  json::Value doc = json::Value::object();
  doc["phase"] = shown_phase(state);
  doc["supervisor_runs"] = state.supervisor_runs;
  doc["topology"] = state.topology;
  doc["global_step"] = state.global_step ? json::Value(*state.global_step) : json::Value();
  doc["peer_lost"] = state.peer_lost;
  json::Value nodes = json::Value::array();
  for (const auto& node : state.nodes) {
    json::Value item = json::Value::object();
    item["node"] = node.node;
    item["self"] = state.self_node == node.node;
    item["step"] = node.step ? json::Value(*node.step) : json::Value();
    item["state"] = node.state;
    item["reason"] = node.reason;
    item["late"] = state.node_late(node);
    nodes.push_back(std::move(item));
  }
  doc["nodes"] = std::move(nodes);
  doc["child_starts"] = state.child_starts;
  doc["restarts"] = state.restarts;
  doc["preemptions"] = state.preemptions;
  doc["last_step"] = state.last_step ? json::Value(*state.last_step) : json::Value();
  doc["last_exit"] = state.last_exit ? json::Value(*state.last_exit) : json::Value();
  json::Value checkpoints = json::Value::array();
  for (const auto& c : state.checkpoints) {
    json::Value item = json::Value::object();
    item["id"] = c.id;
    item["status"] = status_name(c.status);
    item["path"] = c.path;
    item["snapshot"] = c.snapshot;
    item["format"] = c.format;
    item["size_bytes"] = c.size_bytes;
    item["content_hash"] = c.content_hash;
    item["step"] = c.step ? json::Value(*c.step) : json::Value();
    item["committed_at"] = c.committed_at;
    item["pinned"] = c.pinned;
    item["bad_reason"] = c.bad_reason;
    checkpoints.push_back(std::move(item));
  }
  doc["checkpoints"] = std::move(checkpoints);
  auto candidates = job::resume_candidates(state);
  doc["resume_from"] = candidates.empty() ? json::Value() : json::Value(candidates.front()->id);
  json::Value events = json::Value::array();
  for (const auto& e : state.events) {
    json::Value item = json::Value::object();
    item["time"] = e.time;
    item["type"] = e.type;
    item["summary"] = e.summary;
    events.push_back(std::move(item));
  }
  doc["events"] = std::move(events);
  doc["advice"] = state.advice ? advice_json(*state.advice) : json::Value();
  doc["last_run_step_seconds"] =
      state.last_run_step_seconds ? json::Value(*state.last_run_step_seconds) : json::Value();
  return doc;
}

void render_job_list(std::ostream& out, const std::vector<JobSummary>& jobs, const TerminalStyle& style,
                     const std::filesystem::path& root) {
  if (jobs.empty()) {
    out << "No jobs in " << root.string() << ". Start one with: gpuhost run --checkpoints DIR -- COMMAND\n";
    return;
  }
  std::size_t width = 4;
  for (const auto& job : jobs) width = std::max(width, job.name.size());
  out << style.bold(pad("NAME", width + 2) + pad("STATE", 17) + pad("CHECKPOINTS", 14) + pad("STEP", 10) +
                    pad("RESTARTS", 10) + pad("PREEMPTED", 11) + "LAST EVENT")
      << "\n";
  for (const auto& job : jobs) {
    int good = 0;
    int bad = 0;
    for (const auto& c : job.state.checkpoints) {
      if (c.status == CheckpointStatus::committed) ++good;
      if (c.status == CheckpointStatus::bad) ++bad;
    }
    std::string phase = shown_phase(job.state);
    std::string counts = std::to_string(good) + (bad ? " (" + std::to_string(bad) + " bad)" : "");
    std::string step = job.state.last_step ? std::to_string(*job.state.last_step) : "-";
    std::string last = job.state.events.empty() ? "" : job.state.events.back().time;
    out << pad(job.name, width + 2) << phase_colored(job.state, style) << std::string(17 - std::min<std::size_t>(16, phase.size()), ' ')
        << pad(counts, 14) << pad(step, 10) << pad(std::to_string(job.state.restarts), 10)
        << pad(std::to_string(job.state.preemptions), 11) << last << "\n";
    // A multi-node job: where this node runs, the step every node has, and (node 0) the nodes
    // behind or gone, on a line of its own below the job.
    if (job.state.self_node && !job.state.topology.empty()) {
      std::string line = job.state.topology;
      if (job.state.global_step)
        line += "; step " + std::to_string(*job.state.global_step) + " on every node";
      for (const auto& node : job.state.nodes) {
        if (job.state.node_late(node))
          line += "; node " + std::to_string(node.node) + " late";
        else if (job.state.knows_every_node() && node.state != "joined")
          line += "; node " + std::to_string(node.node) + " " + node.state;
      }
      out << pad("", width + 2) << style.dim(line) << "\n";
    }
  }
}

void render_job_status(std::ostream& out, const std::string& name, const std::filesystem::path& dir,
                       const job::JobState& state, const job::JournalDamage& damage, std::size_t max_events,
                       const TerminalStyle& style) {
  out << style.bold(name) << "  " << phase_colored(state, style) << "\n";
  if (shown_phase(state) == "interrupted")
    out << "  " << style.yellow("its supervisor (pid " + std::to_string(*state.supervisor_pid) +
                                ") is gone without stopping: run the same gpuhost run command again to resume")
        << "\n";
  out << "  directory    " << dir.string() << "\n";
  if (!state.topology.empty()) out << "  where        " << state.topology << "\n";
  if (state.global_step) out << "  all nodes    step " << *state.global_step << " committed on every node\n";
  if (!state.peer_lost.empty()) out << "  " << style.yellow("peer         " + state.peer_lost) << "\n";
  if (state.knows_every_node()) {
    std::string line;
    for (const auto& node : state.nodes) {
      std::string item = "node " + std::to_string(node.node) + (state.self_node == node.node ? " (this)" : "") + " " +
                         (node.step ? "step " + std::to_string(*node.step) : std::string("no step yet"));
      if (node.state != "joined") item += ", " + node.state;
      if (state.node_late(node)) item += ", late";
      line += (line.empty() ? "" : "; ") + item;
    }
    out << "  nodes        " << line << "\n";
  }
  out << "  runs         " << state.supervisor_runs << " supervisor, " << counted(state.child_starts, "trainer start") << ", "
      << counted(state.restarts, "crash restart") << ", " << counted(state.preemptions, "preemption") << "\n";
  if (state.last_step) out << "  newest step  " << *state.last_step << "\n";
  if (state.last_exit) out << "  last exit    " << *state.last_exit << "\n";
  auto candidates = job::resume_candidates(state);
  out << "  resumes from " << (candidates.empty() ? std::string("nothing yet (starts fresh)") : candidates.front()->id + "  " + candidates.front()->path)
      << "\n";
  if (damage.torn_tail_bytes > 0)
    out << "  " << style.yellow("journal: a torn last record (" + std::to_string(damage.torn_tail_bytes) +
                                " bytes) from a crash was ignored")
        << "\n";
  if (!damage.corrupt_lines.empty())
    out << "  " << style.red("journal: " + std::to_string(damage.corrupt_lines.size()) +
                             " corrupt record(s) skipped; the file was changed outside gpuhost")
        << "\n";

  out << "\n" << style.bold("Checkpoints") << "\n";
  if (state.checkpoints.empty()) out << "  none committed yet\n";
  for (const auto& c : state.checkpoints) {
    std::string status = status_name(c.status);
    if (c.pinned) status += ", pinned";
    std::string colored = c.status == CheckpointStatus::committed ? style.green(pad(status, 18))
                          : c.status == CheckpointStatus::bad      ? style.red(pad(status, 18))
                                                                   : style.dim(pad(status, 18));
    out << "  " << pad(c.id, 8) << colored << pad(c.step ? "step " + std::to_string(*c.step) : "", 12)
        << pad(format_bytes(static_cast<double>(c.size_bytes)), 11) << c.path << "\n";
    if (!c.snapshot.empty() && c.status != CheckpointStatus::retired) out << "          " << style.dim("copy: " + c.snapshot) << "\n";
    if (c.status == CheckpointStatus::bad && !c.bad_reason.empty()) out << "          " << style.red(c.bad_reason) << "\n";
  }

  if (state.advice) render_advice(out, *state.advice, style);

  out << "\n" << style.bold("Events") << "\n";
  std::size_t first = (max_events == 0 || state.events.size() <= max_events) ? 0 : state.events.size() - max_events;
  if (first > 0) out << "  " << style.dim("(" + std::to_string(first) + " earlier; --events 0 shows all)") << "\n";
  for (std::size_t i = first; i < state.events.size(); ++i) {
    const auto& e = state.events[i];
    out << "  " << style.dim(e.time) << "  " << e.summary << "\n";
  }
}

}  // namespace gpuhost::cli
