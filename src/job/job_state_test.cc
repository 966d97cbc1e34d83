#include "job/job_state.h"

#include <cstdio>

#include <gtest/gtest.h>

namespace gpuhost::job {
namespace {

// Builds a journal in memory: seq in order, a clock that advances one second per record.
class History {
 public:
  History& add(std::string type, json::Value::Object fields = {}) {
    JournalRecord record;
    record.seq = m_records.size() + 1;
    int s = static_cast<int>(m_records.size());
    char time[64];
    std::snprintf(time, sizeof time, "2026-11-30T12:%02d:%02d.000Z", s / 60, s % 60);
    record.time = time;
    record.type = std::move(type);
    record.fields = json::Value(std::move(fields));
    m_records.push_back(std::move(record));
    return *this;
  }
  History& commit(std::string path, std::string hash, std::optional<int> step = std::nullopt,
                  std::string snapshot = "") {
    return add("checkpoint_committed", {{"path", path},
                                        {"snapshot", snapshot},
                                        {"format", "torch_zip"},
                                        {"size_bytes", 1288490189},
                                        {"content_hash", hash},
                                        {"step", step ? json::Value(*step) : json::Value()},
                                        {"modified", "2026-11-30T11:59:59.250Z"},
                                        {"validate_ms", 800}});
  }
  [[nodiscard]] JobState fold() const { return fold_journal(m_records); }
  [[nodiscard]] const std::vector<JournalRecord>& records() const { return m_records; }

 private:
  std::vector<JournalRecord> m_records;
};

std::vector<std::string> ids(const std::vector<const CommittedCheckpoint*>& checkpoints) {
  std::vector<std::string> out;
  for (const auto* c : checkpoints) out.push_back(c->id);
  return out;
}

const JobEvent* last_event(const JobState& state, std::string_view type) {
  for (auto it = state.events.rbegin(); it != state.events.rend(); ++it)
    if (it->type == type) return &*it;
  return nullptr;
}

TEST(JobState, EmptyJournalIsANewJob) {
  JobState state = fold_journal({});
  EXPECT_EQ(state.phase, JobPhase::new_job);
  EXPECT_STREQ(job_phase_name(state.phase), "new");
  EXPECT_TRUE(resume_candidates(state).empty());
}

TEST(JobState, CommittedCheckpointsGetIdsFromTheirSeqAndResumeNewestFirst) {
  History h;
  h.add("job_created", {{"name", "demo"}}).commit("/ck/checkpoint-100", "xxh3-128:a", 100);
  h.add("tick")
      .commit("/ck/checkpoint-200", "xxh3-128:b", 200)
      .commit("/ck/checkpoint-300", "xxh3-128:c", 300);
  JobState state = h.fold();
  ASSERT_EQ(state.checkpoints.size(), 3u);
  EXPECT_EQ(state.checkpoints[0].id, "ck-2");
  EXPECT_EQ(state.checkpoints[0].path, "/ck/checkpoint-100");
  EXPECT_EQ(state.checkpoints[0].step, 100);
  EXPECT_EQ(state.checkpoints[0].size_bytes, 1288490189u);
  EXPECT_EQ(state.checkpoints[0].committed_at, h.records()[1].time);
  EXPECT_EQ(state.checkpoints[0].modified, "2026-11-30T11:59:59.250Z");
  EXPECT_EQ(ids(resume_candidates(state)), (std::vector<std::string>{"ck-5", "ck-4", "ck-2"}));
  EXPECT_EQ(state.last_step, 300);
  const JobEvent* event = last_event(state, "checkpoint_committed");
  ASSERT_NE(event, nullptr);
  EXPECT_EQ(event->summary, "checkpoint ck-5 committed: step 300, 1.2 GiB, validated in 0.8 s");
}

// `gpuhost advise` watches the running attempt's process group: its leader is known only while
// the attempt runs.
TEST(JobState, KnowsTheRunningTrainersPidUntilItExits) {
  History h;
  h.add("job_created", {{"name", "demo"}});
  EXPECT_FALSE(h.fold().child_pid.has_value());
  h.add("child_started", {{"pid", 7}, {"attempt", 1}, {"resume_from", nullptr}});
  EXPECT_EQ(h.fold().child_pid, 7);
  h.add("child_exited", {{"pid", 7}, {"exit_code", 1}, {"description", "exit code 1"}});
  EXPECT_FALSE(h.fold().child_pid.has_value());
  h.add("child_started", {{"pid", 8}, {"attempt", 2}, {"resume_from", nullptr}});
  EXPECT_EQ(h.fold().child_pid, 8);
}

// The advisor's newest judgement is the job's advice; its step time becomes the next run's
// "last run" figure, and a new run starts with no advice of its own.
TEST(JobState, AdviceFollowsTheNewestRecordAndItsStepTimeTheNextRun) {
  History h;
  h.add("supervisor_started", {{"pid", 1}});
  json::Value finding = json::Value::object();
  finding["id"] = "input_bound";
  finding["strength"] = "verdict";
  finding["gpu"] = 0;
  finding["limit"] = "the main thread loads every batch (num_workers=0)";
  finding["fix"] = "DataLoader(..., num_workers=1, pin_memory=True)";
  finding["evidence"] = json::Value(json::Value::Array{json::Value("GPU 0 busy 12 %")});
  h.add("advice", {{"findings", json::Value(json::Value::Array{finding})}, {"step_seconds", 0.5}});
  JobState state = h.fold();
  ASSERT_TRUE(state.advice.has_value());
  ASSERT_EQ(state.advice->findings.size(), 1u);
  EXPECT_EQ(state.advice->findings[0].id, "input_bound");
  EXPECT_EQ(state.advice->findings[0].gpu, 0);
  EXPECT_EQ(state.advice->findings[0].evidence, std::vector<std::string>{"GPU 0 busy 12 %"});
  EXPECT_EQ(last_event(state, "advice")->summary, "advice: verdict input_bound (GPU 0); step 0.5 s");
  EXPECT_FALSE(state.last_run_step_seconds.has_value());
  // A later window without a step time (the trainer printed none) keeps the run's figure.
  h.add("advice", {{"findings", json::Value::array()}});
  h.add("supervisor_stopped", {{"outcome", "stopped"}});
  h.add("supervisor_started", {{"pid", 2}});
  state = h.fold();
  EXPECT_FALSE(state.advice.has_value());
  EXPECT_EQ(state.last_run_step_seconds, 0.5);
  h.add("advice",
        {{"findings", json::Value::array()}, {"step_seconds", 0.2}, {"last_run_step_seconds", 0.5}});
  state = h.fold();
  EXPECT_EQ(last_event(state, "advice")->summary,
            "advice: no finding; step 0.2 s (0.5 s in the last run: -60 %)");
  EXPECT_EQ(state.advice->last_run_step_seconds, 0.5);
}

// `status` and `jobs` show where training is: an older checkpoint committed after the trainer
// reported a later step does not move it back; a new attempt starts from its resume point.
TEST(JobState, LastStepGoesBackOnlyWithAResume) {
  History h;
  h.add("job_created", {{"name", "demo"}});
  h.add("child_started", {{"pid", 7}, {"attempt", 1}, {"resume_from", nullptr}});
  h.commit("/ck/checkpoint-150", "xxh3-128:a", 150);
  h.add("progress", {{"step", 300}});
  h.commit("/ck/checkpoint-100", "xxh3-128:b", 100);  // committed late (it settled last)
  EXPECT_EQ(h.fold().last_step, 300);
  h.add("child_exited", {{"pid", 7}, {"exit_code", 0}, {"description", "exit code 0"}});
  EXPECT_EQ(h.fold().last_step, 300);
  h.add("child_started", {{"pid", 8}, {"attempt", 2}, {"resume_from", "ck-3"}});
  EXPECT_EQ(h.fold().last_step, 150) << "the second attempt trains on from ck-3 (step 150)";
  h.add("child_started", {{"pid", 9}, {"attempt", 3}, {"resume_from", nullptr}});
  EXPECT_FALSE(h.fold().last_step.has_value()) << "a fresh start has reached no step yet";
}

TEST(JobState, BadRetiredAndPinnedApplyById) {
  History h;
  h.commit("/ck/a", "h1", 1).commit("/ck/b", "h2", 2).commit("/ck/c", "h3", 3);
  h.add("checkpoint_bad", {{"id", "ck-3"}, {"reason", "crash loop"}});
  h.add("checkpoint_retired", {{"id", "ck-1"}, {"reason", "retention"}});
  h.add("checkpoint_pinned", {{"id", "ck-2"}});
  h.add("checkpoint_bad", {{"id", "ck-99"}, {"reason", "unknown ids are ignored"}});
  JobState state = h.fold();
  EXPECT_EQ(state.checkpoints[2].status, CheckpointStatus::bad);
  EXPECT_EQ(state.checkpoints[2].bad_reason, "crash loop");
  EXPECT_EQ(state.checkpoints[0].status, CheckpointStatus::retired);
  EXPECT_EQ(state.checkpoints[0].retired_reason, "retention");
  EXPECT_TRUE(state.checkpoints[1].pinned);
  EXPECT_EQ(ids(resume_candidates(state)), (std::vector<std::string>{"ck-2"}));
}

TEST(JobState, RecommittedPathSupersedesTheOlderRecord) {
  History h;
  h.commit("/run/weights/last.pt", "xxh3-128:old", 10);
  h.commit("/run/weights/last.pt", "xxh3-128:new", 20);
  JobState state = h.fold();
  EXPECT_EQ(state.checkpoints[0].status, CheckpointStatus::retired);
  EXPECT_EQ(state.checkpoints[0].retired_reason, "overwritten");
  EXPECT_EQ(ids(resume_candidates(state)), (std::vector<std::string>{"ck-2"}));
  EXPECT_NE(state.events.back().summary.find("replaces ck-1"), std::string::npos)
      << state.events.back().summary;
}

TEST(JobState, RecommittedPathWithASnapshotStaysCommitted) {
  History h;
  h.commit("/run/weights/last.pt", "xxh3-128:old", 10, "/jobs/demo/snapshots/ck-1/last.pt");
  h.commit("/run/weights/last.pt", "xxh3-128:new", 20);
  JobState state = h.fold();
  EXPECT_EQ(state.checkpoints[0].status, CheckpointStatus::committed);
  auto candidates = resume_candidates(state);
  ASSERT_EQ(ids(candidates), (std::vector<std::string>{"ck-2", "ck-1"}));
  EXPECT_EQ(resume_path(*candidates[1]), "/jobs/demo/snapshots/ck-1/last.pt");
  EXPECT_EQ(resume_path(*candidates[0]), "/run/weights/last.pt");
}

TEST(JobState, CountsRunsStartsRestartsAndPreemptions) {
  History h;
  h.add("supervisor_started", {{"pid", 4242}, {"cloud", "aws"}, {"after_crash", false}});
  h.add("child_started", {{"pid", 100}, {"attempt", 1}, {"run_token", "tok-1"}, {"resume_from", nullptr}});
  h.add("child_exited", {{"pid", 100},
                         {"signaled", true},
                         {"signal", 9},
                         {"description", "killed by SIGKILL"},
                         {"ran_for_ms", 12300},
                         {"cause", "crash"}});
  h.add("restart_scheduled", {{"delay_ms", 1000}, {"reason", "restart 1 of 10 in 1 s"}});
  h.add("child_started", {{"pid", 101}, {"attempt", 2}, {"run_token", "tok-2"}, {"resume_from", "ck-7"}});
  h.add("notice", {{"source", "aws"},
                   {"kind", "preemption"},
                   {"deadline", "2026-11-30T12:02:00Z"},
                   {"detail", "spot/instance-action"}});
  h.add("notice", {{"source", "aws"}, {"kind", "advisory"}, {"detail", "rebalance"}});
  JobState state = h.fold();
  EXPECT_EQ(state.supervisor_runs, 1);
  EXPECT_EQ(state.child_starts, 2);
  EXPECT_EQ(state.restarts, 1);
  EXPECT_EQ(state.preemptions, 1);
  EXPECT_EQ(state.supervisor_pid, 4242);
  EXPECT_EQ(state.run_token, "tok-2");
  EXPECT_EQ(state.last_exit, "killed by SIGKILL");
  EXPECT_EQ(state.phase, JobPhase::running);

  const JobEvent* exited = last_event(state, "child_exited");
  ASSERT_NE(exited, nullptr);
  EXPECT_EQ(exited->summary, "child exited: killed by SIGKILL after 12.3 s (crash); restart in 1 s");
  EXPECT_EQ(last_event(state, "restart_scheduled"), nullptr) << "folded into the exit's line";
  const JobEvent* started = last_event(state, "child_started");
  ASSERT_NE(started, nullptr);
  EXPECT_EQ(started->summary, "child started (pid 101, attempt 2), resuming from ck-7");
  // Record 6 is at 12:00:05; the deadline 12:02:00 is 115 s later.
  EXPECT_EQ(state.events[4].summary, "notice from aws: preemption at 12:02:00Z (deadline in 115 s)");
  EXPECT_EQ(state.events[5].summary, "notice from aws: advisory");
}

TEST(JobState, PhasesFollowTheRecords) {
  History h;
  h.add("supervisor_started", {{"pid", 1}});
  EXPECT_EQ(h.fold().phase, JobPhase::running);
  h.add("child_started", {{"pid", 2}});
  h.add("child_exited", {{"exit_code", 3}, {"description", "exit code 3"}, {"cause", "crash"}});
  EXPECT_EQ(h.fold().phase, JobPhase::waiting_restart);
  h.add("gave_up", {{"reason", "crashed 11 times"}});
  EXPECT_EQ(h.fold().phase, JobPhase::failed);
  h.add("supervisor_stopped", {{"outcome", "failed"}, {"exit_code", 1}});
  JobState state = h.fold();
  EXPECT_EQ(state.phase, JobPhase::failed);
  EXPECT_FALSE(state.supervisor_pid);
  EXPECT_EQ(state.events.back().summary, "supervisor stopped: failed (exit code 1)");

  h.add("supervisor_started", {{"pid", 7}, {"after_crash", false}});
  h.add("child_started", {{"pid", 8}});
  h.add("child_exited", {{"exit_code", 0}, {"cause", "preempted"}});
  EXPECT_EQ(h.fold().phase, JobPhase::preempted);
  h.add("supervisor_stopped", {{"outcome", "preempted"}});
  EXPECT_EQ(h.fold().phase, JobPhase::preempted);
  EXPECT_EQ(h.fold().supervisor_runs, 2);

  h.add("supervisor_started", {{"pid", 9}});
  h.add("child_exited", {{"exit_code", 0}, {"description", "exit code 0"}, {"cause", "success"}});
  EXPECT_EQ(h.fold().phase, JobPhase::finished);
  EXPECT_EQ(h.fold().supervisor_pid, 9) << "no supervisor_stopped yet";
}

TEST(JobState, SaveEventsReadAsOneLineEach) {
  History h;
  h.add("save_requested", {{"method", "signal"}, {"signal", "SIGUSR1"}});
  h.add("save_completed", {{"id", "ck-12"}, {"duration_ms", 3400}});
  h.add("save_timed_out", {{"waited_ms", 25000}});
  h.add("checkpoint_rejected",
        {{"path", "/ck/checkpoint-400"}, {"format", "hf_dir"}, {"problem", "no trainer_state.json"}});
  h.add("disk_low", {{"path", "/ck"}, {"available_bytes", 1073741824}});
  h.add("watcher_trouble", {{"source", "azure"}, {"message", "endpoint unreachable"}});
  h.add("drill", {{"action", "preempt"}, {"at_s", 30}});
  h.add("leftovers_killed", {{"count", 2}});
  JobState state = h.fold();
  ASSERT_EQ(state.events.size(), 8u);
  EXPECT_EQ(state.events[0].summary, "save requested with SIGUSR1");
  EXPECT_EQ(state.events[1].summary, "save completed in 3.4 s (ck-12)");
  EXPECT_EQ(state.events[2].summary, "save timed out: no checkpoint written after the notice in 25 s");
  EXPECT_EQ(state.events[3].summary, "checkpoint rejected: /ck/checkpoint-400: no trainer_state.json");
  EXPECT_EQ(state.events[4].summary, "disk low: 1.0 GiB available for /ck");
  EXPECT_EQ(state.events[5].summary, "azure watcher: endpoint unreachable");
  EXPECT_EQ(state.events[6].summary, "drill: preempt at 30 s");
  EXPECT_EQ(state.events[7].summary, "killed 2 processes left over from the previous supervisor");
  EXPECT_EQ(state.events[1].time, h.records()[1].time);
}

// What a run tells about saves for trainers that do not handle the signal, launchers left
// alone, the steps a missed save loses, and the user's own stop.
TEST(JobState, SaveRequestsSayWhoWasAskedAndWhatIsLost) {
  History h;
  h.add("save_requested", {{"method", "signal"},
                           {"signal", "SIGUSR1"},
                           {"signalled", 2},
                           {"spared", json::Value(json::Value::Array{json::Value("torchrun (pid 7)")})}});
  h.add("save_requested", {{"method", "signal"},
                           {"signal", "SIGUSR1"},
                           {"signalled", 0},
                           {"waiting", "periodic"},
                           {"cadence_ms", 5000},
                           {"expected_in_ms", 2000}});
  h.add("save_requested",
        {{"method", "signal"}, {"signal", "SIGUSR1"}, {"signalled", 0}, {"waiting", "periodic"}});
  h.add("save_timed_out", {{"waited_ms", 25000}, {"last_step", 118}, {"checkpoint_step", 100}});
  h.add("save_timed_out", {{"waited_ms", 25000}, {"last_step", 40}, {"checkpoint_step", nullptr}});
  h.add("notice", {{"source", "signal"}, {"kind", "stop"}, {"detail", "interrupt"}});
  h.add("leftovers_killed", {{"count", 1}, {"attempt", 3}});
  JobState state = h.fold();
  ASSERT_EQ(state.events.size(), 7u);
  EXPECT_EQ(state.events[0].summary,
            "save requested with SIGUSR1 (2 processes; left alone, no handler: torchrun (pid 7))");
  EXPECT_EQ(
      state.events[1].summary,
      "no process handles SIGUSR1: waiting for the next periodic checkpoint (every ~5 s), expected in ~2 s");
  EXPECT_EQ(state.events[2].summary,
            "no process handles SIGUSR1: no periodic checkpoint expected before the deadline; the trainer is "
            "stopped "
            "then and what it did since its last checkpoint is lost");
  EXPECT_EQ(state.events[3].summary,
            "save timed out: no checkpoint written after the notice in 25 s; steps 101-118 are lost (resume "
            "from step 100)");
  EXPECT_EQ(state.events[4].summary,
            "save timed out: no checkpoint written after the notice in 25 s; steps 1-40 are lost (no "
            "checkpoint to resume from)");
  EXPECT_EQ(state.events[5].summary, "stop requested (interrupt): saving first");
  EXPECT_EQ(state.preemptions, 0) << "Ctrl-C is not a preemption";
  EXPECT_EQ(state.events[6].summary, "killed 1 process left over from attempt 3");
}

TEST(JobState, UnknownRecordTypesAndFieldsAreIgnored) {
  History h;
  h.commit("/ck/a", "h1", 5);
  h.add("from_the_future", {{"id", "ck-1"}});
  h.add("checkpoint_pinned", {{"id", "ck-1"}, {"new_field", true}});
  JobState state = h.fold();
  EXPECT_EQ(state.events.size(), 2u);
  EXPECT_TRUE(state.checkpoints[0].pinned);
  EXPECT_EQ(state.checkpoints[0].status, CheckpointStatus::committed);
}

TEST(JobState, FoldingIsDeterministic) {
  History h;
  h.add("supervisor_started", {{"pid", 1}}).commit("/ck/a", "h1", 1).commit("/ck/a", "h2", 2);
  JobState a = h.fold();
  JobState b = h.fold();
  ASSERT_EQ(a.events.size(), b.events.size());
  for (std::size_t i = 0; i < a.events.size(); ++i) EXPECT_EQ(a.events[i].summary, b.events[i].summary);
  EXPECT_EQ(ids(resume_candidates(a)), ids(resume_candidates(b)));
}

TEST(JobState, FoldingMoreRecordsEqualsFoldingThemAll) {
  History h;
  h.add("supervisor_started", {{"pid", 1}}).commit("/ck/a", "h1", 1).add("child_started", {{"pid", 7}});
  h.add("checkpoint_bad", {{"id", "ck-2"}, {"reason", "truncated"}})
      .commit("/ck/b", "h2", 2)
      .commit("/ck/a", "h3", 3);
  const JobState whole = h.fold();
  const std::span<const JournalRecord> records(h.records());
  for (std::size_t split = 0; split <= records.size(); ++split) {
    JobState state;
    fold_more(state, records.first(split));
    fold_more(state, records.subspan(split));
    EXPECT_EQ(state.phase, whole.phase) << split;
    EXPECT_EQ(state.last_step, whole.last_step) << split;
    ASSERT_EQ(state.events.size(), whole.events.size()) << split;
    for (std::size_t i = 0; i < state.events.size(); ++i)
      EXPECT_EQ(state.events[i].summary, whole.events[i].summary);
    ASSERT_EQ(state.checkpoints.size(), whole.checkpoints.size()) << split;
    for (std::size_t i = 0; i < state.checkpoints.size(); ++i) {
      EXPECT_EQ(state.checkpoints[i].id, whole.checkpoints[i].id);
      EXPECT_EQ(state.checkpoints[i].status, whole.checkpoints[i].status);
    }
    EXPECT_EQ(ids(resume_candidates(state)), ids(resume_candidates(whole))) << split;
  }
}

TEST(JobState, NodeZeroSeesEachNodesNewestStepAndWhichOneIsLate) {
  History h;
  h.add("supervisor_started", {{"pid", 10}})
      .add("peers_started", {{"role", "leader"}, {"node", 0}, {"nnodes", 3}, {"leader", "127.0.0.1:29501"}})
      .add("peer_joined", {{"node", 2}})
      .add("peer_joined", {{"node", 1}})
      .add("resume_agreed", {{"step", 100}, {"storage", "shared"}});
  ASSERT_EQ(h.fold().nodes.size(), 3u);
  EXPECT_EQ(h.fold().nodes[2].step, 100);  // every node starts from the agreed step
  h.add("checkpoint_committed", {{"path", "/ck/ckpt-300.pt"}, {"step", 300}, {"content_hash", "xxh3-128:3"}})
      .add("peer_committed", {{"node", 1}, {"step", 300}})
      .add("peer_committed", {{"node", 2}, {"step", 200}})
      .add("peer_lost", {{"node", 1}, {"reason", "no heartbeat for 10.2 s"}, {"outcome", ""}});
  JobState state = h.fold();
  ASSERT_EQ(state.nodes.size(), 3u);
  EXPECT_EQ(state.self_node, 0);
  EXPECT_EQ(state.nodes[0].node, 0);
  EXPECT_EQ(state.nodes[0].step, 300);  // its own commit
  EXPECT_EQ(state.nodes[1].node, 1);
  EXPECT_EQ(state.nodes[1].state, "lost");
  EXPECT_EQ(state.nodes[1].reason, "no heartbeat for 10.2 s");
  EXPECT_EQ(state.nodes[2].step, 200);
  EXPECT_EQ(state.nodes[2].state, "joined");
  // The next run starts its own view.
  h.add("peers_started", {{"role", "follower"}, {"node", 2}, {"nnodes", 3}, {"leader", "127.0.0.1:29501"}});
  state = h.fold();
  ASSERT_EQ(state.nodes.size(), 1u);
  EXPECT_EQ(state.nodes[0].node, 2);
  EXPECT_EQ(state.nodes[0].step, std::nullopt);
}

}  // namespace
}  // namespace gpuhost::job

namespace gpuhost::job {
namespace {

TEST(JobStateMirror, PendingUploadsKeepTheirPartsUntilDurableThenTheCheckpointIsRemote) {
  History h;
  h.commit("/ck/a.pt", "xxh3-128:1", 10);  // ck-1
  h.add("mirror_upload_started", {{"id", "ck-1"},
                                  {"remote_id", "step-10"},
                                  {"object", "j/step-10/files/a.pt"},
                                  {"upload_id", "U1"},
                                  {"part_size", 5242880}});
  h.add("mirror_part_uploaded",
        {{"upload_id", "U1"}, {"number", 1}, {"etag", "e1"}, {"size", 5242880}, {"sha256", "s"}});
  JobState mid = h.fold();
  ASSERT_EQ(mid.pending_uploads.size(), 1u);
  EXPECT_EQ(mid.pending_uploads[0].checkpoint_id, "ck-1");
  ASSERT_EQ(mid.pending_uploads[0].parts.size(), 1u);
  EXPECT_EQ(mid.pending_uploads[0].parts[0].etag, "e1");
  EXPECT_TRUE(mid.checkpoints[0].remote_id.empty());
  EXPECT_TRUE(mid.mirrored);

  h.add("mirror_durable", {{"id", "ck-1"}, {"remote_id", "step-10"}, {"upload_ms", 1500}});
  JobState done = h.fold();
  EXPECT_TRUE(done.pending_uploads.empty());
  EXPECT_EQ(done.checkpoints[0].remote_id, "step-10");
  EXPECT_FALSE(done.checkpoints[0].durable_at.empty());
  EXPECT_EQ(done.events.back().summary, "checkpoint ck-1 durable remotely as step-10 (uploaded in 1.5 s)");

  h.add("mirror_removed", {{"id", "ck-1"}, {"remote_id", "step-10"}});
  EXPECT_TRUE(h.fold().checkpoints[0].remote_id.empty());
}

TEST(JobStateMirror, AbortedUploadIsNoLongerPendingAndRestoredCheckpointsAreRemembered) {
  History h;
  h.add(
      "checkpoint_restored",
      {{"remote_id", "step-5"}, {"path", "/ck/a.pt"}, {"content_hash", "xxh3-128:9"}, {"store", "s3://b/"}});
  h.add("mirror_upload_started", {{"id", "ck-2"}, {"object", "o"}, {"upload_id", "U2"}});
  h.add("mirror_upload_aborted", {{"id", "ck-2"}, {"upload_id", "U2"}, {"reason", "retired"}});
  JobState state = h.fold();
  EXPECT_TRUE(state.pending_uploads.empty());
  ASSERT_EQ(state.restored.size(), 1u);
  EXPECT_EQ(state.restored[0].content_hash, "xxh3-128:9");
}

TEST(JobState, AMultiNodeRunShowsItsGlobalStepAndTheLostPeer) {
  History h;
  h.add("supervisor_started", {{"pid", 10}})
      .add("peers_started", {{"role", "leader"}, {"node", 0}, {"nnodes", 2}, {"leader", "127.0.0.1:29501"}})
      .add("peer_joined", {{"node", 1}})
      .add("resume_agreed", {{"step", json::Value()}})
      .add("global_commit", {{"step", 100}})
      .add("global_commit", {{"step", 200}})
      .add("peer_lost", {{"node", 1}, {"reason", "no heartbeat for 10.2 s"}, {"outcome", ""}})
      .add("supervisor_stopped", {{"outcome", "peer_lost"}, {"reason", "node 1 is gone"}});
  JobState state = h.fold();
  EXPECT_EQ(state.global_step, 200);
  EXPECT_EQ(state.peer_lost, "node 1 lost: no heartbeat for 10.2 s");
  EXPECT_EQ(state.phase, JobPhase::preempted);  // resumable: the engine reruns every node
  ASSERT_NE(last_event(state, "resume_agreed"), nullptr);
  EXPECT_EQ(last_event(state, "resume_agreed")->summary,
            "all nodes start fresh (no step committed on every node)");
  EXPECT_EQ(last_event(state, "global_commit")->summary, "step 200 committed on every node");

  // A peer that finished is no loss; the next run's channel clears the last one.
  h.add("supervisor_started", {{"pid", 11}})
      .add("peers_started", {{"role", "leader"}, {"node", 0}, {"nnodes", 2}, {"leader", "127.0.0.1:29501"}})
      .add("resume_agreed", {{"step", 200}, {"storage", "node_local"}})
      .add("peer_lost", {{"node", 1}, {"reason", "it ended (finished)"}, {"outcome", "finished"}});
  state = h.fold();
  EXPECT_EQ(state.peer_lost, "");
  EXPECT_EQ(last_event(state, "resume_agreed")->summary,
            "all nodes resume from step 200 (node-local checkpoint folders)");
  EXPECT_EQ(last_event(state, "peer_lost")->summary, "node 1 ended: finished");
}

}  // namespace
}  // namespace gpuhost::job
