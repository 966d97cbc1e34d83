#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "platform/child_process.h"

namespace gpuhost::supervise {

// How `gpuhost run` turns a notice into a saved checkpoint and a stopped trainer, as pure
// decisions: the supervisor feeds in what happened (notices, commits, interrupts, the clock)
// and carries out what comes back. No I/O, no clock of its own, so every combination of
// notice, deadline, handler and launcher is unit-tested (stop_controller_test.cc).
// doc/run-signals.md describes the behaviour for users.

using SteadyTime = std::chrono::steady_clock::time_point;
using WallTime = std::chrono::system_clock::time_point;

// Why the trainer is being stopped.
enum class StopCause { none, preemption, user_stop };

// Launchers gpuhost knows: they start the real trainers as their children and must never get a
// signal they do not handle (torchrun's agent dies of SIGUSR1 and orphans its workers).
enum class Launcher { none, torchrun, accelerate, deepspeed, mpirun, horovodrun };
[[nodiscard]] const char* launcher_name(Launcher launcher);
// How long a launcher takes its workers down itself after the stop signal before it kills them:
// torchrun's agent (also under `accelerate launch`, which runs torch.distributed.run's launcher
// for several processes) waits 30 s for all local ranks together, then SIGKILLs them
// (torch/distributed/elastic/agent/server/local_elastic_agent.py, `_shutdown(timeout=30)`;
// pytorch/pytorch#119856). Zero for the others.
[[nodiscard]] std::chrono::seconds launcher_shutdown_time(Launcher launcher);
// From a process's command line ("python3 /usr/bin/torchrun ...", "python -m
// torch.distributed.run ...", "accelerate launch ...", "mpirun -np 2 ..."). none otherwise.
[[nodiscard]] Launcher launcher_of(const platform::TreeMember& member);

// Who gets the save signal, chosen from the trainer's tree at the moment of the notice.
struct SaveTargets {
  std::vector<long> pids;  // processes that catch the signal: each gets it, alone
  // Members that do not catch it (launchers first), as "torchrun (pid 12)": left alone.
  std::vector<std::string> spared;
  Launcher launcher = Launcher::none;  // the first launcher in the tree
  // The OS cannot tell who catches it (Windows): the signal goes to the whole group, and only
  // when the job declared a handler.
  bool unknown = false;
};
// `declared`: the user named the save signal (--save-signal / save_signal in the job file), a
// promise that the trainer handles it. Used only where the OS cannot tell (Windows).
[[nodiscard]] SaveTargets choose_save_targets(std::span<const platform::TreeMember> members, bool declared);

// The trainer's own checkpoint rhythm, from when its checkpoints were written (oldest first):
// the median of the last (up to) five intervals. nullopt with fewer than two writes.
[[nodiscard]] std::optional<std::chrono::milliseconds> checkpoint_cadence(std::span<const WallTime> written);

// A checkpoint counts as the save a notice asked for only if its bytes were written at or after
// the notice: never one written before it and merely committed after (the settle delay), never
// by when gpuhost first saw it. The kernel stamps mtimes from a coarse clock (one tick, up to
// 10 ms at HZ=100, behind the precise clock gpuhost reads), so a write just after the notice may
// carry a time this much earlier; nothing a trainer writes in 20 ms is a whole checkpoint.
inline constexpr std::chrono::milliseconds k_mtime_slack{20};
// A file system that keeps whole seconds only (FAT's 2 s, some network shares; a time with no
// sub-second part says so) cannot tell a write just after the notice from one up to 2 s before.
inline constexpr std::chrono::seconds k_coarse_mtime_slack{2};
// The slack for a checkpoint last written at `written`.
[[nodiscard]] std::chrono::milliseconds mtime_slack(WallTime written);

struct StopTiming {
  std::chrono::milliseconds safety_margin{std::chrono::seconds(5)};  // stop waiting this long before the deadline
  std::chrono::milliseconds stop_grace{std::chrono::seconds(10)};    // stop signal -> kill
};

// What the supervisor must do after an event or a tick; several may be set at once.
struct StopActions {
  bool request_save = false;    // ask the trainer to save now (signal / request file)
  bool send_stop = false;       // send the stop signal now
  bool kill = false;            // kill the whole tree now
  bool save_completed = false;  // the checkpoint just committed is the save: journal it
  bool save_timed_out = false;  // the deadline came before the save: journal it
  bool resume_training = false;  // an advisory's save is in: the notice is over, training goes on
};

// One notice (or Ctrl-C / SIGTERM) from arrival to the trainer's stop. Not thread-safe; the
// supervisor's loop owns it. A new attempt of the trainer starts with reset().
class StopController {
 public:
  enum class Phase {
    idle,      // no notice
    saving,    // waiting for a checkpoint written after the notice (asked for, or periodic)
    stopping,  // the stop signal was sent; the tree is killed at kill_at()
  };

  struct Notice {
    StopCause cause = StopCause::preemption;
    bool advisory = false;  // save and keep training (AWS rebalance, Azure Reboot)
    SteadyTime now;
    WallTime now_wall;
    SteadyTime deadline;  // when the machine goes away
  };

  explicit StopController(StopTiming timing) : m_timing(timing), m_grace(timing.stop_grace) {}

  // A notice arrives (`now_wall`: when it was first seen, on another node for a relayed one; an
  // earlier one opens the save window there). `save_requested`: false when nothing can be asked of the trainer
  // (--save-request none): it is then stopped at once, with the tree killed at the deadline
  // less the margin. Returns what to do now. A later notice only brings the deadline forward; a
  // preemption arriving during an advisory's save turns it into a stop. A second Ctrl-C
  // (cause user_stop) while a stop is under way kills the tree at once (doc/exit-codes.md).
  [[nodiscard]] StopActions notice(const Notice& notice, bool save_requested);

  // A checkpoint whose newest byte was written at `written` was committed.
  [[nodiscard]] StopActions checkpoint_committed(WallTime written, SteadyTime now);

  // The launcher found in the trainer's tree at the notice. A stop then waits for the launcher's
  // own shutdown (plus 2 s for it to exit) when that is longer than stop_grace, so torchrun
  // takes its workers down in order instead of being killed in the middle; never past the
  // deadline. Call before notice().
  void set_launcher(Launcher launcher);

  // Call every loop turn.
  [[nodiscard]] StopActions tick(SteadyTime now);

  // The trainer ended (by itself or by us): forget the notice but keep the cause, so a notice
  // that came while it was exiting still ends the run.
  void reset();

  [[nodiscard]] Phase phase() const { return m_phase; }
  // Why this attempt ends, if a notice ends it: a preemption or user stop that is saving or
  // stopping (also when the trainer exited on its own meanwhile: the machine goes away either
  // way); none when idle or for an advisory.
  [[nodiscard]] StopCause outcome() const;
  [[nodiscard]] std::optional<SteadyTime> save_deadline() const { return m_save_deadline; }
  [[nodiscard]] std::optional<SteadyTime> kill_at() const { return m_kill_at; }
  [[nodiscard]] std::optional<SteadyTime> received() const { return m_received; }
  [[nodiscard]] std::optional<WallTime> received_wall() const { return m_received_wall; }

 private:
  StopActions begin_stop(SteadyTime kill_at);

  StopTiming m_timing;
  std::chrono::milliseconds m_grace;  // stop signal -> kill for this notice (see set_launcher)
  Phase m_phase = Phase::idle;
  StopCause m_cause = StopCause::none;
  bool m_advisory = false;
  bool m_killed = false;
  bool m_interrupted = false;  // a Ctrl-C was taken during this notice
  std::optional<SteadyTime> m_received;
  std::optional<WallTime> m_received_wall;
  std::optional<SteadyTime> m_deadline;
  std::optional<SteadyTime> m_save_deadline;
  std::optional<SteadyTime> m_kill_at;
};

}  // namespace gpuhost::supervise
