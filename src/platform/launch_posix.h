#pragma once
// How a child is started on POSIX, used by ChildProcess (child_process_posix.cc), on which
// run_process is built, and by find_executable (process_posix.cc). Only the *_posix.cc files of
// platform/ include this.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <sys/types.h>

#include "base/error.h"
#include "platform/posix_util.h"

namespace gpuhost::platform::launch {

enum class Matches { first, all };

// Executable files named `name` in the ':'-separated `path_value` (or `name` itself when it holds
// a '/'), in PATH order, without duplicates of the same file.
[[nodiscard]] std::vector<std::string> search_path(std::string_view name, std::string_view path_value,
                                                   Matches matches);

// Our PATH, or the POSIX default when it is unset.
[[nodiscard]] std::string current_path_value();

// The file argv[0] names, found on the child's PATH (an override in `environment` wins, as with
// execvpe). Errors: invalid_argument for an empty argv, not_found when there is no such program.
[[nodiscard]] Result<std::string> resolve_program(
    const std::vector<std::string>& argv,
    const std::vector<std::pair<std::string, std::string>>& environment);

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

// A close-on-exec pipe whose ends are both above fd 2, so the dup2 calls in exec_child cannot
// clobber them when the parent runs with a closed stdin or stdout.
[[nodiscard]] Result<Pipe> make_pipe();

// /dev/null for reading, close-on-exec, above fd 2.
[[nodiscard]] Result<UniqueFd> open_null_input();

// Our environment with `overrides` applied, as "name=value" strings.
[[nodiscard]] std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides);

// Pointers into `strings`, null-terminated, as execve wants them. `strings` must outlive them.
[[nodiscard]] std::vector<char*> pointers(std::vector<std::string>& strings);

// Everything the child needs, prepared before fork: after fork only async-signal-safe calls are
// allowed, since other threads may hold the malloc lock.
struct ChildSetup {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* working_directory = nullptr;  // nullptr: stay where we are
  int stdin_fd = -1;                        // -1: keep ours
  int stdout_fd = -1;
  int stderr_fd = -1;
  int status_fd = -1;  // the write end of a close-on-exec pipe; see read_exec_failure
  int cgroup_procs_fd = -1;  // a cgroup's cgroup.procs: the child writes "0" to move itself in
  // Linux: SIGKILL the child when the thread that forked it ends (PR_SET_PDEATHSIG).
  bool die_with_parent = false;
  pid_t parent_pid = 0;  // getpid() before fork, to notice a parent that died before prctl
};

// Runs in the forked child: its own process group, default signal mask and dispositions, the
// given stdio, then execve. Never returns; on failure reports through status_fd and exits 127.
[[noreturn]] void exec_child(const ChildSetup& setup);

// Reads the status pipe after fork (the caller has closed its copy of the write end). Success when
// exec happened (the pipe closed empty); otherwise the error from chdir ("running <program>:
// changing to directory <dir>: ...") or execve ("running <resolved>: ..."). On failure the child
// has exited and must still be reaped.
[[nodiscard]] Result<void> read_exec_failure(int status_fd, const std::string& program,
                                             const std::string& resolved, const char* working_directory);

// A pollable handle on the child's exit (Linux 5.3+ pidfd_open); empty where unsupported.
[[nodiscard]] UniqueFd open_pidfd(pid_t pid);

}  // namespace gpuhost::platform::launch
