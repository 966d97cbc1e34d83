#pragma once
// Reading a GPU's MIG devices and a device's memory through NVML (used by the collector; kept
// apart so collector.cc stays one reader of one device).

#include <vector>

#include "gpu/nvml_library.h"
#include "gpu/snapshot.h"

namespace gpuhost::gpu {

// nvmlDeviceGetMemoryInfo_v2, or v1 where the driver lacks _v2 or rejects its struct version
// (v1 has no `reserved`). NVML_ERROR_FUNCTION_NOT_FOUND when the library has neither.
nvml::nvmlReturn_t read_memory_state(const NvmlFunctions& f, nvml::nvmlDevice_t device, MemoryState& out);

// The MIG devices of `parent` (a GPU with MIG mode current), slot by slot up to
// nvmlDeviceGetMaxMigDeviceCount; empty slots (NVML_ERROR_NOT_FOUND) are skipped. The status is
// that of the count; NVML_ERROR_GPU_IS_LOST from any call ends the listing with it.
nvml::nvmlReturn_t read_mig_devices(const NvmlFunctions& f, nvml::nvmlDevice_t parent,
                                    std::vector<MigDevice>& out);

// The PIDs of the compute processes on `device` (a GPU or a MIG device); empty when NVML cannot
// say (at most 64: enough to tell a device in use).
std::vector<unsigned> read_compute_pids(const NvmlFunctions& f, nvml::nvmlDevice_t device);

// "NVIDIA A100-SXM4-80GB MIG 3g.40gb" -> "3g.40gb"; "" when the name has no " MIG " part.
std::string mig_profile_from_name(const std::string& name);

}  // namespace gpuhost::gpu
