#include "doctor/rules_support.h"

namespace gpuhost::doctor {

knowledge::Os knowledge_os(const HostFacts& facts) {
  return facts.is_windows() ? knowledge::Os::windows : knowledge::Os::linux;
}

std::optional<Version> driver_version(const HostFacts& facts) {
  if (!facts.gpu.available || facts.gpu.driver_version.empty()) return std::nullopt;
  return Version::parse(facts.gpu.driver_version);
}

std::optional<Version> driver_cuda_version(const HostFacts& facts) {
  if (!facts.gpu.available || !facts.gpu.cuda_driver_version) return std::nullopt;
  int v = *facts.gpu.cuda_driver_version;  // NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR: v/1000, (v%1000)/10
  return Version({v / 1000, (v % 1000) / 10});
}

std::optional<knowledge::ComputeCapability> compute_capability(const gpu::GpuDevice& device,
                                                               const knowledge::Knowledge& knowledge) {
  if (device.cc_major.has_value() && device.cc_minor.has_value())
    return knowledge::ComputeCapability{*device.cc_major, *device.cc_minor};
  if (auto match = knowledge.gpus.match(device.name)) return match->model->compute_capability;
  return std::nullopt;
}

std::optional<knowledge::ComputeCapability> host_compute_capability(const HostFacts& facts,
                                                                    const knowledge::Knowledge& knowledge) {
  std::optional<knowledge::ComputeCapability> lowest;
  for (const auto& d : facts.gpu.devices) {
    if (d.lost || d.handle_error) continue;
    auto cc = compute_capability(d, knowledge);
    if (cc && (!lowest || *cc < *lowest)) lowest = cc;
  }
  return lowest;
}

std::optional<int> windows_build(const HostFacts& facts) {
  auto v = Version::parse(facts.system.os.version);
  if (!v || v->parts().size() < 3) return std::nullopt;
  return v->component(2);
}

std::string pip_for(const std::string& interpreter) {
  if (interpreter.find(' ') != std::string::npos) return "\"" + interpreter + "\" -m pip";
  return interpreter + " -m pip";
}

}  // namespace gpuhost::doctor
