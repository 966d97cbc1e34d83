#pragma once

#include <chrono>
#include <filesystem>
#include <vector>
#include <functional>
#include <optional>
#include <string>

#include "supervise/checkpoint_scanner.h"
#include "supervise/job.h"
#include "supervise/job_recorder.h"

namespace gpuhost::supervise {

// What to do with single-file checkpoints the trainer may rewrite in place (YOLO last.pt,
// Lightning last.ckpt): `automatic` copies a committed file into the job's snapshots/ when its
// name carries no step number (so rewriting it cannot destroy the last good one), `always`
// copies every single-file checkpoint, `never` copies nothing.
enum class SnapshotPolicy { automatic, always, never };

// Where a run resumes from: the newest committed checkpoint that still re-validates.
struct ResumePoint {
  std::optional<std::string> id;
  std::optional<std::string> path;  // the file to load: the checkpoint, or gpuhost's snapshot of it
};

// The job's checkpoints from the trainer's folder to the journal: finds them (the scanner),
// commits the valid ones (with a snapshot of files rewritten in place), rejects broken ones,
// applies retention and pins, and picks the checkpoint to resume from. Every decision is a
// journal record through the recorder, so what it says is what is durable. Not thread-safe.
class CheckpointLedger {
 public:
  struct Hooks {
    // A checkpoint was committed (the record is durable); `written` is when its newest byte was
    // written. Called before retention runs.
    std::function<void(const job::CommittedCheckpoint&, std::chrono::system_clock::time_point written)>
        on_committed;
    // Retention retired a checkpoint (its files are gone): e.g. remove its remote copy.
    std::function<void(const job::CommittedCheckpoint&)> on_retired;
  };

  CheckpointLedger(JobRecorder& recorder, const JobSpec& spec, job::JobPaths paths, SnapshotPolicy snapshots,
                   Hooks hooks);

  // Checkpoints committed by an earlier supervisor that are unchanged on disk are not hashed
  // again: call once before the first scan.
  void prime();
  // `--fresh`: what is on disk is seen but not committed, what earlier runs committed is retired.
  void ignore_present();
  // A new job that found checkpoints in its folder says so, with the one it resumes from.
  void announce_present();

  // Looks at the folder once. `settled`: nothing is being written any more (the trainer has
  // exited, or none runs yet), so what is there counts as settled now.
  void scan(bool settled);

  // Deletes what retention could not delete yet: on Windows a file cannot be removed while the
  // mirror still reads it for an upload. Tried again at every scan and by the supervisor once
  // the mirror has stopped; what still fails then is said in a message, never left silently.
  void delete_retired(bool last_try);

  // The newest committed checkpoint whose bytes still hash to what was committed; each one that
  // fails is marked bad (with the reason) and never offered again. Empty: start fresh.
  // `eligible`, when given, limits the choice (a multi-node job resumes the step every node has).
  [[nodiscard]] ResumePoint choose_resume_point(
      const std::function<bool(const job::CommittedCheckpoint&)>& eligible = {});

 private:
  void commit(const CheckpointVerdict& verdict);
  void apply_retention();
  void pick_up_pins();

  JobRecorder& m_recorder;
  const JobSpec& m_spec;
  job::JobPaths m_paths;
  SnapshotPolicy m_snapshots;
  Hooks m_hooks;
  CheckpointScanner m_scanner;
  std::vector<std::filesystem::path> m_undeleted;  // retired, not deleted yet (see delete_retired)
};

}  // namespace gpuhost::supervise
