#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "job/job_state.h"
#include "job/journal.h"
#include "supervise/checkpoint_ledger.h"
#include "supervise/drill.h"
#include "supervise/job.h"
#include "supervise/job_identity.h"
#include "supervise/job_peers.h"
#include "supervise/notice.h"
#include "supervise/topology.h"

namespace gpuhost::supervise {

enum class Outcome {
  finished,   // the trainer exited 0 and every committed checkpoint is where it should be
  unmirrored,  // the trainer exited 0, but committed checkpoints are not durable on the remote
  preempted,  // a notice or SIGTERM: checkpoint saved (or the newest kept), child stopped; resumable
  failed,     // restarts exhausted or the trainer cannot start
  stopped,    // Ctrl-C: saved and stopped on the user's request
  peer_lost,  // another node of a multi-node job vanished mid-training: stopped; resumable
};
[[nodiscard]] const char* outcome_name(Outcome outcome);

// What MFU is computed from when the trainer prints none (run --model): the model's FLOPs per
// token, the tokens per second the trainer prints (or tokens per step over the step time), and
// the dense peak of the GPUs the job uses. The advisor journals it with each judgement.
struct MfuBasis {
  double flops_per_token = 0;
  std::optional<double> tokens_per_step;  // tokens one optimizer step of this node trains
  double peak_flops = 0;                  // FLOP/s, every GPU the job uses on this node
  int devices = 1;                        // how many GPUs peak_flops adds up
  std::string assumption;                 // what the figure rests on, for the user
};

struct SupervisorOptions {
  JobSpec spec;
  std::filesystem::path jobs_root;
  std::vector<Drill> drills;
  SnapshotPolicy snapshots = SnapshotPolicy::automatic;
  // How often the checkpoint location is scanned.
  std::chrono::milliseconds scan_interval{std::chrono::milliseconds(500)};
  // The trainer's output; default: straight to our stdout / stderr. Called from reader threads.
  platform::OutputHandler echo;
  // Every journal record as it is appended (for the console). Called from the supervisor's
  // thread.
  std::function<void(const job::JournalRecord&)> on_record;
  // One-line messages that are not journal records ("waiting 2 s before restart 3/10").
  std::function<void(std::string_view)> on_message;
  // Once the job's lock is held and its directory exists, before the first child starts (e.g. to
  // start `gpuhost run --dashboard`). Called from the supervisor's thread.
  std::function<void(const std::string& job_name, const std::filesystem::path& job_dir)> on_job_ready;
  // Collect training scalars from the trainer's output and files (supervise/training_metrics.h).
  bool training_metrics = true;
  // How often the newest training step is journalled as a progress record (when it changed).
  std::chrono::milliseconds progress_interval{std::chrono::seconds(30)};
  // The advisor's window (supervise/job_advisor.h): what limits the trainer, judged this often
  // and journalled as `advice` when it changes; zero turns it off.
  std::chrono::milliseconds advise_window{std::chrono::seconds(60)};
  std::optional<MfuBasis> mfu;
  // Start from scratch: checkpoints already on disk (or committed by earlier runs of the job)
  // are never resumed from; the trainer's new ones are committed as it writes them.
  bool fresh = false;
  // With a remote: how long a finished job waits for its last uploads before it ends as
  // `unmirrored` (the uploads resume with the next `gpuhost run` of the job).
  std::chrono::milliseconds final_upload_timeout{std::chrono::minutes(15)};
  // Where the job runs (detect_topology): journalled at start, folded into GPUHOST_ATTEMPT.
  Topology topology;
  // How the nodes of a multi-node topology find each other (job_peers.h).
  PeerSettings peers;
  // How long after SIGTERM / SIGUSR1 / SIGHUP the engine kills: Kubernetes'
  // terminationGracePeriodSeconds and Slurm's KillWait both default to 30 s; a partition's
  // GraceTime or a pod's own setting is the user's to give (--signal-deadline). The deadline of a
  // signal's notice, and a start-up warning when the last save took longer.
  std::chrono::milliseconds signal_deadline{std::chrono::seconds(30)};
};

struct SupervisorResult {
  Outcome outcome = Outcome::failed;
  std::string reason;
  // For a failed run, for the console (not journalled: the logs have them): the trainer's last
  // stderr lines (of its last attempt) and the log they come from.
  std::vector<std::string> last_stderr;
  std::filesystem::path stderr_log;
  std::string job_name;
  std::filesystem::path job_dir;
  job::JobState state;  // folded from the journal at the end
};

// Runs the job to an outcome: takes the job's lock, replays its journal, kills leftovers of a
// previous supervisor, resumes from the newest checkpoint that re-validates, supervises the child
// (checkpoints, notices, drills, SIGTERM/SIGINT, restarts with backoff and crash-loop rollback)
// and journals every step. Errors are for what stops it from supervising at all: the job is
// locked by another supervisor (unavailable), the job directory or journal cannot be written,
// a bad spec. Installs the process's termination handlers; call from the main thread, once at a
// time per process.
[[nodiscard]] Result<SupervisorResult> run_supervisor(const SupervisorOptions& options);

}  // namespace gpuhost::supervise
