#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "supervise/job.h"
#include "supervise/job_recorder.h"
#include "supervise/mirror.h"

namespace gpuhost::supervise {

// The job's remote mirror as `gpuhost run` drives it (doc/remote-store.md): restores a host from
// the newest complete remote checkpoint, hands every commit to the background Mirror, journals
// what it reports, and at the end says which of this run's checkpoints are not durable
// remotely. Lives on the supervisor's thread; the Mirror's workers report through take_events().
class JobMirror {
 public:
  // Opens the store and the key; aborts multipart uploads under `scope` that no journal record
  // continues. The scope is the key prefix of this node's copies: the job's name, or
  // <name>/node-<K> for one node's own folder of a multi-node job (doc/run-multinode.md).
  // Errors: the URL or key cannot be used (the run has checked both before; a change since).
  [[nodiscard]] static Result<std::unique_ptr<JobMirror>> start(JobRecorder& recorder, const JobSpec& spec,
                                                                const job::JobPaths& paths,
                                                                std::string scope);

  // The newest remote checkpoint that authenticates and verifies is downloaded into the
  // checkpoint location (the next scan commits it) when nothing is committed locally, or when
  // it is newer than the local one: another host trained further. Newer means a higher step;
  // without a step on both sides, an upload that ended after the local checkpoint was last
  // written. Bytes this journal already knows are never fetched again and nothing local is ever
  // replaced: when no newer one can be restored (a full disk included), training resumes from
  // the local checkpoint.
  // With `exact_step`, the one checkpoint of that step is restored (the step every node of a
  // multi-node job agreed on), newer or not; the caller asks only when none is committed here.
  void restore(std::optional<std::int64_t> exact_step = std::nullopt);
  // Uploads a crash interrupted go on; the newest live checkpoint goes up if it is not there.
  void resume_pending();

  // A checkpoint was committed: upload it (or record it durable when its bytes came from there).
  void committed(const job::CommittedCheckpoint& checkpoint);
  // Retention retired it: its remote copy and unfinished uploads go.
  void retired(const job::CommittedCheckpoint& checkpoint);

  // Journals what the mirror's workers reported since the last call.
  void pump();
  // Pumps until `done()` or `until`; false on timeout or a termination request.
  bool wait(const std::function<bool()>& done, std::optional<std::chrono::system_clock::time_point> until);
  // On a preemption: waits for the newest committed checkpoint to become durable remotely, up to
  // `deadline` less a second (to acknowledge), and journals whether it did (mirror_deadline).
  void wait_for_newest(std::chrono::system_clock::time_point deadline);
  // Waits up to `timeout` for every upload to finish (the end of a finished run).
  void drain(std::chrono::milliseconds timeout);

  // Stops the workers. Returns the checkpoints this run handed over that are not durable
  // remotely (commit order), journalled as mirror_incomplete when there are any.
  struct Ending {
    std::vector<std::string> undurable;
    std::string last_error;  // of the newest failed upload, shortened
  };
  [[nodiscard]] Ending stop();

 private:
  JobMirror(JobRecorder& recorder, const JobSpec& spec, const job::JobPaths& paths, std::string scope,
            std::unique_ptr<Mirror> mirror);

  JobRecorder& m_recorder;
  const JobSpec& m_spec;
  job::JobPaths m_paths;
  std::string m_scope;
  std::unique_ptr<Mirror> m_mirror;
  std::set<std::string> m_queued;  // checkpoint ids handed to the mirror by this run
  std::string m_last_error;
};

// The steps of the checkpoints under `scope` whose manifests authenticate, newest first: what
// a node of a multi-node job can restore, said when it joins. Errors: the store cannot be listed.
[[nodiscard]] Result<std::vector<std::int64_t>> durable_remote_steps(const JobSpec& spec, const std::string& scope);

}  // namespace gpuhost::supervise
