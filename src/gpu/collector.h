#pragma once

#include "gpu/nvml_library.h"
#include "gpu/snapshot.h"

namespace gpuhost::gpu {

// Reads every GPU through `nvml` into a snapshot. Never fails: a library that is not initialised
// gives available=false with its error; each value NVML cannot give carries the reason instead.
// A GPU that answers NVML_ERROR_GPU_IS_LOST to any call is marked lost and not queried further;
// its remaining readings carry that issue. Thread-safe (NVML is). GPUs are read in parallel,
// up to 8 at a time; each spends at least 40 ms in nvmlDeviceGetPcieThroughput, which samples
// for 20 ms per direction (nvml.h). The readings that need time or a listener (xid, gpm, nvlink_bandwidth) are left
// unattempted: NvmlSession (gpu/nvml_session.h) fills them.
[[nodiscard]] GpuSnapshot collect_snapshot(const NvmlLibrary& nvml);

// Loads NVML the usual way (nvml_library_candidates()), collects, and shuts NVML down again.
[[nodiscard]] GpuSnapshot take_snapshot();

}  // namespace gpuhost::gpu
