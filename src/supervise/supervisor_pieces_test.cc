// Unit tests of the pieces `gpuhost run` is built from, below the loop: the recorder (journal +
// folded state), the checkpoint ledger (scan, commit, retention, resume choice), the trainer's
// launch (command line and environment) and job identity. Real files in a scratch folder; no
// child processes.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <map>

#include "platform/files.h"
#include "supervise/checkpoint_fixtures.h"
#include "supervise/checkpoint_ledger.h"
#include "supervise/job_identity.h"
#include "supervise/job_recorder.h"
#include "supervise/output_log.h"
#include "supervise/storage_probe.h"
#include "supervise/trainer_launch.h"

namespace gpuhost::supervise {
namespace {

namespace fs = std::filesystem;
using namespace fixtures;
using namespace std::chrono_literals;

JobRecorder open_recorder(const fs::path& dir, std::vector<std::string>* types = nullptr) {
  fs::create_directories(dir);
  auto journal = job::Journal::open(dir / "journal.jsonl");
  EXPECT_TRUE(journal) << journal.error().message;
  JobRecorder::Callbacks callbacks;
  if (types) callbacks.on_record = [types](const job::JournalRecord& r) { types->push_back(r.type); };
  return JobRecorder(std::move(*journal), callbacks);
}

TEST(StorageProbe, NodeZeroSeesAProbeOnlyInTheFolderItWasWrittenTo) {
  ScratchDir scratch("probe");
  const fs::path shared = scratch.path() / "shared-ck";
  const fs::path other = scratch.path() / "node1-ck";
  // A folder the trainer has not made yet is the probe's folder; a single-file checkpoint's
  // folder is.
  EXPECT_EQ(storage_probe_dir(shared), shared);
  EXPECT_EQ(storage_probe_dir(scratch.path() / "weights" / "last.pt"), scratch.path() / "weights");
  auto nonce = write_storage_probe(shared, 1);
  ASSERT_TRUE(nonce) << nonce.error().message;
  EXPECT_EQ(nonce->size(), 32u);
  EXPECT_TRUE(sees_storage_probe(shared, 1, *nonce));
  EXPECT_FALSE(sees_storage_probe(shared, 2, *nonce));       // another node's name
  EXPECT_FALSE(sees_storage_probe(shared, 1, "0123abcd"));   // one an earlier run left
  EXPECT_FALSE(sees_storage_probe(other, 1, *nonce));        // node 1's own disk
  auto again = write_storage_probe(shared, 1);
  ASSERT_TRUE(again);
  EXPECT_NE(*again, *nonce);
  EXPECT_FALSE(sees_storage_probe(shared, 1, *nonce));
  remove_storage_probe(shared, 1);
  EXPECT_FALSE(fs::exists(storage_probe_path(shared, 1)));
}

TEST(RotatingLog, RotatesAtItsCapAndCountsTheWritesThatFailed) {
  ScratchDir scratch("rotating-log");
  {
    RotatingLog log(scratch.path() / "logs" / "stdout.log", 10, 2);
    log.write("0123456789");
    log.write("abc");        // over the cap: the full file becomes .1
    log.write("defghijkl");  // again: .1 becomes .2
    log.write("more");       // again: the oldest (keep = 2) is deleted
    EXPECT_EQ(log.failed_writes(), 0u);
  }
  EXPECT_EQ(read_bytes(scratch.path() / "logs" / "stdout.log"), "more");
  EXPECT_EQ(read_bytes(scratch.path() / "logs" / "stdout.log.1"), "defghijkl");
  EXPECT_EQ(read_bytes(scratch.path() / "logs" / "stdout.log.2"), "abc");
  EXPECT_FALSE(fs::exists(scratch.path() / "logs" / "stdout.log.3"));
  // A log whose folder cannot exist (a file is in the way): lines are lost, and counted.
  write_bytes(scratch.path() / "blocked", "a file");
  RotatingLog lost(scratch.path() / "blocked" / "stdout.log");
  lost.write("line 1\n");
  lost.write("line 2\n");
  EXPECT_EQ(lost.failed_writes(), 2u);
}

TEST(JobRecorder, FoldsEachRecordAsItIsAppendedAndReopensToTheSameState) {
  ScratchDir scratch("recorder");
  std::vector<std::string> seen;
  {
    JobRecorder recorder = open_recorder(scratch.path(), &seen);
    EXPECT_TRUE(recorder.record("supervisor_started", json::Value::Object{{"pid", 7}}));
    EXPECT_TRUE(recorder.record("child_starting", json::Value::Object{{"attempt", 1}, {"run_token", "abc"}}));
    EXPECT_EQ(recorder.state().run_token, "abc") << "the token is known before the child starts";
    EXPECT_EQ(recorder.state().supervisor_pid, 7);
    EXPECT_FALSE(recorder.record("bad", json::Value::Object{{"seq", 1}})) << "reserved field";
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"supervisor_started", "child_starting"}));
  JobRecorder again = open_recorder(scratch.path());
  EXPECT_EQ(again.state().run_token, "abc");
  EXPECT_EQ(again.contents().records.size(), 2u);
}

class Ledger : public ::testing::Test {
 protected:
  ScratchDir m_scratch{"ledger"};
  fs::path ck() const { return m_scratch.path() / "ck"; }
  job::JobPaths paths() const { return job::JobPaths{m_scratch.path() / "job"}; }
  JobSpec spec(int keep = 0) const {
    JobSpec s;
    s.name = "ledger";
    s.command = {"train"};
    s.checkpoint_location = ck();
    s.settle = 0ms;
    s.keep = keep;
    return s;
  }
  void write(const std::string& name, const std::string& label) { write_bytes(ck() / name, make_torch_zip(label)); }
};

TEST_F(Ledger, CommitsValidCheckpointsRejectsBrokenOnesAndTellsTheHook) {
  fs::create_directories(ck());
  JobRecorder recorder = open_recorder(paths().dir);
  const JobSpec s = spec();
  std::vector<std::string> committed;
  CheckpointLedger ledger(recorder, s, paths(), SnapshotPolicy::never,
                          {[&](const job::CommittedCheckpoint& c, std::chrono::system_clock::time_point) {
                             committed.push_back(c.id + ":" + fs::path(c.path).filename().string());
                           },
                           nullptr});
  write("ckpt-000005.pt", "five");
  write_bytes(ck() / "ckpt-000010.pt", make_torch_zip("ten").substr(0, 40));  // torn
  ledger.scan(true);
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].substr(committed[0].find(':') + 1), "ckpt-000005.pt");
  const job::JobState& state = recorder.state();
  ASSERT_EQ(state.checkpoints.size(), 1u);
  EXPECT_EQ(state.checkpoints[0].step, 5);
  bool rejected = false;
  for (const auto& r : recorder.contents().records) rejected |= r.type == "checkpoint_rejected";
  EXPECT_TRUE(rejected);
  ResumePoint resume = ledger.choose_resume_point();
  EXPECT_EQ(resume.id, state.checkpoints[0].id);
}

#ifndef _WIN32  // Windows names are UTF-16: always UTF-8 once converted
TEST_F(Ledger, ACheckpointWhosePathIsNotUtf8IsRejectedOnceAndNotCommitted) {
  fs::create_directories(ck());
  JobRecorder recorder = open_recorder(paths().dir);
  const JobSpec s = spec();
  CheckpointLedger ledger(recorder, s, paths(), SnapshotPolicy::never, {});
  write("ckpt-000005-\xE9t\xE9.pt", "latin-1 name");  // "été" in Latin-1
  ledger.scan(true);
  ledger.scan(true);
  EXPECT_TRUE(recorder.state().checkpoints.empty());
  int rejected = 0;
  for (const auto& r : recorder.contents().records) {
    if (r.type != "checkpoint_rejected") continue;
    ++rejected;
    EXPECT_NE(r.fields.get_string("problem").find("not valid UTF-8"), std::string::npos);
  }
  EXPECT_EQ(rejected, 1);
}
#endif

TEST_F(Ledger, RetentionKeepsTheNewestAndTellsTheHook) {
  fs::create_directories(ck());
  JobRecorder recorder = open_recorder(paths().dir);
  const JobSpec s = spec(2);
  std::vector<std::string> retired;
  CheckpointLedger ledger(recorder, s, paths(), SnapshotPolicy::never,
                          {nullptr, [&](const job::CommittedCheckpoint& c) { retired.push_back(c.id); }});
  for (int step : {5, 10, 15}) {
    write("ckpt-" + std::to_string(step) + ".pt", "s" + std::to_string(step));
    ledger.scan(true);
  }
  ASSERT_EQ(retired.size(), 1u);
  EXPECT_FALSE(fs::exists(ck() / "ckpt-5.pt")) << "retention deletes the oldest";
  EXPECT_TRUE(fs::exists(ck() / "ckpt-15.pt"));
  EXPECT_EQ(job::resume_candidates(recorder.state()).size(), 2u);
}

// Windows refuses to delete a file another handle has open (an upload reading it): the retired
// checkpoint is deleted later, at the next scan or the last try, and never re-committed. Linux
// deletes it at once; the end state is the same on both.
TEST_F(Ledger, ARetiredCheckpointInUseIsDeletedWhenItIsFree) {
  fs::create_directories(ck());
  JobRecorder recorder = open_recorder(paths().dir);
  const JobSpec s = spec(1);
  CheckpointLedger ledger(recorder, s, paths(), SnapshotPolicy::never, {nullptr, nullptr});
  write("ckpt-5.pt", "s5");
  ledger.scan(true);
  {
    std::ifstream reader(ck() / "ckpt-5.pt", std::ios::binary);  // as the mirror's upload would
    ASSERT_TRUE(reader);
    write("ckpt-10.pt", "s10");
    ledger.scan(true);
    ledger.scan(true);
  }
  ledger.scan(true);
  ledger.delete_retired(true);
  EXPECT_FALSE(fs::exists(ck() / "ckpt-5.pt"));
  ASSERT_EQ(recorder.state().checkpoints.size(), 2u) << "the retired file was not committed again";
  EXPECT_EQ(job::resume_candidates(recorder.state()).size(), 1u);
}

TEST_F(Ledger, AChangedCheckpointIsMarkedBadAndTheOneBeforeIsResumed) {
  fs::create_directories(ck());
  JobRecorder recorder = open_recorder(paths().dir);
  const JobSpec s = spec();
  CheckpointLedger ledger(recorder, s, paths(), SnapshotPolicy::never, {});
  write("ckpt-5.pt", "five");
  ledger.scan(true);
  write("ckpt-10.pt", "ten");
  ledger.scan(true);
  ASSERT_EQ(recorder.state().checkpoints.size(), 2u);
  write_bytes(ck() / "ckpt-10.pt", make_torch_zip("ten, edited"));
  ResumePoint resume = ledger.choose_resume_point();
  EXPECT_EQ(resume.path, (ck() / "ckpt-5.pt").string());
  EXPECT_EQ(recorder.state().checkpoints[1].status, job::CheckpointStatus::bad);
}

TEST_F(Ledger, FreshIgnoresWhatIsThereAndRetiresWhatWasCommitted) {
  fs::create_directories(ck());
  JobRecorder recorder = open_recorder(paths().dir);
  const JobSpec s = spec();
  {
    CheckpointLedger first(recorder, s, paths(), SnapshotPolicy::never, {});
    write("ckpt-5.pt", "five");
    first.scan(true);
  }
  write("ckpt-10.pt", "ten");  // written by a run without gpuhost
  CheckpointLedger ledger(recorder, s, paths(), SnapshotPolicy::never, {});
  ledger.prime();
  ledger.ignore_present();
  ledger.scan(true);
  EXPECT_FALSE(ledger.choose_resume_point().id.has_value()) << "--fresh resumes from nothing";
  EXPECT_EQ(recorder.state().checkpoints.size(), 1u) << "ckpt-10 was not committed";
}

TEST_F(Ledger, APresentCheckpointIsAnnouncedWithTheOneResumedFrom) {
  fs::create_directories(ck());
  write("ckpt-5.pt", "five");
  write("ckpt-10.pt", "ten");
  // Written one after the other by a run without gpuhost (both in the same clock tick here).
  fs::last_write_time(ck() / "ckpt-5.pt", fs::last_write_time(ck() / "ckpt-10.pt") - 10s);
  JobRecorder recorder = open_recorder(paths().dir);
  const JobSpec s = spec();
  CheckpointLedger ledger(recorder, s, paths(), SnapshotPolicy::never, {});
  ledger.scan(true);
  ledger.announce_present();
  const job::JournalRecord& found = recorder.contents().records.back();
  EXPECT_EQ(found.type, "checkpoints_found");
  EXPECT_EQ(found.fields.get_int("count"), 2);
  EXPECT_EQ(found.fields.get_int("step"), 10);
}

TEST(TrainerLaunch, SubstitutesTheResumePathAndSetsTheEnvironment) {
  JobSpec spec;
  spec.name = "llama";
  spec.command = {"python", "train.py", "--resume", "{resume}"};
  spec.environment = {{"WANDB_MODE", "offline"}};
  spec.save_request = JobSpec::SaveRequest::both;
  job::JobPaths paths{fs::path("/jobs/llama")};
  TrainerLaunchInputs inputs;
  inputs.run_token = "tok";
  inputs.attempt = 3;
  inputs.resume = ResumePoint{"ck-9", "/ck/ckpt-90.pt"};
  inputs.metrics_channel = "/jobs/llama/metrics/channel.jsonl";
  auto launch = trainer_launch(spec, paths, inputs);
  ASSERT_TRUE(launch) << launch.error().message;
  EXPECT_EQ(launch->argv, (std::vector<std::string>{"python", "train.py", "--resume", "/ck/ckpt-90.pt"}));
  std::map<std::string, std::string> env(launch->environment.begin(), launch->environment.end());
  EXPECT_EQ(env["WANDB_MODE"], "offline");
  EXPECT_EQ(env["GPUHOST_JOB"], "llama");
  EXPECT_EQ(env[k_run_token_variable], "tok");
  EXPECT_EQ(env["GPUHOST_ATTEMPT"], "3");
  EXPECT_EQ(env["GPUHOST_RESUME_FROM"], "/ck/ckpt-90.pt");
  EXPECT_EQ(env["GPUHOST_SAVE_REQUEST"], (paths.dir / "save-request").string());
  EXPECT_EQ(env["PYTHONUNBUFFERED"], "1");
  EXPECT_EQ(env["GPUHOST_METRICS_FILE"], "/jobs/llama/metrics/channel.jsonl");

  spec.save_request = JobSpec::SaveRequest::signal;
  spec.environment.emplace_back("GPUHOST_METRICS_FILE", "mine.jsonl");
  inputs.resume = {};
  inputs.inherited_pythonunbuffered = true;
  launch = trainer_launch(spec, paths, inputs);
  ASSERT_TRUE(launch);
  EXPECT_EQ(launch->argv, (std::vector<std::string>{"python", "train.py"})) << "no checkpoint: the flag goes too";
  std::multimap<std::string, std::string> all(launch->environment.begin(), launch->environment.end());
  EXPECT_EQ(all.count("GPUHOST_SAVE_REQUEST"), 0u);
  EXPECT_EQ(all.count("GPUHOST_RESUME_FROM"), 0u);
  EXPECT_EQ(all.count("PYTHONUNBUFFERED"), 0u) << "the inherited value is kept";
  EXPECT_EQ(all.count("GPUHOST_METRICS_FILE"), 1u) << "the job's own channel is not overridden";
  EXPECT_EQ(all.find("GPUHOST_METRICS_FILE")->second, "mine.jsonl");
}

class Identity : public ::testing::Test {
 protected:
  ScratchDir m_scratch{"identity"};
  fs::path root() const { return m_scratch.path() / "jobs"; }
  JobSpec spec(const std::string& name, const fs::path& location) const {
    JobSpec s;
    s.name = name;
    s.command = {"python", "train.py"};
    s.checkpoint_location = location;
    return s;
  }
  void make_job(const std::string& name, const fs::path& location) {
    job::JobPaths paths = job::job_paths(root(), name);
    fs::create_directories(paths.dir);
    ASSERT_TRUE(platform::write_file_atomic(paths.spec(), job_spec_to_json(spec(name, location))));
  }
};

TEST_F(Identity, ANewNameOrTheSameFolderKeepsTheName) {
  auto fresh = resolve_job_identity(root(), spec("ck", "/a/ck"), false);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(fresh->name, "ck");
  EXPECT_TRUE(fresh->renamed_from.empty());
  make_job("ck", "/a/ck");
  auto same = resolve_job_identity(root(), spec("ck", "/a/./ck"), false);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->name, "ck");
}

TEST_F(Identity, AnotherFolderGetsTheNextFreeNameOrItsOwn) {
  make_job("ck", "/a/ck");
  auto other = resolve_job_identity(root(), spec("ck", "/b/ck"), false);
  ASSERT_TRUE(other);
  EXPECT_EQ(other->name, "ck-2");
  EXPECT_EQ(other->renamed_from, "ck");
  make_job("ck-2", "/b/ck");
  make_job("ck-3", "/c/ck");
  EXPECT_EQ(resolve_job_identity(root(), spec("ck", "/b/ck"), false)->name, "ck-2") << "it finds its own again";
  EXPECT_EQ(resolve_job_identity(root(), spec("ck", "/d/ck"), false)->name, "ck-4");
  std::string long_name(64, 'x');
  make_job(long_name, "/a/x");
  auto renamed = resolve_job_identity(root(), spec(long_name, "/b/x"), false);
  ASSERT_TRUE(renamed);
  EXPECT_EQ(renamed->name.size(), 64u);
  EXPECT_TRUE(renamed->name.ends_with("-2"));
}

TEST_F(Identity, AGivenNameOfAnotherFolderIsRefused) {
  make_job("llama", "/a/ck");
  auto refused = resolve_job_identity(root(), spec("llama", "/b/ck"), true);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::invalid_argument);
  EXPECT_NE(refused.error().message.find("/a/ck"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("another --name"), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::supervise
