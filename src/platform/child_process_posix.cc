#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/child_process.h"
#include "platform/job_cgroup.h"
#include "platform/launch_posix.h"
#include "platform/posix_util.h"

namespace gpuhost::platform {
namespace {

using Clock = std::chrono::steady_clock;

// Once the child has exited, how long a grandchild still holding its stdout/stderr may keep them
// open before we kill what is left of the group and stop reading.
constexpr auto k_drain_grace = std::chrono::milliseconds(500);
// How much the readers take from a pipe after being told to stop, so a writer that escaped the
// group cannot keep them reading forever.
constexpr std::size_t k_final_drain_limit = 1u << 20;

int posix_signal(ChildSignal signal) {
  switch (signal) {
    case ChildSignal::interrupt: return SIGINT;
    case ChildSignal::terminate: return SIGTERM;
    case ChildSignal::hangup: return SIGHUP;
    case ChildSignal::user1: return SIGUSR1;
    case ChildSignal::user2: return SIGUSR2;
    case ChildSignal::ctrl_break: return 0;
  }
  return 0;
}

std::chrono::microseconds to_microseconds(const timeval& t) {
  return std::chrono::seconds(t.tv_sec) + std::chrono::microseconds(t.tv_usec);
}

// Linux reports ru_maxrss in KiB (getrusage(2)).
std::uint64_t max_rss_bytes(const rusage& usage) {
  return static_cast<std::uint64_t>(std::max(usage.ru_maxrss, 0L)) * 1024u;
}

struct ProcStat {
  pid_t pid = 0;
  pid_t parent = 0;
  pid_t group = 0;
  char state = '?';
  std::string name;
};

// /proc/PID/stat: "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses, so
// the fields after it are found from the last ')'.
std::optional<ProcStat> read_proc_stat(pid_t pid) {
  const std::string text = read_text_file_or_empty(("/proc/" + std::to_string(pid) + "/stat").c_str());
  const auto open = text.find('(');
  const auto close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return std::nullopt;
  ProcStat stat;
  stat.pid = pid;
  stat.name = text.substr(open + 1, close - open - 1);
  std::string_view rest = std::string_view(text).substr(close + 1);
  long fields[2] = {0, 0};
  rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
  if (rest.empty()) return std::nullopt;
  stat.state = rest.front();
  rest.remove_prefix(1);
  for (long& field : fields) {
    rest.remove_prefix(std::min(rest.find_first_not_of(' '), rest.size()));
    auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), field);
    if (error != std::errc()) return std::nullopt;
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  }
  stat.parent = static_cast<pid_t>(fields[0]);
  stat.group = static_cast<pid_t>(fields[1]);
  return stat;
}

std::vector<ProcStat> list_processes() {
  std::vector<ProcStat> out;
  DirStream proc(::opendir("/proc"));
  if (!proc.get()) return out;
  while (const dirent* entry = ::readdir(proc.get())) {
    const std::string_view id(entry->d_name);
    pid_t pid = 0;
    auto [end, parse_error] = std::from_chars(id.data(), id.data() + id.size(), pid);
    if (parse_error != std::errc() || end != id.data() + id.size() || pid <= 0) continue;
    if (auto stat = read_proc_stat(pid)) out.push_back(std::move(*stat));
  }
  return out;
}

// SigCgt in /proc/PID/status: a hex mask of caught signals, bit N-1 for signal N.
std::optional<bool> catches_signal(pid_t pid, int number) {
  const std::string status = read_text_file_or_empty(("/proc/" + std::to_string(pid) + "/status").c_str());
  auto at = status.find("SigCgt:");
  if (at == std::string::npos || number <= 0 || number > 64) return std::nullopt;
  std::string_view rest = std::string_view(status).substr(at + 7);
  rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
  std::uint64_t mask = 0;
  auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), mask, 16);
  if (error != std::errc() || end == rest.data()) return std::nullopt;
  return ((mask >> (number - 1)) & 1u) != 0;
}

std::string command_line_of(pid_t pid) {
  std::string text = read_text_file_or_empty(("/proc/" + std::to_string(pid) + "/cmdline").c_str());
  while (!text.empty() && text.back() == '\0') text.pop_back();
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

}  // namespace

struct ChildProcess::State {
  // Fixed after spawn.
  pid_t pid = -1;
  std::string program;
  OutputHandler on_output;
  JobCgroup* cgroup = nullptr;
  UniqueFd pidfd;
  launch::Pipe stop;  // a byte written here tells the readers (and the writer) to stop
  std::thread readers[2];
  std::thread writer;  // feeds stdin_text, when there is one

  // Touched only by the thread calling the public methods.
  bool reaped = false;
  ChildExit raw_exit;               // valid once reaped
  std::optional<ChildExit> result;  // set once the readers are done too

  std::mutex mutex;
  std::condition_variable readers_done;
  int readers_running = 0;  // guarded by mutex

  void read_output(UniqueFd fd, OutputStream stream) {
    char buffer[65536];
    for (;;) {
      struct pollfd fds[2] = {{fd.get(), POLLIN, 0}, {stop.read.get(), POLLIN, 0}};
      int ready = ::poll(fds, 2, -1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) break;
      if (fds[1].revents) {
        final_drain(fd, stream, buffer, sizeof buffer);
        break;
      }
      ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      on_output(stream, std::string_view(buffer, static_cast<std::size_t>(n)));
    }
    {
      std::lock_guard lock(mutex);
      --readers_running;
    }
    readers_done.notify_all();
  }

  void final_drain(const UniqueFd& fd, OutputStream stream, char* buffer, std::size_t size) {
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
    std::size_t taken = 0;
    while (taken < k_final_drain_limit) {
      ssize_t n = ::read(fd.get(), buffer, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      taken += static_cast<std::size_t>(n);
      on_output(stream, std::string_view(buffer, static_cast<std::size_t>(n)));
    }
  }

  // Writes `input` to the child's stdin, then closes it. SIGPIPE is blocked in this thread only,
  // so a child that exits without reading gives EPIPE instead of killing gpuhost (the pending
  // thread-directed signal goes away with the thread). Stops when told to, so a process that
  // left the tree holding our pipe cannot keep it waiting.
  void write_input(UniqueFd fd, std::string input) {
    sigset_t pipe_signal;
    sigemptyset(&pipe_signal);
    sigaddset(&pipe_signal, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
    std::size_t offset = 0;
    while (offset < input.size()) {
      struct pollfd fds[2] = {{fd.get(), POLLOUT, 0}, {stop.read.get(), POLLIN, 0}};
      int ready = ::poll(fds, 2, -1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0 || fds[1].revents) break;
      ssize_t n = ::write(fd.get(), input.data() + offset, input.size() - offset);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) break;  // EPIPE: the child closed its stdin
      offset += static_cast<std::size_t>(n);
    }
  }

  // Whether the child has exited, without reaping it: its zombie keeps the process group id
  // taken, so the group can still be signalled safely (no other process can have that id).
  bool exited_unreaped() {
    siginfo_t info{};
    int r;
    do {
      r = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
    } while (r < 0 && errno == EINTR);
    return r < 0 || info.si_pid != 0;
  }

  // The attempt is over when the child exits: what it left of its group (workers, loader
  // processes, a wrapper's trainer) is killed while the zombie still pins the group id, and
  // everything in its cgroup (what left the group too) until the cgroup is empty; then the
  // child is reaped, then the members we adopted as a subreaper are reaped as they die.
  void end_group_and_reap(bool block) {
    if (reaped) return;
    ::kill(-pid, SIGKILL);
    std::vector<long> in_cgroup;
    if (cgroup) {
      in_cgroup = cgroup->processes();
      (void)cgroup->kill_all(std::chrono::seconds(10));
    }
    reap(block);
    reap_adopted_members(in_cgroup);
  }

  // Zombies of our group or cgroup that were re-parented to us (become_child_subreaper): nobody
  // else can reap them. Only those: a zombie child of ours outside them may be run_process's,
  // which reaps its own.
  void reap_adopted_members(const std::vector<long>& in_cgroup) {
    const pid_t self = ::getpid();
    for (int round = 0; round < 50; ++round) {
      bool pending = false;
      for (const auto& process : list_processes()) {
        const bool ours = process.group == pid ||
                          std::find(in_cgroup.begin(), in_cgroup.end(), process.pid) != in_cgroup.end();
        if (process.parent != self || !ours || process.pid == pid) continue;
        if (process.state == 'Z') {
          ::waitpid(process.pid, nullptr, WNOHANG);
        } else {
          pending = true;  // SIGKILLed, not dead yet
        }
      }
      if (!pending) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // wait4 without blocking (or blocking when `block`); true once the child has been reaped.
  bool reap(bool block) {
    if (reaped) return true;
    for (;;) {
      int status = 0;
      rusage usage{};
      pid_t r = ::wait4(pid, &status, block ? 0 : WNOHANG, &usage);
      if (r < 0 && errno == EINTR) continue;
      if (r == 0) return false;
      reaped = true;
      if (r < 0) return true;  // ECHILD: reaped elsewhere (SIGCHLD ignored); nothing to report
      if (WIFEXITED(status)) {
        raw_exit.exit_code = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        raw_exit.signaled = true;
        raw_exit.signal = WTERMSIG(status);
      }
      raw_exit.cpu_time = to_microseconds(usage.ru_utime) + to_microseconds(usage.ru_stime);
      raw_exit.peak_rss_bytes = max_rss_bytes(usage);
      return true;
    }
  }

  // After the child is reaped (its group was killed just before): lets the readers finish on
  // their own for a short while, then stops them, so a process that left the group and still
  // holds the pipes cannot keep them reading.
  void finish_readers(std::chrono::milliseconds grace) {
    bool drained;
    {
      std::unique_lock lock(mutex);
      drained = readers_done.wait_for(lock, grace, [&] { return readers_running == 0; });
    }
    if (!drained) {
      char byte = 1;
      ssize_t ignored = ::write(stop.write.get(), &byte, 1);
      (void)ignored;
    }
    for (std::thread& reader : readers)
      if (reader.joinable()) reader.join();
    if (writer.joinable()) {
      char byte = 1;
      if (drained) {
        ssize_t ignored = ::write(stop.write.get(), &byte, 1);
        (void)ignored;
      }
      writer.join();
    }
  }
};

Result<ChildProcess> ChildProcess::spawn(const ChildOptions& options) {
  const std::string resolved = GPUHOST_TRY(launch::resolve_program(options.argv, options.environment));
  auto state = std::make_unique<State>();
  state->program = options.argv[0];
  state->on_output = options.on_output;
  state->cgroup = options.cgroup;

  launch::Pipe input;
  UniqueFd child_stdin;
  if (options.stdin_text && !options.stdin_text->empty()) {
    input = GPUHOST_TRY(launch::make_pipe());
    child_stdin = std::move(input.read);
  } else {
    child_stdin = GPUHOST_TRY(launch::open_null_input());
  }
  launch::Pipe status = GPUHOST_TRY(launch::make_pipe());
  launch::Pipe out, err;
  if (state->on_output) {
    out = GPUHOST_TRY(launch::make_pipe());
    err = GPUHOST_TRY(launch::make_pipe());
  }
  if (state->on_output || input.write.valid()) state->stop = GPUHOST_TRY(launch::make_pipe());

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
  setup.die_with_parent = true;
  setup.parent_pid = ::getpid();
  if (options.cgroup) setup.cgroup_procs_fd = options.cgroup->procs_fd();

  pid_t pid = ::fork();
  if (pid < 0) return std::unexpected(posix_error("starting " + state->program, errno));
  if (pid == 0) launch::exec_child(setup);
  // Also done here, so the group exists before we might signal it.
  ::setpgid(pid, pid);
  state->pid = pid;
  out.write.reset();
  err.write.reset();
  status.write.reset();
  child_stdin.reset();

  if (auto started =
          launch::read_exec_failure(status.read.get(), state->program, resolved, setup.working_directory);
      !started) {
    state->reap(true);
    Error error = started.error();
    if (error.code != ErrorCode::not_found) error.code = ErrorCode::io_error;
    return std::unexpected(std::move(error));
  }
  state->pidfd = launch::open_pidfd(pid);

  if (input.write.valid()) {
    State* raw = state.get();
    raw->writer = std::thread([raw, fd = std::move(input.write), text = *options.stdin_text]() mutable {
      raw->write_input(std::move(fd), std::move(text));
    });
  }
  if (state->on_output) {
    State* raw = state.get();
    raw->readers_running = 2;
    raw->readers[0] = std::thread(
        [raw, fd = std::move(out.read)]() mutable { raw->read_output(std::move(fd), OutputStream::out); });
    raw->readers[1] = std::thread(
        [raw, fd = std::move(err.read)]() mutable { raw->read_output(std::move(fd), OutputStream::err); });
  }
  return ChildProcess(std::move(state));
}

ChildProcess::ChildProcess(std::unique_ptr<State> state) : m_state(std::move(state)) {}
ChildProcess::ChildProcess(ChildProcess&& other) noexcept = default;
ChildProcess& ChildProcess::operator=(ChildProcess&& other) noexcept = default;

// The group is killed before the child is reaped, never after: once the leader is reaped and
// the group is empty, its id may belong to another process.
ChildProcess::~ChildProcess() {
  if (!m_state) return;
  m_state->end_group_and_reap(true);
  m_state->finish_readers(std::chrono::milliseconds(0));
}

long ChildProcess::pid() const {
  return static_cast<long>(m_state->pid);
}

Result<void> ChildProcess::send(ChildSignal signal) {
  int number = posix_signal(signal);
  if (number == 0)
    return make_error(ErrorCode::unsupported,
                      std::string("sending ") + child_signal_name(signal) + ": not a POSIX signal");
  // Once reaped, the group id may be reused: nothing of ours is left to signal.
  if (m_state->reaped) return {};
  if (::kill(-m_state->pid, number) != 0 && errno != ESRCH)
    return std::unexpected(posix_error(std::string("sending ") + child_signal_name(signal) + " to " +
                                           m_state->program + " (process group " +
                                           std::to_string(m_state->pid) + ")",
                                       errno));
  return {};
}

void ChildProcess::kill_tree() {
  if (m_state->reaped) return;
  ::kill(-m_state->pid, SIGKILL);
  if (m_state->cgroup) m_state->cgroup->kill_now();
}

Result<std::vector<TreeMember>> ChildProcess::members(ChildSignal probe) const {
  std::vector<TreeMember> out;
  if (m_state->reaped) return out;
  const pid_t root = m_state->pid;
  std::vector<ProcStat> processes = list_processes();
  // The group, then descendants by parent links until nothing new is added (a process that
  // called setsid or setpgid is still ours while its parent chain leads to the child).
  std::vector<bool> taken(processes.size(), false);
  std::vector<pid_t> ours;
  std::vector<long> in_cgroup;
  if (m_state->cgroup) in_cgroup = m_state->cgroup->processes();
  for (std::size_t i = 0; i < processes.size(); ++i) {
    if (processes[i].group == root || processes[i].pid == root ||
        std::find(in_cgroup.begin(), in_cgroup.end(), processes[i].pid) != in_cgroup.end()) {
      taken[i] = true;
      ours.push_back(processes[i].pid);
    }
  }
  for (bool grew = true; grew;) {
    grew = false;
    for (std::size_t i = 0; i < processes.size(); ++i) {
      if (taken[i] || std::find(ours.begin(), ours.end(), processes[i].parent) == ours.end()) continue;
      taken[i] = true;
      ours.push_back(processes[i].pid);
      grew = true;
    }
  }
  const int number = posix_signal(probe);
  for (std::size_t i = 0; i < processes.size(); ++i) {
    if (!taken[i] || processes[i].state == 'Z' || processes[i].state == 'X') continue;
    TreeMember member;
    member.pid = processes[i].pid;
    member.parent_pid = processes[i].parent;
    member.name = processes[i].name;
    member.command_line = command_line_of(processes[i].pid);
    if (number != 0) member.catches = catches_signal(processes[i].pid, number);
    out.push_back(std::move(member));
  }
  std::sort(out.begin(), out.end(), [](const TreeMember& a, const TreeMember& b) { return a.pid < b.pid; });
  return out;
}

Result<void> ChildProcess::send_to(long pid, ChildSignal signal) {
  int number = posix_signal(signal);
  if (number == 0)
    return make_error(ErrorCode::unsupported, std::string("sending ") + child_signal_name(signal) + ": not a POSIX signal");
  if (m_state->reaped) return {};
  if (::kill(static_cast<pid_t>(pid), number) != 0 && errno != ESRCH)
    return std::unexpected(posix_error(std::string("sending ") + child_signal_name(signal) + " to process " + std::to_string(pid), errno));
  return {};
}

Result<std::optional<ChildExit>> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  State& state = *m_state;
  if (state.result) return state.result;
  const auto deadline = Clock::now() + timeout;
  while (!state.exited_unreaped()) {
    auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return std::optional<ChildExit>();
    if (state.pidfd.valid()) {
      struct pollfd p {
        state.pidfd.get(), POLLIN, 0
      };
      int ready = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 60'000)));
      if (ready < 0 && errno != EINTR)
        return std::unexpected(posix_error("waiting for " + state.program, errno));
    } else {
      std::this_thread::sleep_for(std::min(left, std::chrono::milliseconds(20)));
    }
  }
  state.end_group_and_reap(true);
  state.finish_readers(k_drain_grace);
  state.result = state.raw_exit;
  return state.result;
}

std::string ChildExit::describe() const {
  if (!signaled) return "exit code " + std::to_string(exit_code);
  const char* abbreviation = ::sigabbrev_np(signal);
  if (abbreviation) return std::string("killed by SIG") + abbreviation;
  return "killed by signal " + std::to_string(signal);
}

ChildSignal default_save_signal() {
  return ChildSignal::user1;
}

ChildSignal default_stop_signal() {
  return ChildSignal::terminate;
}

int kill_processes_with_environment(std::string_view name, std::string_view value) {
  const std::string wanted = std::string(name) + "=" + std::string(value);
  const pid_t self = ::getpid();
  // Scans until one finds nobody: a process killed in one pass may have forked in the meantime,
  // and one that is still dying (in uninterruptible I/O) still shows its environment. Bounded,
  // so a process that cannot die (a stuck NFS read) does not hang the supervisor.
  std::vector<pid_t> killed;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  for (;;) {
    bool found_any = false;
    DirStream proc(::opendir("/proc"));
    if (!proc.get()) break;
    while (const dirent* entry = ::readdir(proc.get())) {
      const std::string_view id(entry->d_name);
      pid_t pid = 0;
      auto [end, parse_error] = std::from_chars(id.data(), id.data() + id.size(), pid);
      if (parse_error != std::errc() || end != id.data() + id.size() || pid <= 0 || pid == self) continue;
      // NUL-separated "name=value" entries as the process was started; unreadable for other
      // users, empty for a zombie.
      const std::string environ_text = read_text_file_or_empty(("/proc/" + std::string(id) + "/environ").c_str());
      std::string_view rest(environ_text);
      bool found = false;
      while (!rest.empty() && !found) {
        std::size_t nul = rest.find('\0');
        found = rest.substr(0, nul) == wanted;
        rest = nul == std::string_view::npos ? std::string_view() : rest.substr(nul + 1);
      }
      if (!found || ::kill(pid, SIGKILL) != 0) continue;
      found_any = true;
      if (std::find(killed.begin(), killed.end(), pid) == killed.end()) killed.push_back(pid);
    }
    if (!found_any || Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return static_cast<int>(killed.size());
}

void become_child_subreaper() {
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
}

ResourceUsage self_resource_usage() {
  rusage usage{};
  ResourceUsage out;
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return out;
  out.cpu_time = to_microseconds(usage.ru_utime) + to_microseconds(usage.ru_stime);
  out.peak_rss_bytes = max_rss_bytes(usage);
  // ru_maxrss also counts the image this process replaced at exec: Linux carries the old mm's
  // high-water mark into the new one (fs/exec.c, exec_mmap -> setmax_mm_hiwater_rss), so a
  // gpuhost started by a 2 GB Python process would report 2 GB. VmHWM (proc(5)) is our own.
  const std::string status = read_text_file_or_empty("/proc/self/status");
  if (auto at = status.find("VmHWM:"); at != std::string::npos) {
    std::string_view rest = std::string_view(status).substr(at + 6);
    rest.remove_prefix(std::min(rest.find_first_not_of(" \t"), rest.size()));
    std::uint64_t kib = 0;
    auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
    if (error == std::errc() && end != rest.data()) out.peak_rss_bytes = kib * 1024u;
  }
  return out;
}

}  // namespace gpuhost::platform
