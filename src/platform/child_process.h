#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

class JobCgroup;

// A long-running child supervised by gpuhost run: unlike run_process (which runs a tool to
// completion), the caller keeps the child, streams its output, signals it and waits in steps.
//
// Isolation: POSIX: the child leads its own process group (setpgid) so signals we send reach the
// whole tree and a terminal's Ctrl-C reaches only us; on Linux it also gets PR_SET_PDEATHSIG
// SIGKILL, so a supervisor killed with SIGKILL does not leave its direct child running. That
// signal follows the *thread* that called spawn(): spawn from a thread that outlives the child.
// Windows: CREATE_NEW_PROCESS_GROUP (so CTRL_BREAK can target it) inside a Job Object with
// JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE, created suspended and assigned before it runs, so the
// tree dies with the supervisor whatever kills it. The child shares the supervisor's console
// (no CREATE_NO_WINDOW): console control events only reach processes attached to our console.
// A supervisor without a console (detached, a service, Wine without a terminal) gets a hidden
// one (AllocConsole) on the first spawn; its std handles stay as they were.

enum class OutputStream { out, err };

// Called from the child's reader threads with each chunk of output as it arrives (not split
// into lines). Must be thread-safe: stdout and stderr chunks arrive on two threads.
using OutputHandler = std::function<void(OutputStream stream, std::string_view chunk)>;

struct ChildOptions {
  std::vector<std::string> argv;  // argv[0] is a path or a name looked up on PATH
  std::optional<std::string> working_directory;
  // Added to (or replacing) the inherited environment for the child only.
  std::vector<std::pair<std::string, std::string>> environment;
  // Receives stdout and stderr. Without one, the child inherits our stdout and stderr.
  OutputHandler on_output;
  // Written to the child's stdin (by a thread of its own), which is then closed. Without it
  // stdin is the null device. A child that exits without reading it is not an error.
  std::optional<std::string> stdin_text;
  // Windows: the child shares our console (made if we have none), so CTRL_BREAK can reach it: a
  // supervised trainer. false for a tool run to completion (run_process): no console is made
  // for it and none is shown (CREATE_NO_WINDOW). Ignored on POSIX.
  bool console = true;
  // Linux: the child moves itself into this cgroup before exec, so its whole tree lives there
  // whatever it does (setsid, double fork); members() lists it and the end of the child kills
  // it and waits until it is empty. Must outlive the ChildProcess. Ignored on Windows.
  JobCgroup* cgroup = nullptr;
};

// The save / stop requests a supervisor can send. POSIX: the named signal to the child's whole
// process group. Windows: ctrl_break is GenerateConsoleCtrlEvent(CTRL_BREAK_EVENT, group);
// the POSIX-only signals are `unsupported` there. Wine (8.0) cannot deliver CTRL_BREAK at all;
// there the child's group gets CTRL_C_EVENT instead, which reaches only a child that re-enabled
// Ctrl-C with SetConsoleCtrlHandler(NULL, FALSE) (a new process group starts with it ignored).
enum class ChildSignal { interrupt, terminate, hangup, user1, user2, ctrl_break };

[[nodiscard]] const char* child_signal_name(ChildSignal signal);  // "SIGUSR1", "CTRL_BREAK", ...
// Parses "SIGUSR1", "USR1", "usr1", "CTRL_BREAK", "ctrl-break", "SIGTERM" ...; nullopt otherwise.
[[nodiscard]] std::optional<ChildSignal> parse_child_signal(std::string_view text);
// SIGUSR1 on POSIX, CTRL_BREAK on Windows: the default "save now" request.
[[nodiscard]] ChildSignal default_save_signal();
// SIGTERM on POSIX, CTRL_BREAK on Windows: the default "stop gracefully" request.
[[nodiscard]] ChildSignal default_stop_signal();

struct ChildExit {
  int exit_code = -1;  // valid when !signaled
  bool signaled = false;
  int signal = 0;      // POSIX signal number when signaled
  // CPU time (user + system) of the child and the descendants it waited for (POSIX: wait4's
  // rusage; Windows: the Job Object's accounting, i.e. the whole tree).
  std::chrono::microseconds cpu_time{0};
  std::uint64_t peak_rss_bytes = 0;  // POSIX: ru_maxrss of the child; Windows: job peak memory

  [[nodiscard]] bool succeeded() const { return !signaled && exit_code == 0; }
  // "exit code 3", "killed by SIGKILL", "exit code 0xC0000005 (access violation)".
  [[nodiscard]] std::string describe() const;
};

// One process of a supervised child's tree.
struct TreeMember {
  long pid = 0;
  long parent_pid = 0;
  std::string name;          // the executable's short name (comm / image name)
  std::string command_line;  // arguments joined by spaces (Linux; empty where unreadable)
  // Whether it has a handler installed for the probed signal: Linux reads SigCgt from
  // /proc/PID/status (proc(5)). nullopt where the OS cannot tell (Windows: console control
  // handlers are not visible from outside the process).
  std::optional<bool> catches;
};

// Move-only owner of one running child. The destructor kills the whole tree and reaps it if
// the caller has not waited it out ("reap child if forgotten"). Methods may be called from one
// thread at a time; the output handler runs on internal threads that are joined by wait_for()
// after exit and by the destructor.
class ChildProcess {
 public:
  // Starts the child. Errors: not_found when the program does not exist, io_error otherwise.
  [[nodiscard]] static Result<ChildProcess> spawn(const ChildOptions& options);

  ChildProcess(ChildProcess&& other) noexcept;
  ChildProcess& operator=(ChildProcess&& other) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  [[nodiscard]] long pid() const;

  // Sends `signal` to the child's process group. Sending to a child that has already exited is
  // not an error.
  [[nodiscard]] Result<void> send(ChildSignal signal);

  // Kills the child and every descendant at once (SIGKILL to the group / TerminateJobObject).
  void kill_tree();

  // The processes of the child's tree as the OS shows them now: its process group plus every
  // descendant that left it (Linux, from /proc) and everything in its cgroup, or the Job
  // Object's processes (Windows). Each
  // says whether it has a handler for `probe`, so a save request is sent only to processes
  // that catch it and never kills one that does not (a launcher such as torchrun, a trainer
  // with no handler). Empty once the child has been reaped.
  [[nodiscard]] Result<std::vector<TreeMember>> members(ChildSignal probe) const;

  // Sends `signal` to one process of the tree (POSIX kill(2)). Windows: unsupported (console
  // events go to a whole process group; use send()). A process that has exited is not an error.
  [[nodiscard]] Result<void> send_to(long pid, ChildSignal signal);

  // Waits up to `timeout` for the child to exit. nullopt while it still runs. Once it has
  // exited, what it left running in its process group / cgroup / Job Object has been killed
  // (the group before the child is reaped, so its id cannot have been reused; the cgroup waited
  // on until it is empty, at most 10 s), all of its output has been
  // delivered to the handler before this returns, and later calls return the same exit.
  [[nodiscard]] Result<std::optional<ChildExit>> wait_for(std::chrono::milliseconds timeout);

 private:
  struct State;
  explicit ChildProcess(std::unique_ptr<State> state);
  std::unique_ptr<State> m_state;
};

// Kills every process left over from an earlier supervisor or attempt of the same job: Linux
// scans /proc for processes whose environment holds `name=value` (the attempt's run token) and
// SIGKILLs them, again and again until a scan finds none (at most 10 s); returns how many it
// killed. Windows: 0 (the kill-on-close Job Object already did it).
[[nodiscard]] int kill_processes_with_environment(std::string_view name, std::string_view value);

// Linux: makes this process a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so descendants
// of a supervised child whose parent dies are re-parented to us and stay in the tree that
// ChildProcess::members() walks and kills, instead of escaping to init. Windows: nothing (the
// Job Object holds the tree).
void become_child_subreaper();

// CPU time and peak resident memory of this process so far (getrusage / GetProcessTimes +
// GetProcessMemoryInfo).
struct ResourceUsage {
  std::chrono::microseconds cpu_time{0};
  std::uint64_t peak_rss_bytes = 0;
};
[[nodiscard]] ResourceUsage self_resource_usage();

}  // namespace gpuhost::platform
