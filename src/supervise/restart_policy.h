#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace gpuhost::supervise {

struct RestartPolicy {
  int max_restarts = 10;  // crash restarts per supervisor run; preemption stops are not counted
  bool max_restarts_given = false;  // the user chose max_restarts (flag or job file)
  std::chrono::milliseconds initial_backoff{std::chrono::seconds(1)};
  std::chrono::milliseconds max_backoff{std::chrono::minutes(5)};
  double backoff_factor = 2.0;
  // Crash-loop rollback: when the child fails `crash_loop_failures` times in a row, each within
  // `crash_loop_window` of being started from the same checkpoint, that checkpoint is marked bad
  // and the next resume falls back to the one before it. 0 disables.
  int crash_loop_failures = 3;
  std::chrono::milliseconds crash_loop_window{std::chrono::seconds(120)};
  // A trainer that fails the same way (same exit) this soon after every start, crash_loop_failures
  // times in a row, is not helped by restarting: with nothing to resume from, or after a
  // crash-loop rollback that changed nothing (the same failure from the checkpoint before), the
  // run gives up instead of restarting for minutes or marking one good checkpoint after another
  // bad. A typo in the script, a missing module, a wrong path.
  std::chrono::milliseconds startup_window{std::chrono::seconds(10)};
};

// One finished attempt of the child, as the policy sees it.
struct Attempt {
  std::optional<std::string> resumed_from;  // checkpoint id it started from
  std::chrono::milliseconds ran_for{0};
  bool succeeded = false;  // exit code 0
  bool preempted = false;  // stopped by us because of a notice (not a crash)
  std::string failure;     // how it ended ("exit code 1", "killed by SIGSEGV"): same text, same failure
};

struct RestartDecision {
  enum class Action { finish, restart, give_up } action = Action::finish;
  std::chrono::milliseconds delay{0};       // before restarting
  // Checkpoint to mark bad before choosing again. Also set with give_up, so the next
  // `gpuhost run` does not start from it either.
  std::optional<std::string> mark_bad;
  std::string reason;                       // for the journal and the console
};

// Decides what follows `history.back()`. `history` holds this supervisor run's attempts in order
// (earlier runs' attempts are in the journal but do not count towards max_restarts). Pure.
//   - succeeded: finish.
//   - preempted: finish too. The machine is going away; the supervisor exits with the
//     "preempted" outcome and a later `gpuhost run` resumes from the checkpoint it saved.
//   - crashed (anything else): the n-th crash of this history restarts after
//     initial_backoff * backoff_factor^(n-1), capped at max_backoff, while n <= max_restarts;
//     the crash after that gives up (max_restarts = 0: the first crash gives up).
//   - crash loop: attempts that crashed within crash_loop_window of being started from the same
//     checkpoint count towards a streak (a success, a preemption, a longer run, a fresh start or
//     another checkpoint ends it); when the streak reaches crash_loop_failures, mark_bad names
//     that checkpoint and the streak starts again from zero.
//   - the same failure at start-up: crash_loop_failures crashes in a row with the same `failure`,
//     each within startup_window, all with nothing to resume from, give up at once; and a crash
//     loop whose failure is the one that already marked the checkpoint before it bad gives up
//     instead of marking another (the checkpoint is not the cause).
[[nodiscard]] RestartDecision decide_restart(const RestartPolicy& policy, const std::vector<Attempt>& history);

}  // namespace gpuhost::supervise
