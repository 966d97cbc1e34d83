#pragma once

#include <optional>
#include <string>

namespace gpuhost::platform {

// The executable name of a running process ("python3", "python.exe"), for showing who uses a GPU.
// nullopt when no such process is visible here (it ended, or it lives in another PID namespace,
// as NVML's host PIDs do inside a container) or the OS will not say (another user's process on
// Windows). Linux: /proc/PID/comm (the kernel keeps its first 15 bytes); Windows:
// QueryFullProcessImageNameW's file name. Thread-safe.
[[nodiscard]] std::optional<std::string> process_name(unsigned pid);

}  // namespace gpuhost::platform
