#include "supervise/restart_policy.h"

#include <gtest/gtest.h>

namespace gpuhost::supervise {
namespace {

using namespace std::chrono_literals;
using Action = RestartDecision::Action;

// 20 s: inside the crash-loop window, past the start-up window (see the StartupFailure tests).
Attempt crash(std::optional<std::string> from = std::nullopt, std::chrono::milliseconds ran = 20s,
              std::string failure = "exit code 1") {
  return Attempt{std::move(from), ran, false, false, std::move(failure)};
}
Attempt success() {
  return Attempt{std::nullopt, 1h, true, false, "exit code 0"};
}
Attempt preempted(std::optional<std::string> from = std::nullopt) {
  return Attempt{std::move(from), 30s, false, true, "killed by SIGTERM"};
}

RestartPolicy no_crash_loop() {
  RestartPolicy policy;
  policy.crash_loop_failures = 0;
  return policy;
}

TEST(RestartPolicy, SuccessFinishes) {
  auto decision = decide_restart(RestartPolicy{}, {crash(), success()});
  EXPECT_EQ(decision.action, Action::finish);
  EXPECT_FALSE(decision.mark_bad);
}

TEST(RestartPolicy, PreemptionFinishesWithoutCountingAsACrash) {
  auto decision = decide_restart(RestartPolicy{}, {preempted("ck-3")});
  EXPECT_EQ(decision.action, Action::finish);
  EXPECT_NE(decision.reason.find("preemption"), std::string::npos) << decision.reason;
}

TEST(RestartPolicy, BackoffGrowsExponentiallyUpToTheCap) {
  RestartPolicy policy = no_crash_loop();
  policy.max_restarts = 100;
  policy.initial_backoff = 1s;
  policy.backoff_factor = 2.0;
  policy.max_backoff = 10s;
  std::vector<Attempt> history;
  std::vector<std::chrono::milliseconds> delays;
  for (int i = 0; i < 6; ++i) {
    history.push_back(crash());
    auto decision = decide_restart(policy, history);
    ASSERT_EQ(decision.action, Action::restart);
    delays.push_back(decision.delay);
  }
  EXPECT_EQ(delays, (std::vector<std::chrono::milliseconds>{1s, 2s, 4s, 8s, 10s, 10s}));
}

TEST(RestartPolicy, HugeHistoriesStayAtTheCap) {
  RestartPolicy policy = no_crash_loop();
  policy.max_restarts = 5000;
  std::vector<Attempt> history(3000, crash());
  auto decision = decide_restart(policy, history);
  ASSERT_EQ(decision.action, Action::restart);
  EXPECT_EQ(decision.delay, policy.max_backoff);
}

TEST(RestartPolicy, GivesUpAfterMaxRestarts) {
  RestartPolicy policy = no_crash_loop();
  policy.max_restarts = 2;
  EXPECT_EQ(decide_restart(policy, {crash()}).action, Action::restart);
  EXPECT_EQ(decide_restart(policy, {crash(), crash()}).action, Action::restart);
  auto decision = decide_restart(policy, {crash(), crash(), crash()});
  EXPECT_EQ(decision.action, Action::give_up);
  EXPECT_NE(decision.reason.find("max_restarts is 2"), std::string::npos) << decision.reason;

  policy.max_restarts = 0;
  EXPECT_EQ(decide_restart(policy, {crash()}).action, Action::give_up);
}

TEST(RestartPolicy, CrashLoopFromOneCheckpointMarksItBad) {
  RestartPolicy policy;  // 3 failures within 120 s
  EXPECT_FALSE(decide_restart(policy, {crash("ck-9", 5s), crash("ck-9", 5s)}).mark_bad);
  auto decision = decide_restart(policy, {crash("ck-9", 5s), crash("ck-9", 5s), crash("ck-9", 5s)});
  EXPECT_EQ(decision.action, Action::restart);
  EXPECT_EQ(decision.mark_bad, "ck-9");
  EXPECT_NE(decision.reason.find("crash loop"), std::string::npos) << decision.reason;
}

TEST(RestartPolicy, CrashLoopNeedsConsecutiveQuickFailuresFromTheSameCheckpoint) {
  RestartPolicy policy;
  // A long run in between breaks the streak.
  EXPECT_FALSE(decide_restart(policy, {crash("ck-9", 5s), crash("ck-9", 10min), crash("ck-9", 5s)}).mark_bad);
  // Different checkpoints are different streaks.
  EXPECT_FALSE(decide_restart(policy, {crash("ck-9", 5s), crash("ck-7", 5s), crash("ck-9", 5s)}).mark_bad);
  // A fresh start has no checkpoint to blame.
  EXPECT_FALSE(decide_restart(policy, {crash(), crash(), crash()}).mark_bad);
  // The window is inclusive.
  EXPECT_EQ(decide_restart(policy, {crash("ck-1", 120s), crash("ck-1", 120s), crash("ck-1", 120s)}).mark_bad,
            "ck-1");
}

TEST(RestartPolicy, CrashLoopStreakResetsAfterTriggering) {
  // 30 s lives: a crash loop, not the same failure at start-up (which gives up instead).
  RestartPolicy policy;
  std::vector<Attempt> history = {crash("ck-9", 30s), crash("ck-9", 30s), crash("ck-9", 30s)};
  ASSERT_EQ(decide_restart(policy, history).mark_bad, "ck-9");
  // Rolled back to ck-5, which crash-loops too: counted from zero.
  history.push_back(crash("ck-5", 30s));
  EXPECT_FALSE(decide_restart(policy, history).mark_bad);
  history.push_back(crash("ck-5", 30s));
  EXPECT_FALSE(decide_restart(policy, history).mark_bad);
  history.push_back(crash("ck-5", 30s));
  EXPECT_EQ(decide_restart(policy, history).mark_bad, "ck-5");
  // Even if the same checkpoint were tried again, the attempts that already triggered do not count twice.
  history = {crash("ck-9", 30s), crash("ck-9", 30s), crash("ck-9", 30s), crash("ck-9", 30s)};
  EXPECT_FALSE(decide_restart(policy, history).mark_bad);
}

TEST(RestartPolicy, GivingUpStillNamesTheCrashLoopCheckpoint) {
  RestartPolicy policy;
  policy.max_restarts = 2;
  auto decision = decide_restart(policy, {crash("ck-2", 1s), crash("ck-2", 1s), crash("ck-2", 1s)});
  EXPECT_EQ(decision.action, Action::give_up);
  EXPECT_EQ(decision.mark_bad, "ck-2");
}

TEST(RestartPolicy, CrashLoopDetectionCanBeDisabled) {
  auto decision = decide_restart(no_crash_loop(), {crash("ck-9", 1s), crash("ck-9", 1s), crash("ck-9", 1s)});
  EXPECT_EQ(decision.action, Action::restart);
  EXPECT_FALSE(decision.mark_bad);
}

TEST(RestartPolicy, EmptyHistoryFinishes) {
  EXPECT_EQ(decide_restart(RestartPolicy{}, {}).action, Action::finish);
}

// A trainer that cannot start (a typo, a missing module) fails the same way each time: three
// in a row with nothing to resume from end the run, not ten restarts over minutes.
TEST(RestartPolicy, TheSameStartupFailureWithNothingToResumeGivesUp) {
  RestartPolicy policy;
  std::vector<Attempt> history = {crash(std::nullopt, 1500ms), crash(std::nullopt, 1200ms)};
  EXPECT_EQ(decide_restart(policy, history).action, Action::restart);
  history.push_back(crash(std::nullopt, 1400ms));
  auto decision = decide_restart(policy, history);
  EXPECT_EQ(decision.action, Action::give_up);
  EXPECT_NE(decision.reason.find("failed the same way (exit code 1)"), std::string::npos) << decision.reason;
  EXPECT_NE(decision.reason.find("nothing to resume from"), std::string::npos);
  EXPECT_FALSE(decision.mark_bad);
}

TEST(RestartPolicy, DifferentOrSlowStartupFailuresKeepRestarting) {
  RestartPolicy policy;
  EXPECT_EQ(decide_restart(policy, {crash(std::nullopt, 1s, "exit code 1"), crash(std::nullopt, 1s, "exit code 2"),
                                    crash(std::nullopt, 1s, "exit code 1")})
                .action,
            Action::restart);
  EXPECT_EQ(decide_restart(policy, {crash(std::nullopt, 1s), crash(std::nullopt, 30s), crash(std::nullopt, 1s)}).action,
            Action::restart)
      << "a life past the start-up window breaks the streak";
  policy.crash_loop_failures = 0;
  EXPECT_EQ(decide_restart(policy, {crash(std::nullopt, 1s), crash(std::nullopt, 1s), crash(std::nullopt, 1s)}).action,
            Action::restart)
      << "crash-loop detection off turns this off too";
}

// The crash loop marks a checkpoint bad and falls back; when the same quick failure follows
// from the one before, the checkpoints are not the cause: give up rather than mark it bad too.
TEST(RestartPolicy, ARollbackThatChangesNothingGivesUpInsteadOfMarkingAnother) {
  RestartPolicy policy;
  policy.crash_loop_failures = 2;
  std::vector<Attempt> history = {crash("ck-10", 800ms), crash("ck-10", 800ms)};
  auto first = decide_restart(policy, history);
  EXPECT_EQ(first.action, Action::restart);
  EXPECT_EQ(first.mark_bad, "ck-10");
  history.push_back(crash("ck-5", 800ms));
  EXPECT_EQ(decide_restart(policy, history).action, Action::restart);
  history.push_back(crash("ck-5", 800ms));
  auto second = decide_restart(policy, history);
  EXPECT_EQ(second.action, Action::give_up);
  EXPECT_FALSE(second.mark_bad) << "ck-5 is not to blame";
  EXPECT_NE(second.reason.find("from different checkpoints"), std::string::npos) << second.reason;
}

}  // namespace
}  // namespace gpuhost::supervise
