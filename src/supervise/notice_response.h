#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "platform/child_process.h"
#include "supervise/job.h"
#include "supervise/job_recorder.h"
#include "supervise/notice.h"
#include "supervise/stop_controller.h"

namespace gpuhost::supervise {

// What `gpuhost run` does about notices while one attempt of the trainer runs: journals each
// notice, asks the trainer to save (only the processes that handle the save signal, or the
// request file; the next periodic checkpoint when nothing can be asked: doc/run-signals.md),
// recognises the save (a checkpoint written after the notice), sends the stop, kills at the
// deadline, acknowledges the notice to the cloud, and reports what was saved or lost. The
// decisions are the StopController's; this carries them out on the child. The supervisor's
// thread owns it; not thread-safe.
class NoticeResponse {
 public:
  struct Context {
    JobRecorder& recorder;
    const JobSpec& spec;
    const job::JobPaths& paths;
    // Tells the cloud to go ahead (Azure StartRequests); empty without a watcher.
    std::function<Result<void>(const PreemptionNotice&)> acknowledge;
    // The newest step the trainer reported; empty when training metrics are off.
    std::function<std::optional<std::int64_t>()> newest_step;
    // With a mirror the acknowledgement waits for the upload (Azure evicts right after it).
    bool acknowledge_after_upload = false;
  };

  explicit NoticeResponse(Context context);

  // A new attempt started at `started`: no notice yet, and the trainer's rhythm starts there.
  void begin_attempt(std::chrono::system_clock::time_point started);

  // A notice (cloud, drill, signal) or Ctrl-C (cause user_stop) while the child runs.
  void notice(platform::ChildProcess& child, const PreemptionNotice& notice, StopCause cause);
  // A checkpoint was committed; `written` is when its newest byte was written. What it decides
  // (the save is in: stop) is carried out by the next tick().
  void committed(const job::CommittedCheckpoint& checkpoint, std::chrono::system_clock::time_point written);
  // Each turn of the supervisor's loop: deadlines, the stop, the kill.
  void tick(platform::ChildProcess& child);

  // Why this attempt ends, if a notice ends it (StopController::outcome).
  [[nodiscard]] StopCause outcome() const { return m_stop.outcome(); }
  // The notice acted on in this attempt (for the mirror's deadline), if any.
  [[nodiscard]] const std::optional<PreemptionNotice>& acted_on() const { return m_notice; }
  [[nodiscard]] bool acknowledgement_pending() const { return m_ack_pending; }
  void acknowledge();
  // After a stop: which checkpoint was saved, or what is lost and where a rerun resumes.
  [[nodiscard]] std::string stop_report() const;

 private:
  void request_save(platform::ChildProcess& child, const Result<std::vector<platform::TreeMember>>& members);
  // Whether the checkpoint committed is the save the notice asked for: journals it and queues the stop.
  void recognise_save(const job::CommittedCheckpoint& checkpoint,
                      std::chrono::system_clock::time_point written);
  void apply(platform::ChildProcess& child, StopActions actions);
  [[nodiscard]] std::optional<std::int64_t> newest_reported_step() const;
  [[nodiscard]] std::optional<std::int64_t> newest_checkpoint_step() const;

  Context m_context;
  StopController m_stop;
  std::optional<PreemptionNotice> m_notice;
  bool m_ack_pending = false;
  StopActions m_pending;  // decided by a commit inside a scan, carried out by the next tick
  std::string m_saved_id;  // the checkpoint saved for this attempt's notice, if one was
  // When this attempt started and when each checkpoint it committed was written: the trainer's
  // rhythm (the start stands in for a first save, so one checkpoint already gives an estimate,
  // a cautious one: it includes the start-up).
  std::vector<std::chrono::system_clock::time_point> m_checkpoint_writes;
  // The newest checkpoint this attempt committed, and when it was written.
  std::optional<std::pair<job::CommittedCheckpoint, std::chrono::system_clock::time_point>> m_last_commit;
};

}  // namespace gpuhost::supervise
