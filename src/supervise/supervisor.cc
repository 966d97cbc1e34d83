#include "supervise/supervisor.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <mutex>
#include <random>
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
#include "store/store.h"
#include "supervise/checkpoint_scanner.h"
#include "supervise/mirror.h"
#include "supervise/output_log.h"
#include "supervise/snapshot.h"
#include "supervise/stop_controller.h"
#include "supervise/training_metrics.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;
using SystemClock = std::chrono::system_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

constexpr const char* k_run_token_variable = "GPUHOST_RUN_TOKEN";

// A disk with less than this free (or less than the newest checkpoint's size) is reported when
// the trainer fails: the usual cause of a crash in the middle of a save.
constexpr std::uint64_t k_low_disk_bytes = 256ull << 20;

std::string random_token() {
  std::random_device device;
  std::string token;
  const char* digits = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) token += digits[device() % 16];
  return token;
}

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

class Supervisor {
 public:
  Supervisor(const SupervisorOptions& options, JobSpec spec, JobPaths paths, Journal journal)
      : m_options(options), m_spec(std::move(spec)), m_paths(std::move(paths)), m_journal(std::move(journal)),
        m_stdout_log(m_paths.logs() / "stdout.log"), m_stderr_log(m_paths.logs() / "stderr.log"),
        m_scanner(ScannerOptions{m_spec.checkpoint_location, m_spec.settle, m_spec.marker, m_spec.ignore}),
        m_stop(StopTiming{m_spec.safety_margin, m_spec.stop_grace}) {
    m_state = fold_journal(m_journal.contents().records);
  }

  Result<SupervisorResult> run();

 private:
  // Journal access. record() returns false (and says so once) when the journal cannot be written:
  // supervision goes on, but nothing unrecorded is ever treated as committed.
  bool record(std::string_view type, json::Value fields);
  void message(std::string_view text) const {
    if (m_options.on_message) m_options.on_message(text);
  }

  void start_watcher();
  void start_training_metrics();
  void record_progress(bool now = false);
  void prime_scanner();
  void scan_checkpoints(bool settle_now);
  void commit(const CheckpointVerdict& verdict);
  void apply_retention();
  void pick_up_pins();
  // --fresh: what is on disk now is seen but not committed, what earlier runs committed is
  // retired, so nothing is resumed from.
  void ignore_present_checkpoints();
  // A new job that found checkpoints in its folder says so, with the one it resumes from.
  void announce_present_checkpoints();

  struct ResumePoint {
    std::optional<std::string> id;
    std::optional<std::string> path;
  };
  ResumePoint choose_resume_point();
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
  void check_disk_after_failure();
  std::optional<StopReason> wait_between_attempts(milliseconds delay);
  SupervisorResult finish(Outcome outcome, std::string reason);
  // After a stop: which checkpoint was saved, or what is lost and where a rerun resumes.
  std::string stop_report() const;

  // The remote mirror (doc/remote-store.md); all no-ops without one.
  Result<void> start_mirror();
  void restore_from_remote();
  void mirror_committed(const CommittedCheckpoint& checkpoint);
  void pump_mirror();
  // Waits (journalling the mirror's progress) until `done` or `until`; false on timeout or a
  // termination request.
  bool wait_for_mirror(const std::function<bool()>& done, std::optional<SystemClock::time_point> until);
  void acknowledge_notice();
  void report_remote_deadline();

  const SupervisorOptions& m_options;
  JobSpec m_spec;
  JobPaths m_paths;
  Journal m_journal;
  RotatingLog m_stdout_log;
  RotatingLog m_stderr_log;
  CheckpointScanner m_scanner;
  JobState m_state;
  NoticeInbox m_inbox;
  std::unique_ptr<NoticeWatcher> m_watcher;
  bool m_journal_failed = false;
  std::string m_run_token;
  int m_attempt_number = 0;
  std::optional<SteadyClock::time_point> m_first_start;
  std::vector<bool> m_drills_done;
  std::chrono::microseconds m_child_cpu{0};
  std::uint64_t m_child_peak_rss = 0;
  std::unique_ptr<TrainingMetricsRecorder> m_metrics;  // null with training_metrics off
  std::unique_ptr<Mirror> m_mirror;                    // null without a remote
  std::set<std::string> m_mirror_queued;               // checkpoint ids handed to the mirror
  std::string m_last_mirror_error;                     // of the newest mirror_failed, shortened
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

void merge(StopActions& into, const StopActions& more) {
  into.request_save |= more.request_save;
  into.send_stop |= more.send_stop;
  into.kill |= more.kill;
  into.save_completed |= more.save_completed;
  into.save_timed_out |= more.save_timed_out;
  into.resume_training |= more.resume_training;
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

bool Supervisor::record(std::string_view type, json::Value fields) {
  auto appended = m_journal.append(type, std::move(fields));
  if (!appended) {
    if (!m_journal_failed) message("cannot write the job journal: " + appended.error().message);
    m_journal_failed = true;
    return false;
  }
  m_journal_failed = false;
  // Only the new record: re-folding the whole journal made every append cost O(records).
  fold_more(m_state, std::span<const JournalRecord>(*appended, 1));
  if (m_options.on_record) m_options.on_record(**appended);
  return true;
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

// Checkpoints committed by an earlier supervisor that are unchanged on disk are not hashed
// again; anything else on disk is found, validated and committed by the first scans.
void Supervisor::prime_scanner() {
  for (const auto& record : m_journal.contents().records) {
    if (record.type != "checkpoint_committed") continue;
    fs::path path = record.fields.get_string("path");
    auto verdict = validate_checkpoint(path, ValidationDepth::structure);
    if (!verdict || !verdict->valid) continue;
    if (verdict->size_bytes != static_cast<std::uint64_t>(record.fields.get_int("size_bytes", -1))) continue;
    if (journal_time(verdict->modified) != record.fields.get_string("modified")) continue;
    verdict->content_hash = record.fields.get_string("content_hash");  // structure depth has none
    m_scanner.mark_seen(path, *verdict);
  }
}

void Supervisor::scan_checkpoints(bool settle_now) {
  auto now = SteadyClock::now();
  auto scanned = m_scanner.scan(now);
  if (settle_now && scanned) {
    // The child has exited: nothing is being written any more, so what is there has settled.
    auto again = m_scanner.scan(now + m_spec.settle + milliseconds(1));
    if (again) {
      scanned->ready.insert(scanned->ready.end(), again->ready.begin(), again->ready.end());
      scanned->rejected.insert(scanned->rejected.end(), again->rejected.begin(), again->rejected.end());
    }
  }
  if (!scanned) {
    message("scanning " + m_spec.checkpoint_location.string() + ": " + scanned.error().message);
    return;
  }
  for (const auto& verdict : scanned->rejected) {
    json::Value fields = json::Value::object();
    fields["path"] = verdict.path.string();
    fields["format"] = checkpoint_format_name(verdict.format);
    fields["problem"] = verdict.problem;
    record("checkpoint_rejected", std::move(fields));
  }
  for (const auto& verdict : scanned->ready) commit(verdict);
  if (!scanned->ready.empty()) apply_retention();
}

void Supervisor::commit(const CheckpointVerdict& verdict) {
  std::string path = verdict.path.string();
  for (const auto& existing : m_state.checkpoints)
    if (existing.path == path && existing.content_hash == verdict.content_hash &&
        existing.status != CheckpointStatus::retired)
      return;  // already committed (an earlier supervisor did, or the file was touched)

  std::string snapshot;
  if (wants_snapshot(m_options.snapshots, verdict)) {
    auto copied = take_snapshot(verdict, m_paths.snapshots());
    if (copied) {
      snapshot = copied->string();
    } else {
      message("could not copy " + path + " into the job's snapshots: " + copied.error().message +
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
  fields["modified"] = journal_time(verdict.modified);
  if (!record("checkpoint_committed", std::move(fields))) {
    // Not durable, so not committed: forget it so the next scan tries again.
    m_scanner.forget(verdict.path);
    return;
  }
  mirror_committed(m_state.checkpoints.back());
  if (!m_checkpoint_writes.empty() && verdict.modified >= m_checkpoint_writes.front())
    m_checkpoint_writes.push_back(verdict.modified);
  const auto received = m_stop.received();
  StopActions actions = m_stop.checkpoint_committed(verdict.modified, SteadyClock::now());
  if (actions.save_completed) {
    const std::string id = m_state.checkpoints.back().id;
    m_saved_id = id;
    json::Value done = json::Value::object();
    done["id"] = id;
    done["duration_ms"] = received ? to_ms(SteadyClock::now() - *received) : 0;
    done["written"] = journal_time(verdict.modified);
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

Result<void> Supervisor::start_mirror() {
  if (m_spec.remote.empty()) return {};
  MirrorOptions options;
  options.job = m_spec.name;
  options.store = GPUHOST_TRY(store::open_store(m_spec.remote));
  // Tuning for tests and slow links: objects above this many MiB go in parts of this size
  // (S3's minimum part is 5 MiB; transfer.h clamps).
  if (auto mib = platform::get_env("GPUHOST_MIRROR_PART_MIB")) {
    if (auto value = parse_int(*mib); value && *value > 0) {
      options.upload.part_size = static_cast<std::uint64_t>(*value) << 20;
      options.upload.multipart_threshold = options.upload.part_size;
    }
  }
  const bool have_key_source = m_spec.encryption_key_file || platform::get_env(crypt::k_key_file_env) ||
                               platform::get_env(crypt::k_key_env);
  if (!m_spec.encrypt.empty() || have_key_source) {
    auto key = crypt::load_encryption_key(m_spec.encryption_key_file);
    if (!key) return std::unexpected(with_context(key.error(), "loading the encryption key"));
    options.key.emplace(std::move(*key));
  }
  // The trainer never needs the key: it is not passed on in its environment.
  platform::unset_env(crypt::k_key_env);
  if (!m_spec.encrypt.empty()) options.suite = GPUHOST_TRY(crypt::choose_suite(m_spec.encrypt));
  options.encrypt = !m_spec.encrypt.empty();  // else a key only for reading what is there
  m_mirror = std::make_unique<Mirror>(std::move(options));
  // Before any upload of ours starts: what a crash left behind and no journal record continues.
  std::set<std::string> keep;
  for (const PendingUpload& upload : m_state.pending_uploads) keep.insert(upload.upload_id);
  m_mirror->abort_stale_uploads(std::move(keep));
  return {};
}

// The newest remote checkpoint that authenticates and verifies is downloaded into the checkpoint
// location (the next scan commits it) when nothing is committed locally, or when it is newer
// than the checkpoint training would resume from: another host trained further. Newer means a
// higher step; without a step on both sides, an upload that ended after the local checkpoint was
// last written. Bytes this journal already knows (uploaded from here, or marked bad here) are
// never fetched again and nothing local is ever replaced: when no newer one can be restored (a
// full disk included), training resumes from the local checkpoint.
void Supervisor::restore_from_remote() {
  if (!m_mirror) return;
  // A copy: every record() folds m_state afresh.
  std::optional<CommittedCheckpoint> local;
  if (auto live = resume_candidates(m_state); !live.empty()) local = *live.front();
  auto newer_than_local = [&](const CheckpointManifest& manifest) {
    if (!local) return true;
    if (manifest.step && local->step) return *manifest.step > *local->step;
    // Both are RFC 3339 UTC with milliseconds, so they compare as text; the hosts' clocks are
    // assumed to be in sync (NTP), as every cloud's are.
    return !local->modified.empty() && manifest.created_at > local->modified;
  };
  const crypt::EncryptionKey* key = m_mirror->key();
  auto entries = list_remote_checkpoints(m_mirror->object_store(), m_spec.name, key);
  if (!entries) {
    message("listing remote checkpoints in " + m_mirror->object_store().describe() + ": " + entries.error().message);
    return;
  }
  std::error_code ec;
  const fs::path location = m_spec.checkpoint_location;
  for (const RemoteEntry& entry : *entries) {
    if (!entry.manifest) {
      const std::string error = "remote checkpoint " + entry.key + " skipped: " + entry.problem;
      if (local) {
        message(error);  // training goes on from the local one: not worth a record at every start
        continue;
      }
      json::Value fields = json::Value::object();
      fields["error"] = error;
      record("mirror_failed", std::move(fields));
      continue;
    }
    const CheckpointManifest& manifest = *entry.manifest;
    if (!newer_than_local(manifest)) continue;
    if (std::any_of(m_state.checkpoints.begin(), m_state.checkpoints.end(),
                    [&](const CommittedCheckpoint& c) { return c.content_hash == manifest.content_hash; }))
      continue;
    // A single-file location (weights/last.pt) is the file itself; else the name goes inside.
    fs::path destination = location / fs::path(manifest.name);
    if (!manifest.directory && location.filename() == fs::path(manifest.name) && !fs::is_directory(location, ec))
      destination = location;
    if (fs::exists(destination, ec)) {
      message("not restoring " + manifest.remote_id + ": " + destination.string() + " exists");
      continue;
    }
    auto pulled = pull_checkpoint(m_mirror->object_store(), manifest, key, destination);
    if (!pulled) {
      json::Value fields = json::Value::object();
      fields["error"] = "restoring " + manifest.remote_id + ": " + pulled.error().message;
      record("mirror_failed", std::move(fields));
      continue;
    }
    json::Value fields = json::Value::object();
    fields["remote_id"] = manifest.remote_id;
    fields["store"] = m_mirror->object_store().describe();
    fields["path"] = pulled->string();
    fields["step"] = manifest.step ? json::Value(*manifest.step) : json::Value();
    fields["content_hash"] = manifest.content_hash;
    fields["encrypted"] = !manifest.suite.empty();
    record("checkpoint_restored", std::move(fields));
    return;
  }
}

void Supervisor::mirror_committed(const CommittedCheckpoint& c) {
  if (!m_mirror) return;
  for (const RestoredCheckpoint& restored : m_state.restored) {
    if (restored.content_hash != c.content_hash) continue;
    // These bytes came from the remote: they are durable there already.
    json::Value fields = json::Value::object();
    fields["id"] = c.id;
    fields["remote_id"] = restored.remote_id;
    fields["step"] = c.step ? json::Value(*c.step) : json::Value();
    fields["bytes"] = c.size_bytes;
    fields["manifest"] = manifest_key(m_spec.name, restored.remote_id);
    fields["restored"] = true;
    record("mirror_durable", std::move(fields));
    return;
  }
  m_mirror_queued.insert(c.id);
  PushRequest request;
  request.job = m_spec.name;
  request.remote_id = remote_checkpoint_id(c.step, c.content_hash);
  request.checkpoint_id = c.id;
  request.source = resume_path(c);
  fs::path relative = fs::path(c.path).lexically_relative(m_spec.checkpoint_location);
  request.name = relative.empty() || relative.native().starts_with(fs::path("..").native()) || relative == "."
                     ? fs::path(c.path).filename().generic_string()
                     : relative.generic_string();
  request.format = c.format;
  request.step = c.step;
  request.content_hash = c.content_hash;
  request.staging = m_paths.dir / "mirror" / request.remote_id;
  std::map<std::string, ResumableUpload> resume;
  for (const PendingUpload& upload : m_state.pending_uploads) {
    if (upload.checkpoint_id != c.id) continue;
    ResumableUpload& r = resume[upload.object];
    r.upload_id = upload.upload_id;
    for (const auto& part : upload.parts) r.parts.push_back(store::PartInfo{part.number, part.etag, part.size, part.sha256});
  }
  m_mirror->enqueue_upload(std::move(request), std::move(resume));
}

void Supervisor::pump_mirror() {
  if (!m_mirror) return;
  for (MirrorEvent& event : m_mirror->take_events()) {
    if (event.type == "mirror_failed") {
      m_last_mirror_error = event.fields.get_string("error");
      if (m_last_mirror_error.size() > 300) m_last_mirror_error = m_last_mirror_error.substr(0, 300) + "...";
    }
    record(event.type, std::move(event.fields));
  }
}

bool Supervisor::wait_for_mirror(const std::function<bool()>& done, std::optional<SystemClock::time_point> until) {
  for (;;) {
    pump_mirror();
    if (done()) return true;
    if (until && SystemClock::now() >= *until) return false;
    if (platform::wait_termination_request(milliseconds(100))) return false;
  }
}

// On a preemption: waits for the newest committed checkpoint to become durable remotely, up to
// the notice's deadline (less a second to acknowledge), journals whether it did, then lets the
// cloud go ahead.
void Supervisor::report_remote_deadline() {
  if (!m_mirror || !m_notice) return;
  auto candidates = resume_candidates(m_state);
  if (!candidates.empty()) {
    const std::string id = candidates.front()->id;
    const auto began = SteadyClock::now();
    auto durable = [&] {
      for (const auto& c : m_state.checkpoints)
        if (c.id == id) return !c.remote_id.empty();
      return false;
    };
    bool in_time = wait_for_mirror(durable, m_notice->deadline - std::chrono::seconds(1));
    json::Value fields = json::Value::object();
    fields["id"] = id;
    fields["durable"] = in_time;
    fields["waited_ms"] = to_ms(SteadyClock::now() - began);
    record("mirror_deadline", std::move(fields));
  }
  if (m_ack_pending) acknowledge_notice();
}

void Supervisor::ignore_present_checkpoints() {
  m_scanner.ignore_present();
  std::vector<std::string> ids;
  for (const CommittedCheckpoint* c : resume_candidates(m_state)) ids.push_back(c->id);
  for (const std::string& id : ids) {
    json::Value fields = json::Value::object();
    fields["id"] = id;
    fields["reason"] = "--fresh: not resumed from";
    record("checkpoint_retired", std::move(fields));
  }
}

void Supervisor::announce_present_checkpoints() {
  auto live = resume_candidates(m_state);
  if (live.empty()) return;
  json::Value fields = json::Value::object();
  fields["count"] = live.size();
  fields["location"] = m_spec.checkpoint_location.string();
  fields["newest"] = live.front()->id;
  fields["path"] = live.front()->path;
  fields["step"] = live.front()->step ? json::Value(*live.front()->step) : json::Value();
  record("checkpoints_found", std::move(fields));
}

void Supervisor::pick_up_pins() {
  std::error_code ec;
  fs::path pins = m_paths.dir / "pins";
  if (!fs::is_directory(pins, ec)) return;
  for (const auto& entry : fs::directory_iterator(pins, ec)) {
    std::string id = entry.path().filename().string();
    bool known = std::any_of(m_state.checkpoints.begin(), m_state.checkpoints.end(),
                             [&](const CommittedCheckpoint& c) { return c.id == id && !c.pinned; });
    if (known) {
      json::Value fields = json::Value::object();
      fields["id"] = id;
      if (!record("checkpoint_pinned", std::move(fields))) continue;
    }
    fs::remove(entry.path(), ec);
  }
}

// Keeps the newest `keep` committed checkpoints (pinned ones are kept on top) and deletes the
// rest: the trainer's file or directory and gpuhost's snapshot. Only paths inside the checkpoint
// location are ever deleted.
void Supervisor::apply_retention() {
  pick_up_pins();
  if (m_spec.keep <= 0) return;
  std::vector<const CommittedCheckpoint*> live;
  for (const auto& c : m_state.checkpoints)
    if (c.status == CheckpointStatus::committed && !c.pinned) live.push_back(&c);
  if (live.size() <= static_cast<std::size_t>(m_spec.keep)) return;
  std::vector<CommittedCheckpoint> doomed;
  for (std::size_t i = 0; i + static_cast<std::size_t>(m_spec.keep) < live.size(); ++i) doomed.push_back(*live[i]);

  std::error_code ec;
  const fs::path root = fs::weakly_canonical(m_spec.checkpoint_location, ec);
  for (const auto& c : doomed) {
    fs::path path = fs::weakly_canonical(c.path, ec);
    auto [root_end, path_it] = std::mismatch(root.begin(), root.end(), path.begin(), path.end());
    bool inside = root_end == root.end() && path != root;
    // A file rewritten in place (last.pt) is still the trainer's newest: only its snapshot goes.
    bool shared_path = std::any_of(m_state.checkpoints.begin(), m_state.checkpoints.end(), [&](const auto& other) {
      return other.id != c.id && other.path == c.path && other.status == CheckpointStatus::committed &&
             std::none_of(doomed.begin(), doomed.end(), [&](const auto& d) { return d.id == other.id; });
    });
    if (inside && !shared_path) {
      fs::remove_all(path, ec);
      m_scanner.forget(path);
    }
    if (!c.snapshot.empty()) fs::remove(c.snapshot, ec);
    json::Value fields = json::Value::object();
    fields["id"] = c.id;
    fields["reason"] = "retention (keep " + std::to_string(m_spec.keep) + ")";
    record("checkpoint_retired", std::move(fields));
    if (m_mirror) {
      std::vector<std::pair<std::string, std::string>> uploads;
      for (const PendingUpload& upload : m_state.pending_uploads)
        if (upload.checkpoint_id == c.id) uploads.emplace_back(upload.object, upload.upload_id);
      m_mirror->retire(c.id, c.remote_id, uploads);
    }
  }
}

// The newest committed checkpoint whose bytes still hash to what was committed; each one that
// fails is marked bad (with the reason) and never offered again.
Supervisor::ResumePoint Supervisor::choose_resume_point() {
  for (;;) {
    auto candidates = resume_candidates(m_state);
    if (candidates.empty()) return {};
    const CommittedCheckpoint c = *candidates.front();
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
    if (!record("checkpoint_bad", std::move(fields))) return {};  // cannot record: resume from nothing
  }
}

Result<platform::ChildProcess> Supervisor::launch(const ResumePoint& resume) {
  auto argv = GPUHOST_TRY(resume_command(m_spec.command, m_spec.preset, resume.path));
  platform::ChildOptions child;
  child.argv = argv;
  child.working_directory = m_spec.working_directory;
  child.environment = m_spec.environment;
  auto set = [&](std::string name, std::string value) { child.environment.emplace_back(std::move(name), std::move(value)); };
  ++m_attempt_number;
  m_run_token = random_token();
  set("GPUHOST_JOB", m_spec.name);
  set("GPUHOST_JOB_DIR", m_paths.dir.string());
  set(k_run_token_variable, m_run_token);
  set("GPUHOST_ATTEMPT", std::to_string(m_state.child_starts + 1));
  if (resume.path) set("GPUHOST_RESUME_FROM", *resume.path);
  if (m_spec.save_request == JobSpec::SaveRequest::file || m_spec.save_request == JobSpec::SaveRequest::both)
    set("GPUHOST_SAVE_REQUEST", m_paths.save_request().string());
  // Python buffers stdout when it is a pipe: without this the console shows nothing for minutes.
  if (!platform::get_env("PYTHONUNBUFFERED")) set("PYTHONUNBUFFERED", "1");
  if (!m_metrics_channel.empty() && !platform::get_env("GPUHOST_METRICS_FILE") &&
      std::none_of(m_spec.environment.begin(), m_spec.environment.end(),
                   [](const auto& entry) { return entry.first == "GPUHOST_METRICS_FILE"; }))
    set("GPUHOST_METRICS_FILE", m_metrics_channel.string());
  if (m_metrics) m_metrics->child_started();
  child.on_output = [this](platform::OutputStream stream, std::string_view chunk) {
    (stream == platform::OutputStream::out ? m_stdout_log : m_stderr_log).write(chunk);
    if (m_metrics) m_metrics->on_output(stream, chunk);
    if (m_options.echo) m_options.echo(stream, chunk);
  };
  std::error_code ec;
  fs::remove(m_paths.save_request(), ec);

  // The token is durable before the attempt exists: a supervisor killed between here and
  // child_started leaves a trainer the next one still finds (and kills) by it.
  json::Value starting = json::Value::object();
  starting["attempt"] = m_state.child_starts + 1;
  starting["run_token"] = m_run_token;
  if (!record("child_starting", std::move(starting)))
    return make_error(ErrorCode::io_error, "cannot write the job journal: the trainer is not started without a record of it");
  auto spawned = platform::ChildProcess::spawn(child);
  if (!spawned) return std::unexpected(spawned.error());
  m_checkpoint_writes.assign(1, SystemClock::now());
  json::Value fields = json::Value::object();
  fields["pid"] = spawned->pid();
  fields["attempt"] = m_state.child_starts + 1;
  fields["run_token"] = m_run_token;
  fields["command"] = string_array(argv);
  fields["resume_from"] = resume.id ? json::Value(*resume.id) : json::Value();
  fields["resume_path"] = resume.path ? json::Value(*resume.path) : json::Value();
  record("child_started", std::move(fields));
  if (!m_first_start) m_first_start = SteadyClock::now();
  return spawned;
}

std::optional<std::int64_t> Supervisor::newest_reported_step() const {
  std::optional<std::int64_t> step = m_metrics ? m_metrics->newest_step() : std::nullopt;
  if (!step) step = m_state.last_step;
  return step;
}

std::optional<std::int64_t> Supervisor::newest_checkpoint_step() const {
  auto live = resume_candidates(m_state);
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
    pump_mirror();

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
    fields["attempt"] = m_state.child_starts;
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
  if (!m_state.checkpoints.empty()) newest = m_state.checkpoints.back().size_bytes;
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
  auto live = resume_candidates(m_state);
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
      report_remote_deadline();
    } else {
      // The checkpoints committed last go up before gpuhost exits, for as long as
      // --final-upload-timeout allows (Ctrl-C or SIGTERM leaves the rest to the next supervisor,
      // which resumes the uploads).
      if (!m_mirror->idle())
        message("waiting up to " + seconds_text(duration_cast<milliseconds>(m_options.final_upload_timeout)) +
                " for the remote mirror to finish uploading (--final-upload-timeout)");
      wait_for_mirror([&] { return m_mirror->idle(); }, SystemClock::now() + m_options.final_upload_timeout);
    }
    m_mirror->stop();
    pump_mirror();
    m_mirror.reset();
    // What this run handed to the mirror must be durable there; otherwise the run says so and
    // does not end as a success.
    std::vector<std::string> undurable;
    for (const CommittedCheckpoint* c : resume_candidates(m_state))
      if (c->remote_id.empty() && m_mirror_queued.contains(c->id)) undurable.push_back(c->id);
    std::reverse(undurable.begin(), undurable.end());  // in commit order
    if (!undurable.empty()) {
      std::string list;
      const std::size_t first = undurable.size() > 5 ? undurable.size() - 5 : 0;
      if (first > 0) list = "..., ";
      for (std::size_t i = first; i < undurable.size(); ++i) list += (i > first ? ", " : "") + undurable[i];
      std::string what = std::to_string(undurable.size()) + (undurable.size() == 1 ? " checkpoint is" : " checkpoints are") +
                         " NOT durable on " + redact_store_url(m_spec.remote) + " (" + list + ")";
      if (!m_last_mirror_error.empty()) what += "; last error: " + m_last_mirror_error;
      json::Value fields = json::Value::object();
      fields["ids"] = string_array(undurable);
      fields["error"] = m_last_mirror_error;
      record("mirror_incomplete", std::move(fields));
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
  result.job_name = m_spec.name;
  result.job_dir = m_paths.dir;
  result.state = m_state;
  return result;
}

Result<SupervisorResult> Supervisor::run() {
  const bool new_job = m_journal.contents().records.empty();
  if (new_job) {
    json::Value fields = json::Value::object();
    fields["name"] = m_spec.name;
    fields["command"] = string_array(m_spec.command);
    fields["checkpoint_location"] = m_spec.checkpoint_location.string();
    fields["fresh"] = m_options.fresh;
    if (!record("job_created", std::move(fields))) return make_error(ErrorCode::io_error, "cannot write the job journal in " + m_paths.dir.string());
  }
  const bool after_crash = m_state.supervisor_pid.has_value();
  int leftovers = 0;
  if (!m_state.run_token.empty()) leftovers = platform::kill_processes_with_environment(k_run_token_variable, m_state.run_token);

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
  prime_scanner();
  m_drills_done.assign(m_options.drills.size(), false);
  if (m_options.fresh) ignore_present_checkpoints();
  // No trainer of ours runs yet (leftovers were killed above), so what is on disk has settled:
  // checkpoints written before this run (by a trainer run without gpuhost, or in the last
  // moments before a supervisor was killed) are committed now and can be resumed from, instead
  // of being found only after a fresh start has overwritten them.
  scan_checkpoints(true);
  if (new_job && !m_options.fresh) announce_present_checkpoints();
  if (auto mirror = start_mirror(); !mirror) {
    json::Value fields = json::Value::object();
    // Store errors quote the URL: what is journalled holds no secret a bad URL may carry.
    const std::string url = redact_store_url(m_spec.remote);
    fields["reason"] = "the remote store " + url +
                       " cannot be used: " + replace_all(mirror.error().message, m_spec.remote, url);
    record("gave_up", fields);
    return finish(Outcome::failed, fields.get_string("reason"));
  }
  if (m_mirror) {
    restore_from_remote();
    scan_checkpoints(true);
    // Uploads a crash interrupted go on; the newest live checkpoint goes up if it is not there.
    std::set<std::string> resumed;
    for (const PendingUpload& upload : m_state.pending_uploads) resumed.insert(upload.checkpoint_id);
    std::vector<CommittedCheckpoint> wanted;  // copies: mirror_committed may append records
    auto live = resume_candidates(m_state);
    for (auto it = live.rbegin(); it != live.rend(); ++it)
      if ((*it)->remote_id.empty() && (resumed.contains((*it)->id) || *it == live.front())) wanted.push_back(**it);
    for (const CommittedCheckpoint& c : wanted)
      if (!m_mirror_queued.contains(c.id)) mirror_committed(c);
  }

  std::vector<Attempt> history;
  for (;;) {
    ResumePoint resume = choose_resume_point();
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

namespace {

// The checkpoint location a job directory was made for: job.json, else the journal's
// job_created record. nullopt for a job that does not exist (or says nothing).
std::optional<fs::path> journalled_location(const JobPaths& paths) {
  std::error_code ec;
  if (auto text = platform::read_file(paths.spec())) {
    if (auto spec = job_spec_from_json(*text); spec && !spec->checkpoint_location.empty()) return spec->checkpoint_location;
  }
  if (!fs::exists(paths.journal(), ec)) return std::nullopt;
  auto journal = read_journal(paths.journal());
  if (!journal) return std::nullopt;
  for (const JournalRecord& record : journal->records)
    if (record.type == "job_created") return fs::path(record.fields.get_string("checkpoint_location"));
  return std::nullopt;
}

bool same_location(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  fs::path ca = fs::weakly_canonical(a, ec);
  if (ec) ca = a.lexically_normal();
  fs::path cb = fs::weakly_canonical(b, ec);
  if (ec) cb = b.lexically_normal();
  return ca == cb;
}

}  // namespace

Result<JobIdentity> resolve_job_identity(const fs::path& jobs_root, const JobSpec& spec, bool name_given) {
  JobIdentity identity;
  identity.name = spec.name;
  auto owner = journalled_location(job_paths(jobs_root, spec.name));
  if (!owner || same_location(*owner, spec.checkpoint_location)) return identity;
  if (name_given)
    return make_error(ErrorCode::invalid_argument,
                      "job '" + spec.name + "' supervises the checkpoints in " + owner->string() + ", not " +
                          spec.checkpoint_location.string() + ": give this run another --name, or --checkpoints " +
                          owner->string() + " to continue that job");
  for (int n = 2; n < 1000; ++n) {
    std::string suffix = "-" + std::to_string(n);
    std::string candidate = spec.name.substr(0, 64 - suffix.size()) + suffix;
    auto taken = journalled_location(job_paths(jobs_root, candidate));
    if (!taken || same_location(*taken, spec.checkpoint_location)) {
      identity.renamed_from = spec.name;
      identity.name = candidate;
      return identity;
    }
  }
  return make_error(ErrorCode::invalid_argument, "no free job name like '" + spec.name + "-N': give this run a --name");
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
