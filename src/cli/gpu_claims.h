#pragma once
// Which gpuhost run holds which MIG slice, so that jobs started side by side never share one: a
// slice is held by an exclusive lock on <jobs root>/.gpu-claims/<MIG-uuid>.lock for the life of
// the run that took it (the OS drops the lock when that process dies, even on SIGKILL, so a
// crashed run never leaves a slice taken). NVML alone cannot tell: a trainer shows in its process
// list only once CUDA has a context, seconds after it starts.

#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "gpu/assignment.h"
#include "platform/file_lock.h"

namespace gpuhost::cli {

struct GpuClaim {
  gpu::GpuAssignment::Device device;
  platform::FileLock lock;  // held until this object goes
};

// Takes the first of `candidates` no other run holds, writing `owner` ("job NAME, pid N") beside
// its lock for the refusal others get. Refused (invalid_argument), naming each slice's holder,
// when every one is held; io_error when the claims folder cannot be written.
[[nodiscard]] Result<GpuClaim> claim_mig_slice(const std::filesystem::path& jobs_root,
                                               const std::vector<gpu::GpuAssignment::Device>& candidates,
                                               const std::string& request, const std::string& owner);

}  // namespace gpuhost::cli
