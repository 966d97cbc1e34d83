#pragma once

#include <chrono>
#include <stop_token>
#include <string>
#include <vector>

#include "advise/observation.h"
#include "base/error.h"
#include "gpu/nvml_session.h"
#include "gpu/snapshot.h"

namespace gpuhost::advise {

// One window of watching a trainer: what `gpuhost advise` does once and `gpuhost run`'s advisor
// does over and over (supervise/job_advisor.h).
struct WatchOptions {
  long group = 0;  // the trainer's process group (the supervisor's child leads it)
  std::chrono::milliseconds window{std::chrono::seconds(10)};
  std::chrono::milliseconds sample_interval{std::chrono::milliseconds(500)};
  unsigned local_processes = 1;  // trainer processes on this host, for the worker suggestion
  // The job's GPUs as CUDA_VISIBLE_DEVICES names them (indices, GPU-<uuid>); empty: every GPU.
  std::vector<std::string> visible_devices;
};

struct Watched {
  Observation observation;
  double seconds = 0;      // how long it really watched
  std::string gpu_unseen;  // why no GPU was read, when observation.gpus is empty
};

// Samples NVML every sample_interval over the window and reads the group's threads at its two
// ends. Errors: not_found when the group has ended before or during the window, unavailable
// when `stop` was requested (returned within one sample interval). Windows: the GPUs only, with
// host_unseen saying why.
[[nodiscard]] Result<Watched> watch(const WatchOptions& options, gpu::NvmlSession& session,
                                    std::stop_token stop = {});

// Keeps only the devices `visible` names (a CUDA_VISIBLE_DEVICES list: NVML indices, GPU- or
// MIG- UUIDs). A MIG UUID keeps the GPU it is on, narrowed to the slice: the slice's memory and
// its GPU instance's GPM (Hopper and later). When one of its entries matches no device (a slice
// NVML did not list, a typo), every device is kept: the advisor cannot tell which GPU is the
// job's and says nothing narrower than the host.
void keep_visible_devices(gpu::GpuSnapshot& snapshot, const std::vector<std::string>& visible);

// CUDA_VISIBLE_DEVICES ("0,1", "GPU-8f...,GPU-3a...") as its entries; empty for "" (all GPUs
// is the caller's reading of an unset variable, not of an empty one: CUDA then sees none).
[[nodiscard]] std::vector<std::string> split_visible_devices(std::string_view value);

}  // namespace gpuhost::advise
