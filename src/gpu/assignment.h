#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "gpu/snapshot.h"

namespace gpuhost::gpu {

// The GPUs one job may use (`gpuhost run --gpu`), as the CUDA_VISIBLE_DEVICES value its trainer
// gets. Indices are NVML's (nvidia-smi's) and are passed on as UUIDs: CUDA numbers GPUs fastest
// first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, so an index would name another GPU there; a UUID
// names the same one everywhere (CUDA C Programming Guide, CUDA Environment Variables).
struct GpuAssignment {
  struct Device {
    std::string uuid;   // "GPU-..." or "MIG-..."
    std::string label;  // "GPU 1 (NVIDIA A100-SXM4-80GB)", or the UUID when NVML cannot say
  };
  std::vector<Device> devices;
  std::vector<std::string> notes;  // what could not be checked, said on the console

  [[nodiscard]] std::string visible_devices() const;  // "GPU-a,GPU-b"
};

// Reads a --gpu value: a comma-separated list of NVML indices (0,1), GPU UUIDs (GPU-...) and MIG
// device UUIDs (MIG-...), checked against the host's GPUs in `snapshot`. Refused, with the fix
// (invalid_argument): an index or GPU UUID this host does not have; an index when NVML cannot be
// read; the same GPU twice; more than one MIG device, or a MIG device with other GPUs (a CUDA
// process enumerates a single MIG instance: NVIDIA's MIG user guide);
// a MIG device where no GPU has MIG mode on; MIG on Windows (NVIDIA supports MIG on Linux only).
[[nodiscard]] Result<GpuAssignment> assign_gpus(std::string_view spec, const GpuSnapshot& snapshot,
                                                bool windows);

// The slices `gpuhost run --gpu mig:<profile>` may take: the MIG devices of that profile on which
// NVML lists no compute process, in NVML order (GPU, then slot). Refused with the reason and the
// fix: MIG on Windows; a profile no GPU of this host has (naming those it has); every slice of it
// busy (naming the PIDs). Which of them another gpuhost run holds is the caller's to check
// (cli/gpu_claims.h): a CUDA process shows in NVML only once it has a context.
[[nodiscard]] Result<std::vector<GpuAssignment::Device>> free_mig_slices(std::string_view profile,
                                                                         const GpuSnapshot& snapshot, bool windows);

}  // namespace gpuhost::gpu
