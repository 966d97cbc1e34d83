#include "supervise/stop_controller.h"

#include <gtest/gtest.h>

namespace gpuhost::supervise {
namespace {

using namespace std::chrono_literals;
using platform::TreeMember;

// A fixed origin for both clocks: the tests step time by hand.
const SteadyTime k_t0 = SteadyTime(std::chrono::hours(1000));
const WallTime k_w0 = WallTime(std::chrono::hours(480000));

StopTiming timing() {
  StopTiming t;
  t.safety_margin = 5s;
  t.stop_grace = 10s;
  return t;
}

StopController::Notice preemption(std::chrono::seconds lead, std::chrono::milliseconds at = 0ms,
                                  StopCause cause = StopCause::preemption) {
  StopController::Notice n;
  n.cause = cause;
  n.now = k_t0 + at;
  n.now_wall = k_w0 + at;
  n.deadline = k_t0 + at + lead;
  return n;
}

StopController::Notice advisory(std::chrono::seconds lead) {
  StopController::Notice n = preemption(lead);
  n.advisory = true;
  return n;
}

TreeMember member(long pid, std::string command, std::optional<bool> catches, long parent = 1) {
  TreeMember m;
  m.pid = pid;
  m.parent_pid = parent;
  m.command_line = command;
  m.name = command.substr(0, command.find(' '));
  m.catches = catches;
  return m;
}

TEST(StopController, HandlerSavesThenStopsWithGraceCappedByTheDeadline) {
  StopController c(timing());
  StopActions a = c.notice(preemption(30s), true);
  EXPECT_TRUE(a.request_save);
  EXPECT_FALSE(a.send_stop);
  EXPECT_EQ(c.phase(), StopController::Phase::saving);
  EXPECT_EQ(*c.save_deadline(), k_t0 + 25s);
  a = c.checkpoint_committed(k_w0 + 1500ms, k_t0 + 2s);
  EXPECT_TRUE(a.save_completed);
  EXPECT_TRUE(a.send_stop);
  EXPECT_EQ(*c.kill_at(), k_t0 + 12s);
  EXPECT_FALSE(c.tick(k_t0 + 11s).kill);
  EXPECT_TRUE(c.tick(k_t0 + 12s).kill);
  EXPECT_FALSE(c.tick(k_t0 + 13s).kill) << "the kill is asked for once";
  EXPECT_EQ(c.outcome(), StopCause::preemption);

  StopController late(timing());
  (void)late.notice(preemption(30s), true);
  (void)late.checkpoint_committed(k_w0 + 24s, k_t0 + 24s);
  EXPECT_EQ(*late.kill_at(), k_t0 + 30s) << "grace never runs past the deadline";
}

// torchrun's agent takes its workers down itself and SIGKILLs them 30 s after the stop signal:
// the stop waits for that (plus 2 s) rather than killing the agent at stop_grace, and still
// never past the deadline.
TEST(StopController, TorchrunGetsItsOwnShutdownTimeWithinTheDeadline) {
  StopController c(timing());
  c.set_launcher(Launcher::torchrun);
  (void)c.notice(preemption(120s), true);
  StopActions a = c.checkpoint_committed(k_w0 + 2s, k_t0 + 2s);
  EXPECT_TRUE(a.send_stop);
  EXPECT_EQ(*c.kill_at(), k_t0 + 34s);

  StopController near(timing());
  near.set_launcher(Launcher::torchrun);
  (void)near.notice(preemption(20s), true);
  (void)near.checkpoint_committed(k_w0 + 2s, k_t0 + 2s);
  EXPECT_EQ(*near.kill_at(), k_t0 + 20s) << "the deadline still wins";

  StopController plain(timing());
  plain.set_launcher(Launcher::mpirun);
  (void)plain.notice(preemption(120s), true);
  (void)plain.checkpoint_committed(k_w0 + 2s, k_t0 + 2s);
  EXPECT_EQ(*plain.kill_at(), k_t0 + 12s) << "launchers without a shutdown of their own get stop_grace";

  // A longer --stop-grace is kept; reset() forgets the launcher for the next attempt.
  StopTiming longer = timing();
  longer.stop_grace = 60s;
  StopController patient(longer);
  patient.set_launcher(Launcher::torchrun);
  (void)patient.notice(preemption(300s), true);
  (void)patient.checkpoint_committed(k_w0 + 1s, k_t0 + 1s);
  EXPECT_EQ(*patient.kill_at(), k_t0 + 61s);
  c.reset();
  (void)c.notice(preemption(120s), true);
  (void)c.checkpoint_committed(k_w0 + 3s, k_t0 + 3s);
  EXPECT_EQ(*c.kill_at(), k_t0 + 13s);
}

TEST(StopController, ACheckpointWrittenBeforeTheNoticeIsNotTheSave) {
  StopController c(timing());
  (void)c.notice(preemption(30s, 10s), true);
  // Written 0.9 s before the notice and committed after it (the settle delay): not the save.
  StopActions a = c.checkpoint_committed(k_w0 + 9100ms, k_t0 + 11s);
  EXPECT_FALSE(a.save_completed);
  EXPECT_EQ(c.phase(), StopController::Phase::saving);
  // Within the coarse-mtime slack of the notice: counts.
  a = c.checkpoint_committed(k_w0 + 10s - k_mtime_slack, k_t0 + 12s);
  EXPECT_TRUE(a.save_completed);
}

// Node 1 saw the preemption at 10 s, this node at 10.5 s (its own signal), then node 1's relayed
// notice arrives: the ranks' checkpoint written at 10.2 s for node 1's request is the save here too.
TEST(StopController, AnEarlierNoticeFromAnotherNodeOpensTheSaveWindowThere) {
  StopController c(timing());
  (void)c.notice(preemption(30s, 10500ms), true);
  EXPECT_FALSE(c.checkpoint_committed(k_w0 + 10200ms, k_t0 + 10600ms).save_completed);
  StopController::Notice relayed = preemption(30s, 10700ms);
  relayed.now_wall = k_w0 + 10s;  // when node 1 saw it
  (void)c.notice(relayed, true);
  EXPECT_EQ(c.received_wall(), k_w0 + 10s);
  EXPECT_TRUE(c.checkpoint_committed(k_w0 + 10200ms, k_t0 + 10800ms).save_completed);
}

// A file system with whole-second times (FAT, some shares) stamps a write 0.5 s after the
// notice with the second before it.
TEST(StopController, WholeSecondTimesGetTheCoarseSlack) {
  StopController c(timing());
  (void)c.notice(preemption(30s, 10500ms), true);
  EXPECT_FALSE(c.checkpoint_committed(k_w0 + 8s, k_t0 + 11s).save_completed) << "2.5 s before: no save";
  EXPECT_TRUE(c.checkpoint_committed(k_w0 + 10s, k_t0 + 11s).save_completed);
  EXPECT_EQ(mtime_slack(k_w0 + 10s), std::chrono::milliseconds(2000));
  EXPECT_EQ(mtime_slack(k_w0 + 10s + 1ms), k_mtime_slack);
}

TEST(StopController, NoSaveByTheDeadlineStopsWithWhatIsLeftOfTheMargin) {
  StopController c(timing());
  (void)c.notice(preemption(30s), true);
  EXPECT_FALSE(c.tick(k_t0 + 24900ms).save_timed_out);
  StopActions a = c.tick(k_t0 + 25s);
  EXPECT_TRUE(a.save_timed_out);
  EXPECT_TRUE(a.send_stop);
  EXPECT_EQ(*c.kill_at(), k_t0 + 27500ms);  // half the 5 s margin, under the 10 s grace
  EXPECT_TRUE(c.tick(k_t0 + 27500ms).kill);
  EXPECT_EQ(c.outcome(), StopCause::preemption);
}

TEST(StopController, WithoutASaveRequestItStopsAtOnceAndKillsBeforeTheDeadline) {
  StopController c(timing());
  StopActions a = c.notice(preemption(30s), false);
  EXPECT_FALSE(a.request_save);
  EXPECT_TRUE(a.send_stop);
  EXPECT_EQ(*c.kill_at(), k_t0 + 25s);
  StopController short_notice(timing());
  (void)short_notice.notice(preemption(2s), false);
  EXPECT_EQ(*short_notice.kill_at(), k_t0) << "a deadline inside the margin kills at once";
}

TEST(StopController, ALaterNoticeOnlyBringsTheDeadlineForward) {
  StopController c(timing());
  (void)c.notice(preemption(120s), true);
  StopActions a = c.notice(preemption(30s, 1s), true);
  EXPECT_FALSE(a.request_save) << "one save request per notice";
  EXPECT_EQ(*c.save_deadline(), k_t0 + 26s);
  (void)c.notice(preemption(300s, 2s), true);
  EXPECT_EQ(*c.save_deadline(), k_t0 + 26s);
}

TEST(StopController, AdvisorySavesAndTrainingGoesOn) {
  StopController c(timing());
  EXPECT_TRUE(c.notice(advisory(120s), true).request_save);
  EXPECT_EQ(c.outcome(), StopCause::none);
  StopActions a = c.checkpoint_committed(k_w0 + 3s, k_t0 + 3s);
  EXPECT_TRUE(a.save_completed);
  EXPECT_TRUE(a.resume_training);
  EXPECT_FALSE(a.send_stop);
  EXPECT_EQ(c.phase(), StopController::Phase::idle);

  StopController unsaved(timing());
  (void)unsaved.notice(advisory(60s), true);
  a = unsaved.tick(k_t0 + 55s);
  EXPECT_TRUE(a.save_timed_out);
  EXPECT_FALSE(a.send_stop) << "an advisory never stops the trainer";
  EXPECT_EQ(unsaved.phase(), StopController::Phase::idle);
}

TEST(StopController, APreemptionDuringAnAdvisorySaveEndsInAStop) {
  StopController c(timing());
  (void)c.notice(advisory(120s), true);
  StopActions a = c.notice(preemption(30s, 1s), true);
  EXPECT_FALSE(a.request_save) << "the save already asked for serves both";
  EXPECT_EQ(c.outcome(), StopCause::preemption);
  a = c.checkpoint_committed(k_w0 + 2s, k_t0 + 2s);
  EXPECT_TRUE(a.send_stop);
  EXPECT_FALSE(a.resume_training);
}

TEST(StopController, SecondCtrlCKillsAtOnceWhileSavingOrStopping) {
  StopController saving(timing());
  (void)saving.notice(preemption(60s, 0ms, StopCause::user_stop), true);
  EXPECT_EQ(saving.outcome(), StopCause::user_stop);
  StopActions a = saving.notice(preemption(60s, 1s, StopCause::user_stop), true);
  EXPECT_TRUE(a.kill) << "without waiting for the save timeout";

  StopController stopping(timing());
  (void)stopping.notice(preemption(60s, 0ms, StopCause::user_stop), true);
  (void)stopping.checkpoint_committed(k_w0 + 1s, k_t0 + 1s);
  EXPECT_TRUE(stopping.notice(preemption(60s, 2s, StopCause::user_stop), true).kill);

  StopController preempted(timing());
  (void)preempted.notice(preemption(60s), true);
  EXPECT_FALSE(preempted.notice(preemption(60s, 1s, StopCause::user_stop), true).kill)
      << "the first Ctrl-C during a preemption's save is a first one";
  EXPECT_TRUE(preempted.notice(preemption(60s, 2s, StopCause::user_stop), true).kill);
}

TEST(StopController, ResetForgetsTheNotice) {
  StopController c(timing());
  (void)c.notice(preemption(30s), true);
  c.reset();
  EXPECT_EQ(c.phase(), StopController::Phase::idle);
  EXPECT_EQ(c.outcome(), StopCause::none);
  EXPECT_FALSE(c.checkpoint_committed(k_w0 + 1s, k_t0 + 1s).save_completed);
  EXPECT_TRUE(c.notice(preemption(30s, 2s), true).request_save);
}

TEST(SaveTargets, OnlyProcessesThatCatchTheSignalGetIt) {
  // torchrun's agent (no SIGUSR1 handler) and two workers that catch it.
  std::vector<TreeMember> tree = {
      member(100, "/usr/bin/python3 /usr/bin/torchrun --nproc_per_node=2 -r 9:1 -t 9:1 train.py", false),
      member(101, "/usr/bin/python3 -u train.py --local_rank=0", true, 100),
      member(102, "/usr/bin/python3 -u train.py --local_rank=1", true, 100),
  };
  SaveTargets t = choose_save_targets(tree, false);
  EXPECT_EQ(t.pids, (std::vector<long>{101, 102}));
  EXPECT_EQ(t.launcher, Launcher::torchrun);
  ASSERT_EQ(t.spared.size(), 1u);
  EXPECT_EQ(t.spared[0], "torchrun (pid 100)");
  EXPECT_FALSE(t.unknown);
}

TEST(SaveTargets, ATrainerWithoutAHandlerGetsNothing) {
  std::vector<TreeMember> tree = {member(200, "python3 train.py --resume ck/ckpt-100.pt", false),
                                  member(201, "python3 train.py --resume ck/ckpt-100.pt", false, 200)};
  SaveTargets t = choose_save_targets(tree, false);
  EXPECT_TRUE(t.pids.empty());
  EXPECT_EQ(t.spared.size(), 2u);
  EXPECT_EQ(t.launcher, Launcher::none);
}

TEST(SaveTargets, WhereTheOsCannotTellOnlyADeclaredHandlerIsSignalled) {
  std::vector<TreeMember> tree = {member(300, "trainer.exe", std::nullopt), member(301, "python.exe", std::nullopt, 300)};
  SaveTargets undeclared = choose_save_targets(tree, false);
  EXPECT_TRUE(undeclared.unknown);
  EXPECT_TRUE(undeclared.pids.empty());
  SaveTargets declared = choose_save_targets(tree, true);
  EXPECT_EQ(declared.pids, (std::vector<long>{300}));
}

TEST(Launchers, AreRecognisedHoweverTheyAreStarted) {
  EXPECT_EQ(launcher_of(member(1, "/usr/bin/python3 /usr/bin/torchrun --nnodes=2 train.py", false)), Launcher::torchrun);
  EXPECT_EQ(launcher_of(member(1, "python -m torch.distributed.run --nproc_per_node 8 train.py", false)), Launcher::torchrun);
  EXPECT_EQ(launcher_of(member(1, "python3 -u -m torch.distributed.launch train.py", false)), Launcher::torchrun);
  EXPECT_EQ(launcher_of(member(1, "/opt/conda/bin/python /opt/conda/bin/accelerate launch train.py", false)),
            Launcher::accelerate);
  EXPECT_EQ(launcher_of(member(1, "/usr/bin/python3 /usr/local/bin/deepspeed --num_gpus 8 train.py", false)),
            Launcher::deepspeed);
  EXPECT_EQ(launcher_of(member(1, "mpirun -np 4 python train.py", false)), Launcher::mpirun);
  EXPECT_EQ(launcher_of(member(1, "/usr/bin/horovodrun -np 4 python train.py", false)), Launcher::horovodrun);
  EXPECT_EQ(launcher_of(member(1, "python3 train.py --launcher torchrun", false)), Launcher::none)
      << "a trainer's own argument is not its launcher";
  EXPECT_EQ(launcher_of(member(1, "python3 torchrun_notes.py", false)), Launcher::none);
}

TEST(CheckpointCadence, IsTheMedianOfTheLastIntervals) {
  EXPECT_FALSE(checkpoint_cadence(std::vector<WallTime>{}).has_value());
  EXPECT_FALSE(checkpoint_cadence(std::vector<WallTime>{k_w0}).has_value());
  std::vector<WallTime> writes = {k_w0, k_w0 + 5s, k_w0 + 10s, k_w0 + 30s, k_w0 + 35s};
  EXPECT_EQ(*checkpoint_cadence(writes), 5s) << "one slow interval does not move it";
  std::vector<WallTime> old_rhythm = {k_w0, k_w0 + 1s, k_w0 + 2s, k_w0 + 12s, k_w0 + 22s, k_w0 + 32s,
                                      k_w0 + 42s, k_w0 + 52s, k_w0 + 62s};
  EXPECT_EQ(*checkpoint_cadence(old_rhythm), 10s) << "only the recent rhythm counts";
}

}  // namespace
}  // namespace gpuhost::supervise
