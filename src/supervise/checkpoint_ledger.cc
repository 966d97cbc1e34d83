#include "supervise/checkpoint_ledger.h"

#include <algorithm>
#include <system_error>
#include <utility>
#include <vector>

#include "supervise/snapshot.h"

namespace gpuhost::supervise {

namespace fs = std::filesystem;

CheckpointLedger::CheckpointLedger(JobRecorder& recorder, const JobSpec& spec, job::JobPaths paths,
                                   SnapshotPolicy snapshots, Hooks hooks)
    : m_recorder(recorder),
      m_spec(spec),
      m_paths(std::move(paths)),
      m_snapshots(snapshots),
      m_hooks(std::move(hooks)),
      m_scanner(ScannerOptions{spec.checkpoint_location, spec.settle, spec.marker, spec.ignore}) {}

void CheckpointLedger::prime() {
  for (const auto& record : m_recorder.contents().records) {
    if (record.type != "checkpoint_committed") continue;
    fs::path path = record.fields.get_string("path");
    auto verdict = validate_checkpoint(path, ValidationDepth::structure);
    if (!verdict || !verdict->valid) continue;
    if (verdict->size_bytes != static_cast<std::uint64_t>(record.fields.get_int("size_bytes", -1))) continue;
    if (job::journal_time(verdict->modified) != record.fields.get_string("modified")) continue;
    verdict->content_hash = record.fields.get_string("content_hash");  // structure depth has none
    m_scanner.mark_seen(path, *verdict);
  }
}

void CheckpointLedger::ignore_present() {
  m_scanner.ignore_present();
  std::vector<std::string> ids;
  for (const job::CommittedCheckpoint* c : job::resume_candidates(m_recorder.state())) ids.push_back(c->id);
  for (const std::string& id : ids) {
    json::Value fields = json::Value::object();
    fields["id"] = id;
    fields["reason"] = "--fresh: not resumed from";
    m_recorder.record("checkpoint_retired", std::move(fields));
  }
}

void CheckpointLedger::announce_present() {
  auto live = job::resume_candidates(m_recorder.state());
  if (live.empty()) return;
  json::Value fields = json::Value::object();
  fields["count"] = live.size();
  fields["location"] = m_spec.checkpoint_location.string();
  fields["newest"] = live.front()->id;
  fields["path"] = live.front()->path;
  fields["step"] = live.front()->step ? json::Value(*live.front()->step) : json::Value();
  m_recorder.record("checkpoints_found", std::move(fields));
}

void CheckpointLedger::delete_retired(bool last_try) {
  std::vector<fs::path> still;
  for (const fs::path& path : m_undeleted) {
    std::error_code ec;
    fs::remove_all(path, ec);
    if (!ec || !fs::exists(path)) {
      m_scanner.forget(path);
      continue;
    }
    if (last_try)
      m_recorder.message("could not delete the retired checkpoint " + path.string() + ": " + ec.message());
    else
      still.push_back(path);
  }
  m_undeleted = std::move(still);
}

void CheckpointLedger::scan(bool settled) {
  if (!m_undeleted.empty()) delete_retired(false);
  auto now = std::chrono::steady_clock::now();
  auto scanned = m_scanner.scan(now);
  if (settled && scanned) {
    auto again = m_scanner.scan(now + m_spec.settle + std::chrono::milliseconds(1));
    if (again) {
      scanned->ready.insert(scanned->ready.end(), again->ready.begin(), again->ready.end());
      scanned->rejected.insert(scanned->rejected.end(), again->rejected.begin(), again->rejected.end());
    }
  }
  if (!scanned) {
    m_recorder.message("scanning " + m_spec.checkpoint_location.string() + ": " + scanned.error().message);
    return;
  }
  for (const auto& verdict : scanned->rejected) {
    json::Value fields = json::Value::object();
    fields["path"] = verdict.path.string();
    fields["format"] = checkpoint_format_name(verdict.format);
    fields["problem"] = verdict.problem;
    m_recorder.record("checkpoint_rejected", std::move(fields));
  }
  for (const auto& verdict : scanned->ready) commit(verdict);
  if (!scanned->ready.empty()) apply_retention();
}

void CheckpointLedger::commit(const CheckpointVerdict& verdict) {
  std::string path = verdict.path.string();
  if (!json::valid_utf8(path)) {
    // The journal keeps text as UTF-8: this path would read back with U+FFFD in it and name no
    // file, so a resume could not open it. Said once (the scanner keeps it as seen until it
    // changes), never committed.
    json::Value fields = json::Value::object();
    fields["path"] = path;
    fields["format"] = checkpoint_format_name(verdict.format);
    fields["problem"] =
        "its path is not valid UTF-8, which the journal cannot keep byte for byte: give the checkpoint "
        "(or its folder) a UTF-8 name";
    m_recorder.record("checkpoint_rejected", std::move(fields));
    return;
  }
  for (const auto& existing : m_recorder.state().checkpoints)
    if (existing.path == path && existing.content_hash == verdict.content_hash &&
        existing.status != job::CheckpointStatus::retired)
      return;  // already committed (an earlier supervisor did, or the file was touched)

  std::string snapshot;
  if (wants_snapshot(m_snapshots, verdict)) {
    auto copied = take_snapshot(verdict, m_paths.snapshots());
    if (copied) {
      snapshot = copied->string();
    } else {
      m_recorder.message("could not copy " + path + " into the job's snapshots: " + copied.error().message +
                         " (committing it without a copy)");
    }
  }

  json::Value fields = json::Value::object();
  fields["path"] = path;
  fields["snapshot"] = snapshot;
  fields["format"] = checkpoint_format_name(verdict.format);
  fields["size_bytes"] = verdict.size_bytes;
  fields["content_hash"] = verdict.content_hash;
  fields["step"] = verdict.step ? json::Value(*verdict.step) : json::Value();
  fields["modified"] = job::journal_time(verdict.modified);
  if (!m_recorder.record("checkpoint_committed", std::move(fields))) {
    // Not durable, so not committed: forget it so the next scan tries again.
    m_scanner.forget(verdict.path);
    return;
  }
  if (m_hooks.on_committed) {
    const job::CommittedCheckpoint committed =
        m_recorder.state().checkpoints.back();  // a copy: hooks record too
    m_hooks.on_committed(committed, verdict.modified);
  }
}

void CheckpointLedger::pick_up_pins() {
  std::error_code ec;
  fs::path pins = m_paths.dir / "pins";
  if (!fs::is_directory(pins, ec)) return;
  for (const auto& entry : fs::directory_iterator(pins, ec)) {
    std::string id = entry.path().filename().string();
    const auto& checkpoints = m_recorder.state().checkpoints;
    bool known = std::any_of(checkpoints.begin(), checkpoints.end(),
                             [&](const job::CommittedCheckpoint& c) { return c.id == id && !c.pinned; });
    if (known) {
      json::Value fields = json::Value::object();
      fields["id"] = id;
      if (!m_recorder.record("checkpoint_pinned", std::move(fields))) continue;
    }
    fs::remove(entry.path(), ec);
  }
}

// Keeps the newest `keep` committed checkpoints (pinned ones are kept on top) and deletes the
// rest: the trainer's file or directory and gpuhost's snapshot. Only paths inside the checkpoint
// location are ever deleted.
void CheckpointLedger::apply_retention() {
  pick_up_pins();
  if (m_spec.keep <= 0) return;
  std::vector<const job::CommittedCheckpoint*> live;
  for (const auto& c : m_recorder.state().checkpoints)
    if (c.status == job::CheckpointStatus::committed && !c.pinned) live.push_back(&c);
  if (live.size() <= static_cast<std::size_t>(m_spec.keep)) return;
  std::vector<job::CommittedCheckpoint> doomed;
  for (std::size_t i = 0; i + static_cast<std::size_t>(m_spec.keep) < live.size(); ++i) doomed.push_back(*live[i]);

  std::error_code ec;
  const fs::path root = fs::weakly_canonical(m_spec.checkpoint_location, ec);
  for (const auto& c : doomed) {
    fs::path path = fs::weakly_canonical(c.path, ec);
    auto [root_end, path_it] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
    bool inside = root_end == root.end() && path != root;
    // A file rewritten in place (last.pt) is still the trainer's newest: only its snapshot goes.
    const auto& checkpoints = m_recorder.state().checkpoints;
    bool shared_path = std::any_of(checkpoints.begin(), checkpoints.end(), [&](const auto& other) {
      return other.id != c.id && other.path == c.path && other.status == job::CheckpointStatus::committed &&
             std::none_of(doomed.begin(), doomed.end(), [&](const auto& d) { return d.id == other.id; });
    });
    if (inside && !shared_path) {
      fs::remove_all(path, ec);
      if (ec && fs::exists(path)) {
        m_undeleted.push_back(path);  // in use (an upload reading it on Windows): tried again later
      } else {
        m_scanner.forget(path);
      }
    }
    if (!c.snapshot.empty()) fs::remove(c.snapshot, ec);
    json::Value fields = json::Value::object();
    fields["id"] = c.id;
    fields["reason"] = "retention (keep " + std::to_string(m_spec.keep) + ")";
    m_recorder.record("checkpoint_retired", std::move(fields));
    if (m_hooks.on_retired) m_hooks.on_retired(c);
  }
}

ResumePoint CheckpointLedger::choose_resume_point(
    const std::function<bool(const job::CommittedCheckpoint&)>& eligible) {
  for (;;) {
    auto candidates = job::resume_candidates(m_recorder.state());
    if (eligible) std::erase_if(candidates, [&](const job::CommittedCheckpoint* c) { return !eligible(*c); });
    if (candidates.empty()) return {};
    const job::CommittedCheckpoint c = *candidates.front();
    std::string problem;
    for (const std::string& path : {c.path, c.snapshot}) {
      if (path.empty()) continue;
      auto verdict = validate_checkpoint(path, ValidationDepth::full);
      if (!verdict) {
        problem = verdict.error().message;
      } else if (!verdict->valid) {
        problem = verdict->problem;
      } else if (verdict->content_hash != c.content_hash) {
        problem = "its content changed since it was committed (" + verdict->content_hash + ", committed " +
                  c.content_hash + ")";
      } else {
        return {c.id, path};
      }
    }
    json::Value fields = json::Value::object();
    fields["id"] = c.id;
    fields["reason"] = "re-validation before resume failed: " + problem;
    if (!m_recorder.record("checkpoint_bad", std::move(fields))) return {};  // cannot record: resume from nothing
  }
}

}  // namespace gpuhost::supervise
