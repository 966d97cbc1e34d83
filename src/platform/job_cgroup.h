#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

// A cgroup v2 of one job's own (Linux), holding every process of its trainer's tree: what a
// trainer starts stays inside whatever it does (setsid, double fork, a cleared environment), so
// ending an attempt kills all of it (cgroup.kill) and waits until the cgroup is empty before
// the next attempt starts. Used where this process may make one: the unified hierarchy is
// mounted and our own cgroup is writable (root, or a systemd delegation such as a user service
// with Delegate=yes). Elsewhere gpuhost falls back to its process group and run-token scans.
// Windows: the Job Object does this job; open() is unsupported there.
//
// The cgroup's name is the caller's (one per job, stable across supervisor restarts, so a new
// supervisor finds what an old one left). The kernel interface is cgroup-v2.rst: cgroup.procs,
// cgroup.kill (Linux 5.14+; older kernels get a SIGKILL per listed process, repeated), and
// cgroup.events' "populated" key.
class JobCgroup {
 public:
  // Creates (or reuses) the cgroup `name` below the cgroup this process is in. Errors:
  // unsupported where cgroup v2 is not mounted or not ours to write, with the reason.
  [[nodiscard]] static Result<std::unique_ptr<JobCgroup>> open(std::string_view name);

  ~JobCgroup();  // removes the cgroup when it is empty
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  // Its folder, e.g. /sys/fs/cgroup/system.slice/x.service/gpuhost-train-1a2b3c4d5e6f7a8b.
  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

  // cgroup.procs, open for writing and close-on-exec: a forked child writes "0" to it before
  // exec to move itself in, so nothing it starts can be outside.
  [[nodiscard]] int procs_fd() const { return m_procs_fd; }

  // The processes in it now.
  [[nodiscard]] std::vector<long> processes() const;
  [[nodiscard]] bool contains(long pid) const;

  // Kills every process in it and waits until none is left (at most `timeout`). Returns how many
  // were there; an error when some still are at the timeout (a process stuck in the kernel).
  Result<int> kill_all(std::chrono::milliseconds timeout);

  // Asks for the kill without waiting (cgroup.kill, or one SIGKILL per process).
  void kill_now();

 private:
  JobCgroup(std::filesystem::path path, int procs_fd) : m_path(std::move(path)), m_procs_fd(procs_fd) {}
  [[nodiscard]] bool populated() const;

  std::filesystem::path m_path;
  int m_procs_fd = -1;
};

// A cgroup name for a job: "gpuhost-" + the job's name (letters, digits, '.', '-', '_' kept, at
// most 40) + "-" + 16 hex digits of a hash of `key` (the job's folder), so two jobs of the same
// name in different job folders never share one.
[[nodiscard]] std::string job_cgroup_name(std::string_view job_name, std::string_view key);

}  // namespace gpuhost::platform
