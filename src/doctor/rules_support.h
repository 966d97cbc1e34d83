#pragma once
// Facts the rules of several layers derive the same way. Internal to doctor/.

#include <cstdint>
#include <optional>
#include <string>

#include "base/version.h"
#include "doctor/facts.h"
#include "knowledge/compute_capability.h"
#include "knowledge/knowledge.h"

namespace gpuhost::doctor {

inline constexpr std::uint64_t k_gib = 1ull << 30;

[[nodiscard]] knowledge::Os knowledge_os(const HostFacts& facts);
// The loaded driver's version; nullopt without a working driver.
[[nodiscard]] std::optional<Version> driver_version(const HostFacts& facts);
// The newest CUDA the driver reports (nvmlSystemGetCudaDriverVersion_v2), e.g. 12.2.
[[nodiscard]] std::optional<Version> driver_cuda_version(const HostFacts& facts);
// A GPU's compute capability: NVML's reading, else the knowledge table's entry for its name.
[[nodiscard]] std::optional<knowledge::ComputeCapability> compute_capability(const gpu::GpuDevice& device,
                                                                             const knowledge::Knowledge& knowledge);
// The lowest compute capability among the host's GPUs (what a build must cover); nullopt if none.
[[nodiscard]] std::optional<knowledge::ComputeCapability> host_compute_capability(const HostFacts& facts,
                                                                                  const knowledge::Knowledge& knowledge);
// The Windows build number from the OS version ("10.0.20348" -> 20348).
[[nodiscard]] std::optional<int> windows_build(const HostFacts& facts);
// "pip" for the interpreter: "/usr/bin/python3 -m pip".
[[nodiscard]] std::string pip_for(const std::string& interpreter);

}  // namespace gpuhost::doctor
