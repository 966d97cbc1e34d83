#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "job/journal.h"

namespace gpuhost::job {

enum class CheckpointStatus { committed, bad, retired };

// A checkpoint as the journal knows it.
struct CommittedCheckpoint {
  std::string id;        // "ck-<seq of its commit record>", stable
  std::string path;      // absolute path the trainer wrote
  std::string snapshot;  // gpuhost's copy in the job directory, when one was taken; else empty
  std::string format;    // checkpoint_format_name()
  std::uint64_t size_bytes = 0;
  std::string content_hash;  // "xxh3-128:..."
  std::optional<std::int64_t> step;
  std::string committed_at;  // journal time
  std::string modified;      // journal time of the newest file inside when it was committed
  CheckpointStatus status = CheckpointStatus::committed;
  std::string bad_reason;      // status bad: why
  std::string retired_reason;  // status retired: why ("retention", "overwritten", ...)
  bool pinned = false;
  // The remote mirror (doc/remote-store.md): the checkpoint's name in the store once its
  // manifest is stored (mirror_durable, or restored from there), cleared by mirror_removed.
  std::string remote_id;
  std::string durable_at;  // journal time of mirror_durable
};

// A multipart upload the mirror started and has not finished, aborted or seen durable: a
// restarted supervisor continues it.
struct PendingUpload {
  std::string checkpoint_id;
  std::string remote_id;
  std::string object;  // key under the store's prefix
  std::string upload_id;
  std::uint64_t part_size = 0;
  struct Part {
    int number = 0;
    std::string etag;
    std::uint64_t size = 0;
    std::string sha256;
  };
  std::vector<Part> parts;
};

// A checkpoint `gpuhost run` downloaded from the remote store (checkpoint_restored): its local
// commit is known to be durable remotely already.
struct RestoredCheckpoint {
  std::string remote_id;
  std::string path;
  std::string content_hash;
};

// The file to resume from: gpuhost's snapshot when it took one (the trainer may have rewritten
// `path` in place since), else `path`.
[[nodiscard]] inline const std::string& resume_path(const CommittedCheckpoint& checkpoint) {
  return checkpoint.snapshot.empty() ? checkpoint.path : checkpoint.snapshot;
}

enum class JobPhase { new_job, running, waiting_restart, preempted, finished, failed, stopped };
[[nodiscard]] const char* job_phase_name(JobPhase phase);

// A notice, save, restart... for `gpuhost status`.
struct JobEvent {
  std::string time;
  std::string type;
  std::string summary;  // one human line
};

// The advisor's newest judgement of the trainer (an `advice` record, doc/advise.md).
struct JobAdvice {
  struct Finding {
    std::string id;        // "input_bound", ...
    std::string strength;  // "verdict" or "hint"
    std::optional<std::int64_t> gpu;
    std::string limit, fix, expected;
    std::vector<std::string> evidence;
  };
  std::string time;
  std::vector<Finding> findings;
  std::optional<double> step_seconds;           // the trainer's step time over the window
  std::optional<double> last_run_step_seconds;  // the run before's, when it had one
  std::optional<double> mfu_percent;            // model FLOPs utilisation, newest in the window
  std::string mfu_basis;                        // "the trainer's own figure", or what it was computed from
  std::string unseen;                           // what the advisor could not read, if anything
};

// The job's state, folded from its journal records in order. Pure: the same records give the
// same state, so a supervisor restarted after SIGKILL continues from exactly what was durable.
// Unknown record types and fields are ignored. A checkpoint committed again at the same path
// (a file rewritten in place, like last.pt) supersedes the earlier records of that path: those
// without a snapshot become retired ("overwritten"), those with one stay committed.
// The phase follows the last record that sets one: supervisor_started / child_started: running;
// child_exited: finished (success), preempted, stopped, else waiting_restart; restart_scheduled:
// waiting_restart; gave_up: failed; supervisor_stopped: its outcome.
struct JobState {
  JobPhase phase = JobPhase::new_job;
  std::vector<CommittedCheckpoint> checkpoints;  // in commit order
  int supervisor_runs = 0;
  // Where the last supervisor ran, from its supervisor_started topology: "node 1 of 2 (slurm,
  // leader n1)"; "" for a job on one machine with no engine.
  std::string topology;
  // A multi-node job (job_peers.h): the newest step committed on every node (global_commit),
  // and the last peer lost with why ("node 1: no heartbeat for 10.2 s").
  std::optional<std::int64_t> global_step;
  std::string peer_lost;
  // Each node of the last run as this node saw it: on node 0 every node (peer_joined,
  // peer_committed, peer_lost), on the others node 0 and this one. Its newest committed step
  // and "joined", "lost", or "ended: <outcome>". `self_node`: this node's rank.
  struct PeerNode {
    int node = 0;
    std::optional<std::int64_t> step;
    std::string state = "joined";
    std::string reason;  // lost: why
  };
  std::vector<PeerNode> nodes;  // by node rank
  std::optional<int> self_node;
  int child_starts = 0;
  int restarts = 0;     // crash restarts over the whole history (restart_scheduled records)
  int preemptions = 0;  // notices acted on (notice records of kind "preemption", drills included)
  std::optional<long> supervisor_pid;        // of the last supervisor_started without a matching stop
  std::string run_token;                     // of the last child_started (kill leftovers by it)
  std::optional<long> child_pid;             // the running attempt's trainer (its process group's leader)
  std::optional<std::int64_t> last_step;     // newest step the journal saw (progress or checkpoint)
  std::optional<std::int64_t> last_save_ms;  // the newest save_completed: notice to committed
  // The newest advice of the current (or last) supervisor run; reset when one starts. And the
  // newest step time the advisor measured in an earlier run, for the comparison.
  std::optional<JobAdvice> advice;
  std::optional<double> run_step_seconds;       // this run's newest
  std::optional<double> last_run_step_seconds;  // that of the last run that measured one
  std::vector<JobEvent> events;
  std::optional<std::string> last_exit;  // describe() of the last child exit
  bool mirrored = false;                 // a remote mirror record was seen (the job runs with --remote)
  std::vector<PendingUpload> pending_uploads;
  std::vector<RestoredCheckpoint> restored;

  // Node 0 hears every node's commits; the others know only their own.
  [[nodiscard]] bool knows_every_node() const { return self_node == 0 && nodes.size() > 1; }
  // On node 0: `node` is there but behind the newest step any node committed.
  [[nodiscard]] bool node_late(const PeerNode& node) const;
};

// The one human line for a record, as `gpuhost status` lists it and `gpuhost run` prints it as it
// happens ("checkpoint ck-12 committed: step 300, 1.2 GB"); the same text as JobEvent::summary.
[[nodiscard]] std::string summarize_record(const JournalRecord& record);

[[nodiscard]] JobState fold_journal(const std::vector<JournalRecord>& records);
// Folds records that follow the ones `state` was folded from: fold_journal(a + b) equals
// fold_journal(a) then fold_more(state, b). For readers that follow a journal as it grows.
void fold_more(JobState& state, std::span<const JournalRecord> records);

// Committed, not bad, not retired, newest commit first: the order resume tries them in.
[[nodiscard]] std::vector<const CommittedCheckpoint*> resume_candidates(const JobState& state);

}  // namespace gpuhost::job
