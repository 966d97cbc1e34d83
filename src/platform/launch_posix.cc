#include "platform/launch_posix.h"

#include <set>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifdef __linux__
#include <sys/prctl.h>
#endif

#include "base/strings.h"

extern char** environ;

namespace gpuhost::platform::launch {
namespace {

bool is_executable_file(const std::string& path, struct stat* st) {
  return ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode) && ::access(path.c_str(), X_OK) == 0;
}

bool move_above_stdio(UniqueFd& fd) {
  if (fd.get() > 2) return true;
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return false;
  fd.reset(moved);
  return true;
}

// What the child reports through the status pipe when it cannot exec.
struct ExecFailure {
  int stage;  // 0: chdir, 1: execve
  int error_number;
};

[[noreturn]] void report_and_exit(int status_fd, int stage, int error_number) {
  ExecFailure failure{stage, error_number};
  ssize_t ignored = ::write(status_fd, &failure, sizeof failure);
  (void)ignored;
  ::_exit(127);
}

}  // namespace

std::vector<std::string> search_path(std::string_view name, std::string_view path_value, Matches matches) {
  std::vector<std::string> found;
  if (name.empty()) return found;
  struct stat st;
  if (name.find('/') != std::string_view::npos) {
    if (is_executable_file(std::string(name), &st)) found.emplace_back(name);
    return found;
  }
  std::set<std::pair<dev_t, ino_t>> seen;
  for (const std::string& dir : split(path_value, ':')) {
    // An empty PATH entry means the current directory (POSIX execvp).
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + std::string(name);
    if (!is_executable_file(candidate, &st)) continue;
    if (!seen.insert({st.st_dev, st.st_ino}).second) continue;
    found.push_back(std::move(candidate));
    if (matches == Matches::first) break;
  }
  return found;
}

std::string current_path_value() {
  const char* value = ::getenv("PATH");
  return value ? value : "/usr/local/bin:/usr/bin:/bin";
}

Result<std::string> resolve_program(const std::vector<std::string>& argv,
                                    const std::vector<std::pair<std::string, std::string>>& environment) {
  if (argv.empty() || argv[0].empty())
    return make_error(ErrorCode::invalid_argument, "running a process: no program given");
  const std::string& program = argv[0];
  std::string path_value = current_path_value();
  for (const auto& [name, value] : environment)
    if (name == "PATH") path_value = value;
  std::vector<std::string> resolved = search_path(program, path_value, Matches::first);
  if (resolved.empty()) {
    bool has_dir = program.find('/') != std::string::npos;
    return make_error(ErrorCode::not_found, "running " + program + ": " +
                                                (has_dir ? "no such executable file" : "not found on PATH"));
  }
  return std::move(resolved.front());
}

Result<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::unexpected(posix_error("creating a pipe", errno));
  Pipe pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
  if (!move_above_stdio(pipe.read) || !move_above_stdio(pipe.write))
    return std::unexpected(posix_error("creating a pipe", errno));
  return pipe;
}

Result<UniqueFd> open_null_input() {
  UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!fd.valid() || !move_above_stdio(fd)) return std::unexpected(posix_error("opening /dev/null", errno));
  return fd;
}

std::vector<std::string> child_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  for (const auto& [name, value] : overrides) {
    std::string prefix = name + "=";
    std::erase_if(env, [&](const std::string& entry) { return entry.starts_with(prefix); });
    env.push_back(prefix + value);
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

void exec_child(const ChildSetup& setup) {
  // Into the job's cgroup first, so everything the program starts is inside it. A refusal (the
  // cgroup was removed) leaves the child where it is; the parent sees it is not inside.
  if (setup.cgroup_procs_fd >= 0) {
    ssize_t moved = ::write(setup.cgroup_procs_fd, "0", 1);
    (void)moved;
  }
  ::setpgid(0, 0);
#ifdef __linux__
  if (setup.die_with_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may have died between fork and prctl; then nobody would send the signal.
    if (::getppid() != setup.parent_pid) ::_exit(127);
  }
#endif
  // Signal masks and ignored dispositions survive exec; the child starts from the defaults.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) ::sigaction(sig, &default_action, nullptr);  // KILL, STOP: EINVAL
  if (setup.stdin_fd >= 0) ::dup2(setup.stdin_fd, 0);
  if (setup.stdout_fd >= 0) ::dup2(setup.stdout_fd, 1);
  if (setup.stderr_fd >= 0) ::dup2(setup.stderr_fd, 2);
  if (setup.working_directory && ::chdir(setup.working_directory) != 0)
    report_and_exit(setup.status_fd, 0, errno);
  ::execve(setup.path, setup.argv, setup.envp);
  report_and_exit(setup.status_fd, 1, errno);
}

Result<void> read_exec_failure(int status_fd, const std::string& program, const std::string& resolved,
                               const char* working_directory) {
  ExecFailure failure{};
  ssize_t got;
  do {
    got = ::read(status_fd, &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof failure)) return {};
  if (failure.stage == 0)
    return std::unexpected(posix_error("running " + program + ": changing to directory " +
                                           std::string(working_directory ? working_directory : ""),
                                       failure.error_number));
  return std::unexpected(posix_error("running " + resolved, failure.error_number));
}

UniqueFd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return UniqueFd();
#endif
}

}  // namespace gpuhost::platform::launch
