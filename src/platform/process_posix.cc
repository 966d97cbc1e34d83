#include <algorithm>
#include <chrono>
#include <set>
#include <utility>

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/strings.h"
#include "platform/posix_util.h"
#include "platform/process.h"

extern char** environ;

namespace gpuhost::platform {
namespace {

using Clock = std::chrono::steady_clock;

// When the child has exited but a grandchild still holds its stdout/stderr (a daemon it started),
// we read for this long more, then kill what is left of the group: run_process owns the whole tree.
constexpr auto k_drain_grace = std::chrono::milliseconds(500);

enum class Matches { first, all };

bool is_executable_file(const std::string& path, struct stat* st) {
  return ::stat(path.c_str(), st) == 0 && S_ISREG(st->st_mode) && ::access(path.c_str(), X_OK) == 0;
}

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

// A child's pipe ends must not land on 0-2 (they would be clobbered by the dup2 calls when the
// parent runs with a closed stdin/stdout), so they are moved to 3 or above.
bool move_above_stdio(UniqueFd& fd) {
  if (fd.get() > 2) return true;
  int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
  if (moved < 0) return false;
  fd.reset(moved);
  return true;
}

struct Pipe {
  UniqueFd read;
  UniqueFd write;
};

Result<Pipe> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return std::unexpected(posix_error("creating a pipe", errno));
  Pipe pipe{UniqueFd(fds[0]), UniqueFd(fds[1])};
  if (!move_above_stdio(pipe.read) || !move_above_stdio(pipe.write))
    return std::unexpected(posix_error("creating a pipe", errno));
  return pipe;
}

// What the child reports through the status pipe when it cannot exec.
struct ExecFailure {
  int stage;  // 0: chdir, 1: execve
  int error_number;
};

// Everything the child needs, prepared before fork: after fork only async-signal-safe calls are
// allowed, since other threads may hold the malloc lock.
struct ChildSetup {
  const char* path;
  char* const* argv;
  char* const* envp;
  const char* working_directory;
  int stdin_fd;
  int stdout_fd;
  int stderr_fd;
  int status_fd;
};

[[noreturn]] void report_and_exit(int status_fd, int stage, int error_number) {
  ExecFailure failure{stage, error_number};
  ssize_t ignored = ::write(status_fd, &failure, sizeof failure);
  (void)ignored;
  ::_exit(127);
}

[[noreturn]] void exec_child(const ChildSetup& setup) {
  ::setpgid(0, 0);
  // Signal masks and ignored dispositions survive exec; the child starts from the defaults.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD, SIGUSR1, SIGUSR2})
    ::sigaction(sig, &default_action, nullptr);
  ::dup2(setup.stdin_fd, 0);
  ::dup2(setup.stdout_fd, 1);
  ::dup2(setup.stderr_fd, 2);
  if (setup.working_directory && ::chdir(setup.working_directory) != 0)
    report_and_exit(setup.status_fd, 0, errno);
  ::execve(setup.path, setup.argv, setup.envp);
  report_and_exit(setup.status_fd, 1, errno);
}

// Owns a started child: a child still running when this goes away has its whole group killed and
// is reaped ("reap child if forgotten").
class ChildProcess {
 public:
  explicit ChildProcess(pid_t pid) : m_pid(pid) {}
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() {
    if (m_reaped) return;
    kill_group();
    wait(0);
  }

  void kill_group() const { ::kill(-m_pid, SIGKILL); }
  // waitpid with `flags`; true once the child has been reaped.
  bool wait(int flags) {
    if (m_reaped) return true;
    for (;;) {
      pid_t r = ::waitpid(m_pid, &m_status, flags);
      if (r == m_pid) {
        m_reaped = true;
        return true;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {  // ECHILD: someone else reaped it (a SIGCHLD handler set to SIG_IGN)
        m_reaped = true;
        m_status = 0;
        return true;
      }
      return false;
    }
  }
  [[nodiscard]] bool reaped() const { return m_reaped; }
  [[nodiscard]] int status() const { return m_status; }

 private:
  pid_t m_pid;
  bool m_reaped = false;
  int m_status = 0;
};

// Blocks SIGPIPE in this thread while we write the child's stdin, so a child that exits without
// reading gives us EPIPE instead of killing gpuhost. A SIGPIPE raised meanwhile is consumed.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigset_t pending;
    sigemptyset(&pending);
    ::sigpending(&pending);
    m_was_pending = sigismember(&pending, SIGPIPE) == 1;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &set, &m_old);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;
  ~SigpipeBlock() {
    if (!m_was_pending) {
      sigset_t set;
      sigemptyset(&set);
      sigaddset(&set, SIGPIPE);
      struct timespec zero {};
      while (::sigtimedwait(&set, nullptr, &zero) > 0) {
      }
    }
    ::pthread_sigmask(SIG_SETMASK, &m_old, nullptr);
  }

 private:
  sigset_t m_old;
  bool m_was_pending = false;
};

// Reads what is available on `fd` into `out`, keeping at most `limit` bytes. Closes `fd` at EOF.
void drain(UniqueFd& fd, std::string& out, std::size_t limit, bool& truncated) {
  char buffer[65536];
  ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    fd.reset();
    return;
  }
  std::size_t room = limit > out.size() ? limit - out.size() : 0;
  std::size_t keep = std::min(room, static_cast<std::size_t>(n));
  out.append(buffer, keep);
  if (keep < static_cast<std::size_t>(n)) truncated = true;
}

// After the group is killed: whatever is already in the pipes, without waiting for more.
void drain_remaining(UniqueFd& fd, std::string& out, std::size_t limit, bool& truncated) {
  while (fd.valid()) {
    struct pollfd p {
      fd.get(), POLLIN, 0
    };
    if (::poll(&p, 1, 0) <= 0) break;
    drain(fd, out, limit, truncated);
  }
}

std::vector<std::string> child_environment(const ProcessOptions& options) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) env.emplace_back(*e);
  for (const auto& [name, value] : options.environment) {
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

// A pollable handle on the child's exit (Linux 5.3+); without it the loop polls every 50 ms.
UniqueFd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  return UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#else
  (void)pid;
  return UniqueFd();
#endif
}

}  // namespace

Result<ProcessResult> run_process(const ProcessOptions& options) {
  if (options.argv.empty() || options.argv[0].empty())
    return make_error(ErrorCode::invalid_argument, "running a process: no program given");
  const std::string& program = options.argv[0];

  // The child's PATH (when overridden) decides where a bare name is found, as with execvpe.
  std::string path_value = current_path_value();
  for (const auto& [name, value] : options.environment)
    if (name == "PATH") path_value = value;
  std::vector<std::string> resolved = search_path(program, path_value, Matches::first);
  if (resolved.empty()) {
    bool has_dir = program.find('/') != std::string::npos;
    return make_error(ErrorCode::not_found, "running " + program + ": " +
                                                (has_dir ? "no such executable file" : "not found on PATH"));
  }

  auto out_pipe = make_pipe();
  auto err_pipe = make_pipe();
  auto status_pipe = make_pipe();
  if (!out_pipe) return std::unexpected(out_pipe.error());
  if (!err_pipe) return std::unexpected(err_pipe.error());
  if (!status_pipe) return std::unexpected(status_pipe.error());
  Pipe& out = *out_pipe;
  Pipe& err = *err_pipe;
  Pipe& status = *status_pipe;
  UniqueFd child_stdin;
  UniqueFd stdin_writer;
  if (options.stdin_text && !options.stdin_text->empty()) {
    auto in = make_pipe();
    if (!in) return std::unexpected(in.error());
    child_stdin = std::move(in->read);
    stdin_writer = std::move(in->write);
    ::fcntl(stdin_writer.get(), F_SETFL, O_NONBLOCK);
  } else {
    child_stdin.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!child_stdin.valid() || !move_above_stdio(child_stdin))
      return std::unexpected(posix_error("opening /dev/null", errno));
  }

  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> argv = pointers(argv_strings);
  std::vector<std::string> env_strings = child_environment(options);
  std::vector<char*> envp = pointers(env_strings);
  ChildSetup setup{resolved.front().c_str(),
                   argv.data(),
                   envp.data(),
                   options.working_directory ? options.working_directory->c_str() : nullptr,
                   child_stdin.get(),
                   out.write.get(),
                   err.write.get(),
                   status.write.get()};

  std::optional<SigpipeBlock> sigpipe_block;
  if (stdin_writer.valid()) sigpipe_block.emplace();

  const auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid < 0) return std::unexpected(posix_error("starting " + program, errno));
  if (pid == 0) exec_child(setup);
  // Also done in the parent, so the group exists before we might signal it.
  ::setpgid(pid, pid);
  ChildProcess child(pid);
  UniqueFd pidfd = open_pidfd(pid);

  out.write.reset();
  err.write.reset();
  status.write.reset();
  child_stdin.reset();

  ExecFailure failure{};
  ssize_t got;
  do {
    got = ::read(status.read.get(), &failure, sizeof failure);
  } while (got < 0 && errno == EINTR);
  if (got == static_cast<ssize_t>(sizeof failure)) {
    child.wait(0);
    if (failure.stage == 0)
      return std::unexpected(
          posix_error("running " + program + ": changing to directory " + *options.working_directory,
                      failure.error_number));
    return std::unexpected(posix_error("running " + resolved.front(), failure.error_number));
  }
  status.read.reset();

  ProcessResult result;
  const std::string_view input =
      options.stdin_text ? std::string_view(*options.stdin_text) : std::string_view();
  std::size_t input_offset = 0;
  const auto deadline = start + options.timeout;
  std::optional<Clock::time_point> exited_at;

  for (;;) {
    if (!child.reaped() && child.wait(WNOHANG)) exited_at = Clock::now();
    const auto now = Clock::now();
    if (!child.reaped() && now >= deadline) {
      result.timed_out = true;
      child.kill_group();
      child.wait(0);
      break;
    }
    if (child.reaped()) {
      if (!out.read.valid() && !err.read.valid()) break;
      if (now >= std::min(*exited_at + k_drain_grace, deadline)) {
        child.kill_group();
        break;
      }
    }

    struct pollfd fds[4];
    nfds_t count = 0;
    auto add = [&](const UniqueFd& fd, short events) {
      if (fd.valid()) fds[count++] = {fd.get(), events, 0};
    };
    add(out.read, POLLIN);
    add(err.read, POLLIN);
    add(stdin_writer, POLLOUT);
    if (!child.reaped()) add(pidfd, POLLIN);
    auto limit = child.reaped() ? std::min(*exited_at + k_drain_grace, deadline) : deadline;
    auto wait_ms = std::chrono::ceil<std::chrono::milliseconds>(limit - now).count();
    if (!child.reaped() && !pidfd.valid()) wait_ms = std::min<long long>(wait_ms, 50);
    int ready = ::poll(fds, count, static_cast<int>(std::clamp<long long>(wait_ms, 0, INT_MAX)));
    if (ready < 0 && errno != EINTR) return std::unexpected(posix_error("waiting for " + program, errno));
    if (ready <= 0) continue;

    for (nfds_t i = 0; i < count; ++i) {
      if (!fds[i].revents) continue;
      if (out.read.valid() && fds[i].fd == out.read.get()) {
        drain(out.read, result.stdout_text, options.max_output_bytes, result.output_truncated);
      } else if (err.read.valid() && fds[i].fd == err.read.get()) {
        drain(err.read, result.stderr_text, options.max_output_bytes, result.output_truncated);
      } else if (stdin_writer.valid() && fds[i].fd == stdin_writer.get()) {
        ssize_t n = ::write(stdin_writer.get(), input.data() + input_offset, input.size() - input_offset);
        if (n > 0) input_offset += static_cast<std::size_t>(n);
        if ((n < 0 && errno != EAGAIN && errno != EINTR) || input_offset == input.size())
          stdin_writer.reset();
      }
    }
  }
  stdin_writer.reset();
  if (out.read.valid())
    drain_remaining(out.read, result.stdout_text, options.max_output_bytes, result.output_truncated);
  if (err.read.valid())
    drain_remaining(err.read, result.stderr_text, options.max_output_bytes, result.output_truncated);

  result.elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
  if (!result.timed_out) {
    int raw = child.status();
    if (WIFEXITED(raw)) {
      result.exit_code = WEXITSTATUS(raw);
    } else if (WIFSIGNALED(raw)) {
      result.signaled = true;
      result.signal = WTERMSIG(raw);
    }
  }
  return result;
}

std::optional<std::string> find_executable(std::string_view name) {
  std::vector<std::string> found = search_path(name, current_path_value(), Matches::first);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<std::string> find_all_executables(std::string_view name) {
  return search_path(name, current_path_value(), Matches::all);
}

long current_process_id() {
  return static_cast<long>(::getpid());
}

Result<std::string> current_executable_path() {
  std::string buffer(PATH_MAX, '\0');
  ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size());
  if (n < 0) return std::unexpected(posix_error("reading /proc/self/exe", errno));
  buffer.resize(static_cast<std::size_t>(n));
  return buffer;
}

}  // namespace gpuhost::platform
