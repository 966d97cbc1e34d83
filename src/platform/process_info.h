#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

// The executable name of a running process ("python3", "python.exe"), for showing who uses a GPU.
// nullopt when no such process is visible here (it ended, or it lives in another PID namespace,
// as NVML's host PIDs do inside a container) or the OS will not say (another user's process on
// Windows). Linux: /proc/PID/comm (the kernel keeps its first 15 bytes); Windows:
// QueryFullProcessImageNameW's file name. Thread-safe.
[[nodiscard]] std::optional<std::string> process_name(unsigned pid);

// One thread of a process group, with the name the OS knows it by: PyTorch names its DataLoader
// worker processes "pt_data_worker" and its pin-memory thread "pt_data_pin" in recent releases
// (torch/utils/data/_utils/worker.py and pin_memory.py; 1.13 does not), so a thread list tells whether a
// trainer loads data in its main thread, in workers, and whether it pins memory.
struct ThreadTimes {
  long pid = 0;
  long tid = 0;
  std::string name;        // Linux: /proc/PID/task/TID/comm (15 bytes at most)
  double cpu_seconds = 0;  // user + system since the thread started
  // Time it was runnable but waited for a CPU (/proc/PID/task/TID/schedstat, second field): with
  // cpu_seconds, how much CPU the thread wanted, whether or not it got it. Empty where the kernel
  // does not keep it (CONFIG_SCHED_INFO off).
  std::optional<double> runqueue_seconds;
};

// One process of a process group: who started it and its command line (arguments joined by
// spaces), which tell a forked DataLoader worker (the same command line as its parent) from a
// launcher's rank process.
struct GroupProcess {
  long pid = 0;
  long ppid = 0;
  std::string name;
  std::string command_line;
};

// What a process group has done since it started, read at one instant.
struct GroupActivity {
  std::vector<GroupProcess> processes;
  std::vector<ThreadTimes> threads;
  // Linux: bytes its processes had the block layer fetch (/proc/PID/io read_bytes); Windows: every
  // byte they read (GetProcessIoCounters' ReadTransferCount: files, pipes and sockets alike).
  std::uint64_t read_bytes = 0;
  std::uint64_t major_faults = 0;  // page faults that needed a disk read (/proc/PID/stat majflt)
  bool io_visible = true;          // false when the I/O counters could not be read (another user's)
  bool faults_visible = true;      // false where the OS counts no major faults apart (Windows)
};

// Every thread of every process in process group `pgid` (the supervisor starts the trainer as a
// group leader, and its DataLoader workers inherit the group); an error when no process of the
// group is left. Linux: /proc. Windows, which has no process groups: the process `pgid` and its
// descendants (a Toolhelp snapshot's parent links), each thread's CPU time (GetThreadTimes) and
// name (GetThreadDescription, where the OS has it), each process's command line
// (NtQueryInformationProcess, for spawned DataLoader workers) and reads; no runqueue time and no
// major faults, which Windows does not keep per thread or apart.
[[nodiscard]] Result<GroupActivity> read_group_activity(long pgid);

// The host's pressure stall information, "some" avg10 in percent, for "cpu", "io" or "memory"
// (Linux 4.20+ /proc/pressure/RESOURCE, Documentation/accounting/psi.rst); nullopt where the
// kernel has no PSI, and on Windows.
[[nodiscard]] std::optional<double> pressure_some_avg10(std::string_view resource);

// Pages swapped in since boot (/proc/vmstat pswpin); nullopt on Windows.
[[nodiscard]] std::optional<std::uint64_t> swapped_in_pages();

}  // namespace gpuhost::platform
