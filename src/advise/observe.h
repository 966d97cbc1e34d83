#pragma once

#include <optional>
#include <string>
#include <vector>

#include "advise/observation.h"
#include "gpu/snapshot.h"
#include "platform/process_info.h"

namespace gpuhost::advise {

// The GPUs over a window, from the NVML snapshots taken during it (oldest first).
[[nodiscard]] std::vector<GpuWindow> summarize_gpus(const std::vector<gpu::GpuSnapshot>& samples);

// Host-wide readings taken at one instant, beside the trainer's group activity.
struct HostReadings {
  platform::GroupActivity group;
  std::optional<std::uint64_t> swapped_in_pages;
  std::optional<double> io_pressure_percent;
  std::optional<double> cpu_pressure_percent;
};

// The DataLoader worker processes of a group: those PyTorch named pt_data_worker (recent
// releases do; 1.13 does not), and, for releases that do not, a process forked from a trainer process of the
// group (the same command line as its parent: Linux's default fork start method) or started by
// multiprocessing's spawn / forkserver.
[[nodiscard]] std::vector<long> loader_worker_pids(const platform::GroupActivity& group);

// The trainer's threads between two readings `seconds` apart. A thread only in `after` started
// during the window and counts from zero; one only in `before` ended and is left out.
[[nodiscard]] HostWindow summarize_host(const HostReadings& before, const HostReadings& after, double seconds,
                                        unsigned cpus);

}  // namespace gpuhost::advise
