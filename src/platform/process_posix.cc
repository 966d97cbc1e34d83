#include <algorithm>
#include <chrono>
#include <utility>

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/launch_posix.h"
#include "platform/posix_util.h"
#include "platform/process.h"

namespace gpuhost::platform {
namespace {

using Clock = std::chrono::steady_clock;
using launch::Pipe;

// When the child has exited but a grandchild still holds its stdout/stderr (a daemon it started),
// we read for this long more, then kill what is left of the group: run_process owns the whole tree.
constexpr auto k_drain_grace = std::chrono::milliseconds(500);

// Owns a started child: a child still running when this goes away has its whole group killed and
// is reaped ("reap child if forgotten").
class StartedChild {
 public:
  explicit StartedChild(pid_t pid) : m_pid(pid) {}
  StartedChild(const StartedChild&) = delete;
  StartedChild& operator=(const StartedChild&) = delete;
  ~StartedChild() {
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

}  // namespace

Result<ProcessResult> run_process(const ProcessOptions& options) {
  const std::string resolved = GPUHOST_TRY(launch::resolve_program(options.argv, options.environment));
  const std::string& program = options.argv[0];

  auto out_pipe = launch::make_pipe();
  auto err_pipe = launch::make_pipe();
  auto status_pipe = launch::make_pipe();
  if (!out_pipe) return std::unexpected(out_pipe.error());
  if (!err_pipe) return std::unexpected(err_pipe.error());
  if (!status_pipe) return std::unexpected(status_pipe.error());
  Pipe& out = *out_pipe;
  Pipe& err = *err_pipe;
  Pipe& status = *status_pipe;
  UniqueFd child_stdin;
  UniqueFd stdin_writer;
  if (options.stdin_text && !options.stdin_text->empty()) {
    auto in = launch::make_pipe();
    if (!in) return std::unexpected(in.error());
    child_stdin = std::move(in->read);
    stdin_writer = std::move(in->write);
    ::fcntl(stdin_writer.get(), F_SETFL, O_NONBLOCK);
  } else {
    child_stdin = GPUHOST_TRY(launch::open_null_input());
  }

  std::vector<std::string> argv_strings = options.argv;
  std::vector<char*> argv = launch::pointers(argv_strings);
  std::vector<std::string> env_strings = launch::child_environment(options.environment);
  std::vector<char*> envp = launch::pointers(env_strings);
  launch::ChildSetup setup;
  setup.path = resolved.c_str();
  setup.argv = argv.data();
  setup.envp = envp.data();
  setup.working_directory = options.working_directory ? options.working_directory->c_str() : nullptr;
  setup.stdin_fd = child_stdin.get();
  setup.stdout_fd = out.write.get();
  setup.stderr_fd = err.write.get();
  setup.status_fd = status.write.get();

  std::optional<SigpipeBlock> sigpipe_block;
  if (stdin_writer.valid()) sigpipe_block.emplace();

  const auto start = Clock::now();
  pid_t pid = ::fork();
  if (pid < 0) return std::unexpected(posix_error("starting " + program, errno));
  if (pid == 0) launch::exec_child(setup);
  // Also done in the parent, so the group exists before we might signal it.
  ::setpgid(pid, pid);
  StartedChild child(pid);
  UniqueFd pidfd = launch::open_pidfd(pid);

  out.write.reset();
  err.write.reset();
  status.write.reset();
  child_stdin.reset();

  if (auto started = launch::read_exec_failure(status.read.get(), program, resolved, setup.working_directory);
      !started) {
    child.wait(0);
    return std::unexpected(started.error());
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
  std::vector<std::string> found =
      launch::search_path(name, launch::current_path_value(), launch::Matches::first);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<std::string> find_all_executables(std::string_view name) {
  return launch::search_path(name, launch::current_path_value(), launch::Matches::all);
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
