#include "supervise/job_mirror.h"

#include <algorithm>
#include <map>
#include <system_error>
#include <utility>

#include "base/strings.h"
#include "crypt/cipher_suite.h"
#include "crypt/encryption_key.h"
#include "platform/environment.h"
#include "platform/termination.h"
#include "store/store.h"
#include "supervise/remote_checkpoint.h"
#include "supervise/remote_probe.h"

namespace gpuhost::supervise {

namespace fs = std::filesystem;
using SystemClock = std::chrono::system_clock;
using SteadyClock = std::chrono::steady_clock;
using std::chrono::milliseconds;

JobMirror::JobMirror(JobRecorder& recorder, const JobSpec& spec, const job::JobPaths& paths,
                     std::string scope, std::unique_ptr<Mirror> mirror)
    : m_recorder(recorder),
      m_spec(spec),
      m_paths(paths),
      m_scope(std::move(scope)),
      m_mirror(std::move(mirror)) {}

Result<std::vector<std::int64_t>> durable_remote_steps(const JobSpec& spec, const std::string& scope) {
  RemoteSettings settings = GPUHOST_TRY(load_remote_settings(spec));
  const crypt::EncryptionKey* key = settings.key ? &*settings.key : nullptr;
  auto entries = GPUHOST_TRY(list_remote_checkpoints(*settings.store, scope, key));
  std::vector<std::int64_t> steps;
  for (const RemoteEntry& entry : entries)
    if (entry.manifest && entry.manifest->step) steps.push_back(*entry.manifest->step);
  return steps;
}

Result<std::unique_ptr<JobMirror>> JobMirror::start(JobRecorder& recorder, const JobSpec& spec,
                                                    const job::JobPaths& paths, std::string scope) {
  MirrorOptions options;
  options.job = scope;
  RemoteSettings settings = GPUHOST_TRY(load_remote_settings(spec));
  options.store = std::move(settings.store);
  // Tuning for tests and slow links: objects above this many MiB go in parts of this size
  // (S3's minimum part is 5 MiB; transfer.h clamps).
  if (auto mib = platform::get_env("GPUHOST_MIRROR_PART_MIB")) {
    if (auto value = parse_int(*mib); value && *value > 0) {
      options.upload.part_size = static_cast<std::uint64_t>(*value) << 20;
      options.upload.multipart_threshold = options.upload.part_size;
    }
  }
  if (settings.key) options.key.emplace(std::move(*settings.key));
  // The trainer never needs the key: it is not passed on in its environment.
  platform::unset_env(crypt::k_key_env);
  if (settings.suite) options.suite = *settings.suite;
  options.encrypt = settings.suite.has_value();  // else a key only for reading what is there
  auto mirror = std::make_unique<Mirror>(std::move(options));
  // Before any upload of ours starts: what a crash left behind and no journal record continues.
  std::set<std::string> keep;
  for (const job::PendingUpload& upload : recorder.state().pending_uploads) keep.insert(upload.upload_id);
  mirror->abort_stale_uploads(std::move(keep));
  return std::unique_ptr<JobMirror>(new JobMirror(recorder, spec, paths, std::move(scope), std::move(mirror)));
}

void JobMirror::restore(std::optional<std::int64_t> exact_step) {
  // A copy: every record() changes the state.
  std::optional<job::CommittedCheckpoint> local;
  if (auto live = job::resume_candidates(m_recorder.state()); !live.empty()) local = *live.front();
  auto newer_than_local = [&](const CheckpointManifest& manifest) {
    if (!local) return true;
    if (manifest.step && local->step) return *manifest.step > *local->step;
    // Both are RFC 3339 UTC with milliseconds, so they compare as text; the hosts' clocks are
    // assumed to be in sync (NTP), as every cloud's are.
    return !local->modified.empty() && manifest.created_at > local->modified;
  };
  const crypt::EncryptionKey* key = m_mirror->key();
  auto entries = list_remote_checkpoints(m_mirror->object_store(), m_scope, key);
  if (!entries) {
    m_recorder.message("listing remote checkpoints in " + m_mirror->object_store().describe() + ": " + entries.error().message);
    return;
  }
  std::error_code ec;
  const fs::path location = m_spec.checkpoint_location;
  for (const RemoteEntry& entry : *entries) {
    if (!entry.manifest) {
      const std::string error = "remote checkpoint " + entry.key + " skipped: " + entry.problem;
      if (local) {
        m_recorder.message(error);  // training goes on from the local one: not worth a record at every start
        continue;
      }
      json::Value fields = json::Value::object();
      fields["error"] = error;
      m_recorder.record("mirror_failed", std::move(fields));
      continue;
    }
    const CheckpointManifest& manifest = *entry.manifest;
    if (exact_step ? manifest.step != exact_step : !newer_than_local(manifest)) continue;
    if (std::any_of(
            m_recorder.state().checkpoints.begin(), m_recorder.state().checkpoints.end(),
            [&](const job::CommittedCheckpoint& c) { return c.content_hash == manifest.content_hash; }))
      continue;
    // A single-file location (weights/last.pt) is the file itself; else the name goes inside.
    fs::path destination = location / fs::path(manifest.name);
    if (!manifest.directory && location.filename() == fs::path(manifest.name) && !fs::is_directory(location, ec))
      destination = location;
    if (fs::exists(destination, ec)) {
      m_recorder.message("not restoring " + manifest.remote_id + ": " + destination.string() + " exists");
      continue;
    }
    auto pulled = pull_checkpoint(m_mirror->object_store(), manifest, key, destination);
    if (!pulled) {
      json::Value fields = json::Value::object();
      fields["error"] = "restoring " + manifest.remote_id + ": " + pulled.error().message;
      m_recorder.record("mirror_failed", std::move(fields));
      continue;
    }
    json::Value fields = json::Value::object();
    fields["remote_id"] = manifest.remote_id;
    fields["store"] = m_mirror->object_store().describe();
    fields["path"] = pulled->string();
    fields["step"] = manifest.step ? json::Value(*manifest.step) : json::Value();
    fields["content_hash"] = manifest.content_hash;
    fields["encrypted"] = !manifest.suite.empty();
    m_recorder.record("checkpoint_restored", std::move(fields));
    return;
  }
}

void JobMirror::resume_pending() {
  std::set<std::string> resumed;
  for (const job::PendingUpload& upload : m_recorder.state().pending_uploads)
    resumed.insert(upload.checkpoint_id);
  std::vector<job::CommittedCheckpoint> wanted;  // copies: committed() may append records
  auto live = job::resume_candidates(m_recorder.state());
  for (auto it = live.rbegin(); it != live.rend(); ++it)
    if ((*it)->remote_id.empty() && (resumed.contains((*it)->id) || *it == live.front())) wanted.push_back(**it);
  for (const job::CommittedCheckpoint& c : wanted)
    if (!m_queued.contains(c.id)) committed(c);
}

void JobMirror::committed(const job::CommittedCheckpoint& c) {
  for (const job::RestoredCheckpoint& restored : m_recorder.state().restored) {
    if (restored.content_hash != c.content_hash) continue;
    // These bytes came from the remote: they are durable there already.
    json::Value fields = json::Value::object();
    fields["id"] = c.id;
    fields["remote_id"] = restored.remote_id;
    fields["step"] = c.step ? json::Value(*c.step) : json::Value();
    fields["bytes"] = c.size_bytes;
    fields["manifest"] = manifest_key(m_scope, restored.remote_id);
    fields["restored"] = true;
    m_recorder.record("mirror_durable", std::move(fields));
    return;
  }
  m_queued.insert(c.id);
  PushRequest request;
  request.job = m_scope;
  request.remote_id = remote_checkpoint_id(c.step, c.content_hash);
  request.checkpoint_id = c.id;
  request.source = job::resume_path(c);
  fs::path relative = fs::path(c.path).lexically_relative(m_spec.checkpoint_location);
  request.name = relative.empty() || relative.native().starts_with(fs::path("..").native()) || relative == "."
                     ? fs::path(c.path).filename().generic_string()
                     : relative.generic_string();
  request.format = c.format;
  request.step = c.step;
  request.content_hash = c.content_hash;
  request.staging = m_paths.dir / "mirror" / request.remote_id;
  std::map<std::string, ResumableUpload> resume;
  for (const job::PendingUpload& upload : m_recorder.state().pending_uploads) {
    if (upload.checkpoint_id != c.id) continue;
    ResumableUpload& r = resume[upload.object];
    r.upload_id = upload.upload_id;
    for (const auto& part : upload.parts) r.parts.push_back(store::PartInfo{part.number, part.etag, part.size, part.sha256});
  }
  m_mirror->enqueue_upload(std::move(request), std::move(resume));
}

void JobMirror::retired(const job::CommittedCheckpoint& c) {
  std::vector<std::pair<std::string, std::string>> uploads;
  for (const job::PendingUpload& upload : m_recorder.state().pending_uploads)
    if (upload.checkpoint_id == c.id) uploads.emplace_back(upload.object, upload.upload_id);
  m_mirror->retire(c.id, c.remote_id, uploads);
}

void JobMirror::pump() {
  for (MirrorEvent& event : m_mirror->take_events()) {
    if (event.type == "mirror_failed") {
      m_last_error = event.fields.get_string("error");
      if (m_last_error.size() > 300) m_last_error = m_last_error.substr(0, 300) + "...";
    }
    m_recorder.record(event.type, std::move(event.fields));
  }
}

bool JobMirror::wait(const std::function<bool()>& done, std::optional<SystemClock::time_point> until) {
  for (;;) {
    pump();
    if (done()) return true;
    if (until && SystemClock::now() >= *until) return false;
    if (platform::wait_termination_request(milliseconds(100))) return false;
  }
}

void JobMirror::wait_for_newest(SystemClock::time_point deadline) {
  auto candidates = job::resume_candidates(m_recorder.state());
  if (!candidates.empty()) {
    const std::string id = candidates.front()->id;
    const auto began = SteadyClock::now();
    auto durable = [&] {
      for (const auto& c : m_recorder.state().checkpoints)
        if (c.id == id) return !c.remote_id.empty();
      return false;
    };
    bool in_time = wait(durable, deadline - std::chrono::seconds(1));
    json::Value fields = json::Value::object();
    fields["id"] = id;
    fields["durable"] = in_time;
    fields["waited_ms"] = std::chrono::duration_cast<milliseconds>(SteadyClock::now() - began).count();
    m_recorder.record("mirror_deadline", std::move(fields));
  }
}

void JobMirror::drain(milliseconds timeout) {
  if (!m_mirror->idle())
    m_recorder.message("waiting up to " + std::to_string((timeout.count() + 500) / 1000) +
                       " s for the remote mirror to finish uploading (--final-upload-timeout)");
  wait([&] { return m_mirror->idle(); }, SystemClock::now() + timeout);
}

JobMirror::Ending JobMirror::stop() {
  m_mirror->stop();
  pump();
  Ending ending;
  ending.last_error = m_last_error;
  for (const job::CommittedCheckpoint* c : job::resume_candidates(m_recorder.state()))
    if (c->remote_id.empty() && m_queued.contains(c->id)) ending.undurable.push_back(c->id);
  std::reverse(ending.undurable.begin(), ending.undurable.end());  // in commit order
  if (!ending.undurable.empty()) {
    json::Value fields = json::Value::object();
    json::Value ids = json::Value::array();
    for (const std::string& id : ending.undurable) ids.push_back(id);
    fields["ids"] = std::move(ids);
    fields["error"] = m_last_error;
    m_recorder.record("mirror_incomplete", std::move(fields));
  }
  return ending;
}

}  // namespace gpuhost::supervise
