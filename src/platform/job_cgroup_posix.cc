#include <algorithm>
#include <charconv>
#include <optional>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include "platform/job_cgroup.h"
#include "platform/posix_util.h"

namespace gpuhost::platform {
namespace {

namespace fs = std::filesystem;

// Undoes the octal escapes mountinfo uses for spaces and the like (proc(5): "\040").
std::string unescape_mount_path(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\\' && i + 3 < text.size()) {
      int value = 0;
      auto [end, error] = std::from_chars(text.data() + i + 1, text.data() + i + 4, value, 8);
      if (error == std::errc() && end == text.data() + i + 4) {
        out.push_back(static_cast<char>(value));
        i += 3;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

// Where the unified (v2) hierarchy is mounted: /sys/fs/cgroup on current systems,
// /sys/fs/cgroup/unified on hybrid ones. From /proc/self/mountinfo (proc(5)): the fifth field is
// the mount point, the first field after " - " the file system type.
std::optional<fs::path> cgroup2_mount() {
  std::istringstream lines(read_text_file_or_empty("/proc/self/mountinfo"));
  std::string line;
  while (std::getline(lines, line)) {
    auto dash = line.find(" - ");
    if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0) continue;
    std::istringstream fields(line.substr(0, dash));
    std::string field;
    for (int i = 0; i < 5 && fields >> field; ++i) {
    }
    if (!field.empty()) return fs::path(unescape_mount_path(field));
  }
  return std::nullopt;
}

// Our cgroup in the unified hierarchy: the "0::PATH" line of /proc/self/cgroup (cgroups(7)).
std::optional<std::string> own_cgroup() {
  std::istringstream lines(read_text_file_or_empty("/proc/self/cgroup"));
  std::string line;
  while (std::getline(lines, line))
    if (line.starts_with("0::")) return line.substr(3);
  return std::nullopt;
}

std::vector<long> read_pids(const fs::path& file) {
  std::vector<long> out;
  std::istringstream text(read_text_file_or_empty(file.c_str()));
  long pid = 0;
  while (text >> pid)
    if (pid > 0) out.push_back(pid);
  return out;
}

bool write_text(const fs::path& file, std::string_view text) {
  UniqueFd fd(::open(file.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  return ::write(fd.get(), text.data(), text.size()) == static_cast<ssize_t>(text.size());
}

}  // namespace

Result<std::unique_ptr<JobCgroup>> JobCgroup::open(std::string_view name) {
  auto unsupported = [](std::string why) -> Result<std::unique_ptr<JobCgroup>> {
    return make_error(ErrorCode::unsupported, std::move(why));
  };
  auto mount = cgroup2_mount();
  if (!mount) return unsupported("no cgroup v2 hierarchy is mounted");
  auto own = own_cgroup();
  if (!own) return unsupported("this process is in no cgroup v2 (/proc/self/cgroup has no 0:: line)");
  fs::path parent = *mount / fs::path(*own).relative_path();
  // Moving a process between two cgroups needs write access to their common ancestor's
  // cgroup.procs (cgroup-v2.rst, "Delegation Containment"): here, our own cgroup's.
  if (::access((parent / "cgroup.procs").c_str(), W_OK) != 0)
    return unsupported("cgroup " + parent.string() + " is not writable by this user (not delegated)");
  fs::path path = parent / std::string(name);
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return unsupported(posix_error("creating cgroup " + path.string(), errno).message);
  int fd = ::open((path / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return unsupported(posix_error("opening " + (path / "cgroup.procs").string(), errno).message);
  return std::unique_ptr<JobCgroup>(new JobCgroup(std::move(path), fd));
}

JobCgroup::~JobCgroup() {
  if (m_procs_fd >= 0) ::close(m_procs_fd);
  ::rmdir(m_path.c_str());  // EBUSY while a process is left: then it stays for the next supervisor
}

std::vector<long> JobCgroup::processes() const {
  return read_pids(m_path / "cgroup.procs");
}

bool JobCgroup::contains(long pid) const {
  for (long p : processes())
    if (p == pid) return true;
  return false;
}

bool JobCgroup::populated() const {
  const std::string events = read_text_file_or_empty((m_path / "cgroup.events").c_str());
  auto at = events.find("populated ");
  if (at == std::string::npos) return !processes().empty();
  return events.compare(at + 10, 1, "0") != 0;
}

void JobCgroup::kill_now() {
  if (write_text(m_path / "cgroup.kill", "1")) return;
  for (long pid : processes()) ::kill(static_cast<pid_t>(pid), SIGKILL);  // before Linux 5.14
}

Result<int> JobCgroup::kill_all(std::chrono::milliseconds timeout) {
  const int found = static_cast<int>(processes().size());
  if (!populated()) return found;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    kill_now();  // again each round: without cgroup.kill, a process may fork between list and kill
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (!populated()) return found;
    if (std::chrono::steady_clock::now() >= deadline)
      return make_error(ErrorCode::timeout, "cgroup " + m_path.string() + " still holds " +
                                                std::to_string(processes().size()) + " processes after SIGKILL");
  }
}

}  // namespace gpuhost::platform
