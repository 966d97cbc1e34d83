#include "supervise/stop_controller.h"

#include <algorithm>
#include <string_view>

namespace gpuhost::supervise {

const char* launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::none: return "none";
    case Launcher::torchrun: return "torchrun";
    case Launcher::accelerate: return "accelerate";
    case Launcher::deepspeed: return "deepspeed";
    case Launcher::mpirun: return "mpirun";
    case Launcher::horovodrun: return "horovodrun";
  }
  return "none";
}

namespace {

std::string_view base_name(std::string_view word) {
  auto slash = word.find_last_of("/\\");
  return slash == std::string_view::npos ? word : word.substr(slash + 1);
}

std::vector<std::string_view> words(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    auto start = text.find_first_not_of(' ');
    if (start == std::string_view::npos) break;
    text.remove_prefix(start);
    auto end = text.find(' ');
    out.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end);
  }
  return out;
}

std::optional<Launcher> launcher_word(std::string_view word) {
  std::string_view name = base_name(word);
  if (name == "torchrun" || name == "torch.distributed.run" || name == "torch.distributed.launch")
    return Launcher::torchrun;
  if (name == "accelerate" || name == "accelerate-launch") return Launcher::accelerate;
  if (name == "deepspeed") return Launcher::deepspeed;
  if (name == "mpirun" || name == "mpiexec" || name == "orterun" || name == "prterun") return Launcher::mpirun;
  if (name == "horovodrun") return Launcher::horovodrun;
  return std::nullopt;
}

}  // namespace

Launcher launcher_of(const platform::TreeMember& member) {
  // The program, or the script/module an interpreter runs: "python3 /usr/bin/torchrun ...",
  // "python -m torch.distributed.run ...". Later words are the trainer's own arguments.
  std::vector<std::string_view> argv = words(member.command_line);
  if (argv.empty()) {
    if (auto l = launcher_word(member.name)) return *l;
    return Launcher::none;
  }
  if (auto l = launcher_word(argv[0])) return *l;
  const std::string_view program = base_name(argv[0]);
  if (!program.starts_with("python")) return Launcher::none;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == "-m" && i + 1 < argv.size()) return launcher_word(argv[i + 1]).value_or(Launcher::none);
    if (argv[i].starts_with('-')) continue;  // interpreter options (-u, -X ...)
    return launcher_word(argv[i]).value_or(Launcher::none);
  }
  return Launcher::none;
}

std::chrono::seconds launcher_shutdown_time(Launcher launcher) {
  switch (launcher) {
    case Launcher::torchrun:
    case Launcher::accelerate: return std::chrono::seconds(30);
    default: return std::chrono::seconds(0);
  }
}

SaveTargets choose_save_targets(std::span<const platform::TreeMember> members, bool declared) {
  SaveTargets targets;
  for (const platform::TreeMember& member : members) {
    const Launcher launcher = launcher_of(member);
    if (launcher != Launcher::none && targets.launcher == Launcher::none) targets.launcher = launcher;
    if (!member.catches) {
      targets.unknown = true;
      continue;
    }
    if (*member.catches) {
      targets.pids.push_back(member.pid);
    } else {
      std::string who = launcher != Launcher::none ? launcher_name(launcher) : member.name;
      who += " (pid " + std::to_string(member.pid) + ")";
      if (launcher != Launcher::none) {
        targets.spared.insert(targets.spared.begin(), std::move(who));
      } else {
        targets.spared.push_back(std::move(who));
      }
    }
  }
  // Where the OS cannot tell, the signal goes to the whole group only on the job's word.
  if (targets.unknown) {
    targets.pids.clear();
    if (declared && !members.empty()) targets.pids.push_back(members.front().pid);
  }
  return targets;
}

std::optional<std::chrono::milliseconds> checkpoint_cadence(std::span<const WallTime> written) {
  if (written.size() < 2) return std::nullopt;
  std::vector<std::chrono::milliseconds> gaps;
  const std::size_t first = written.size() > 6 ? written.size() - 6 : 0;
  for (std::size_t i = first + 1; i < written.size(); ++i) {
    auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(written[i] - written[i - 1]);
    if (gap.count() > 0) gaps.push_back(gap);
  }
  if (gaps.empty()) return std::nullopt;
  std::sort(gaps.begin(), gaps.end());
  return gaps[gaps.size() / 2];
}

std::chrono::milliseconds mtime_slack(WallTime written) {
  const bool whole_second = written.time_since_epoch() % std::chrono::seconds(1) == WallTime::duration::zero();
  return whole_second ? std::chrono::milliseconds(k_coarse_mtime_slack) : k_mtime_slack;
}

StopCause StopController::outcome() const {
  if (m_phase == Phase::idle || m_advisory) return StopCause::none;
  return m_cause;
}

StopActions StopController::notice(const Notice& notice, bool save_requested) {
  StopActions actions;
  const SteadyTime save_deadline = notice.deadline - m_timing.safety_margin;
  if (m_phase == Phase::idle) {
    m_cause = notice.cause;
    m_advisory = notice.advisory;
    m_interrupted = notice.cause == StopCause::user_stop;
    m_killed = false;
    m_received = notice.now;
    m_received_wall = notice.now_wall;
    m_deadline = notice.deadline;
    m_save_deadline = save_deadline;
    m_kill_at.reset();
    if (save_requested) {
      m_phase = Phase::saving;
      actions.request_save = true;
    } else if (!notice.advisory) {
      actions = begin_stop(std::max(notice.now, save_deadline));
    }
    return actions;
  }
  if (notice.cause == StopCause::user_stop) {
    if (m_interrupted && !m_killed) {
      m_killed = true;
      actions.kill = true;
      return actions;
    }
    m_interrupted = true;
  }
  m_deadline = std::min(*m_deadline, notice.deadline);
  if (m_phase == Phase::saving) {
    m_save_deadline = std::min(*m_save_deadline, save_deadline);
    // Another node saw the same preemption earlier (a peer's notice carries when): the save
    // window opens then, so the checkpoint the ranks wrote for that node's request counts here.
    if (m_received_wall && notice.now_wall < *m_received_wall) m_received_wall = notice.now_wall;
    if (m_advisory && !notice.advisory) {
      m_advisory = false;  // the save already asked for now ends in a stop
      m_cause = notice.cause;
    }
  } else if (m_kill_at) {
    m_kill_at = std::min(*m_kill_at, std::max(notice.now, notice.deadline));
  }
  return actions;
}

void StopController::set_launcher(Launcher launcher) {
  const auto shutdown = launcher_shutdown_time(launcher);
  m_grace = shutdown.count() > 0 ? std::max<std::chrono::milliseconds>(m_timing.stop_grace, shutdown + std::chrono::seconds(2))
                                 : m_timing.stop_grace;
}

StopActions StopController::begin_stop(SteadyTime kill_at) {
  StopActions actions;
  m_phase = Phase::stopping;
  m_kill_at = kill_at;
  actions.send_stop = true;
  return actions;
}

StopActions StopController::checkpoint_committed(WallTime written, SteadyTime now) {
  if (m_phase != Phase::saving || written + mtime_slack(written) < *m_received_wall) return {};
  if (m_advisory) {
    StopActions actions;
    actions.save_completed = true;
    actions.resume_training = true;
    reset();
    return actions;
  }
  // The stop gets its grace, but never past the deadline: the machine is gone then.
  StopActions actions = begin_stop(std::max(now, std::min(now + m_grace, *m_deadline)));
  actions.save_completed = true;
  return actions;
}

StopActions StopController::tick(SteadyTime now) {
  StopActions actions;
  if (m_phase == Phase::saving && now >= *m_save_deadline) {
    if (m_advisory) {
      reset();
      actions.save_timed_out = true;
      return actions;
    }
    // What is left of the margin goes to a graceful stop, then the tree is killed.
    actions = begin_stop(now + std::min<std::chrono::milliseconds>(m_grace, m_timing.safety_margin / 2));
    actions.save_timed_out = true;
    return actions;
  }
  if (m_phase == Phase::stopping && !m_killed && m_kill_at && now >= *m_kill_at) {
    m_killed = true;
    actions.kill = true;
  }
  return actions;
}

void StopController::reset() {
  m_phase = Phase::idle;
  m_cause = StopCause::none;
  m_advisory = false;
  m_killed = false;
  m_interrupted = false;
  m_received.reset();
  m_received_wall.reset();
  m_deadline.reset();
  m_save_deadline.reset();
  m_kill_at.reset();
  m_grace = m_timing.stop_grace;
}

}  // namespace gpuhost::supervise
