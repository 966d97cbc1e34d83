#include "supervise/restart_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpuhost::supervise {
namespace {

bool crashed(const Attempt& attempt) {
  return !attempt.succeeded && !attempt.preempted;
}

std::string seconds_text(std::chrono::milliseconds ms) {
  if (ms.count() % 1000 == 0) return std::to_string(ms.count() / 1000) + " s";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ms.count()) / 1000.0);
  return buf;
}

// initial * factor^(n-1), capped; computed in double so a long history cannot overflow.
std::chrono::milliseconds backoff(const RestartPolicy& policy, int crash_count) {
  double factor = std::max(policy.backoff_factor, 1.0);
  double ms = static_cast<double>(policy.initial_backoff.count()) * std::pow(factor, crash_count - 1);
  double cap = static_cast<double>(std::max(policy.max_backoff, policy.initial_backoff).count());
  return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(std::min(ms, cap)));
}

// The checkpoint whose crash loop the last attempt completes, if it does. A streak is a run of
// consecutive crashes, each within the window of starting, all from the same checkpoint; it
// resets when it triggers, so the same attempts never mark two checkpoints.
std::optional<std::string> crash_loop(const RestartPolicy& policy, const std::vector<Attempt>& history) {
  if (policy.crash_loop_failures <= 0) return std::nullopt;
  int streak = 0;
  std::optional<std::string> from;
  bool triggered_last = false;
  for (const Attempt& attempt : history) {
    triggered_last = false;
    bool counts = crashed(attempt) && attempt.resumed_from && attempt.ran_for <= policy.crash_loop_window;
    if (!counts) {
      streak = 0;
      from.reset();
      continue;
    }
    if (streak > 0 && from != attempt.resumed_from) streak = 0;
    from = attempt.resumed_from;
    if (++streak >= policy.crash_loop_failures) {
      triggered_last = true;
      streak = 0;
    }
  }
  if (triggered_last) return from;
  return std::nullopt;
}

// The trailing streak of identical quick crashes (same failure text, each within the start-up
// window), as the attempts it holds; empty when the last attempt is not one.
std::vector<const Attempt*> startup_streak(const RestartPolicy& policy, const std::vector<Attempt>& history) {
  std::vector<const Attempt*> streak;
  for (auto it = history.rbegin(); it != history.rend(); ++it) {
    if (!crashed(*it) || it->ran_for > policy.startup_window) break;
    if (!streak.empty() && it->failure != streak.front()->failure) break;
    streak.push_back(&*it);
  }
  return streak;
}

}  // namespace

RestartDecision decide_restart(const RestartPolicy& policy, const std::vector<Attempt>& history) {
  RestartDecision decision;
  if (history.empty()) {
    decision.reason = "nothing ran";
    return decision;
  }
  const Attempt& last = history.back();
  if (last.succeeded) {
    decision.reason = "the job finished";
    return decision;
  }
  if (last.preempted) {
    // The machine is going away; the supervisor exits "preempted" and a later `gpuhost run` on
    // this or another machine resumes from the checkpoint saved for the notice.
    decision.reason = "stopped for a preemption notice";
    return decision;
  }

  const int crashes = static_cast<int>(std::count_if(history.begin(), history.end(), crashed));
  const int needed = std::max(policy.crash_loop_failures, 1);
  if (policy.crash_loop_failures > 0) {
    auto streak = startup_streak(policy, history);
    const bool nothing_to_resume =
        static_cast<int>(streak.size()) >= needed &&
        std::all_of(streak.begin(), streak.begin() + needed, [](const Attempt* a) { return !a->resumed_from; });
    // Twice the count, from at least two checkpoints: one rollback already changed nothing.
    bool several_checkpoints = false;
    if (static_cast<int>(streak.size()) >= 2 * needed) {
      for (int i = 1; i < 2 * needed; ++i) several_checkpoints |= streak[i]->resumed_from != streak[0]->resumed_from;
    }
    if (nothing_to_resume || several_checkpoints) {
      decision.action = RestartDecision::Action::give_up;
      decision.reason = "the trainer failed the same way (" + last.failure + ") within " +
                        seconds_text(policy.startup_window) + " of starting, " + std::to_string(streak.size()) +
                        " times in a row" +
                        (nothing_to_resume ? std::string(" with nothing to resume from")
                                           : std::string(" from different checkpoints")) +
                        ": restarting will not fix it";
      return decision;
    }
  }
  decision.mark_bad = crash_loop(policy, history);
  std::string loop_note;
  if (decision.mark_bad)
    loop_note = "; crash loop: " + std::to_string(policy.crash_loop_failures) + " failures in a row within " +
                seconds_text(policy.crash_loop_window) + " of starting from " + *decision.mark_bad +
                ", marking it bad";

  // crashes - 1 restarts have happened; one more is allowed while that stays under the limit.
  if (crashes > policy.max_restarts) {
    decision.action = RestartDecision::Action::give_up;
    decision.reason = "crashed " + std::to_string(crashes) + (crashes == 1 ? " time" : " times") +
                      ", max_restarts is " + std::to_string(policy.max_restarts) + loop_note;
    return decision;
  }
  decision.action = RestartDecision::Action::restart;
  decision.delay = backoff(policy, crashes);
  decision.reason = "restart " + std::to_string(crashes) + " of " + std::to_string(policy.max_restarts) +
                    " in " + seconds_text(decision.delay) + loop_note;
  return decision;
}

}  // namespace gpuhost::supervise
