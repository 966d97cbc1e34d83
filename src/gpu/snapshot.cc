#include "gpu/snapshot.h"

#include <cstdio>

namespace gpuhost::gpu {

const char* driver_model_name(DriverModel model) {
  // nvidia-smi's spelling (driver_model.current: "WDDM", "TCC"; MCDM since R550).
  switch (model) {
    case DriverModel::wddm: return "WDDM";
    case DriverModel::tcc: return "TCC";
    case DriverModel::mcdm: return "MCDM";
  }
  return "unknown";
}

const char* virtualization_mode_name(VirtualizationMode mode) {
  // nvmlGpuVirtualizationMode_t enumerator suffixes, lower case.
  switch (mode) {
    case VirtualizationMode::none: return "none";
    case VirtualizationMode::passthrough: return "passthrough";
    case VirtualizationMode::vgpu: return "vgpu";
    case VirtualizationMode::host_vgpu: return "host_vgpu";
    case VirtualizationMode::host_vsga: return "host_vsga";
  }
  return "unknown";
}

std::vector<std::string> clocks_event_reason_names(std::uint64_t mask) {
  struct Bit {
    std::uint64_t bit;
    const char* name;
  };
  static constexpr Bit k_bits[] = {
      {clocks_event::gpu_idle, "gpu_idle"},
      {clocks_event::applications_clocks_setting, "applications_clocks_setting"},
      {clocks_event::sw_power_cap, "sw_power_cap"},
      {clocks_event::hw_slowdown, "hw_slowdown"},
      {clocks_event::sync_boost, "sync_boost"},
      {clocks_event::sw_thermal_slowdown, "sw_thermal_slowdown"},
      {clocks_event::hw_thermal_slowdown, "hw_thermal_slowdown"},
      {clocks_event::hw_power_brake_slowdown, "hw_power_brake_slowdown"},
      {clocks_event::display_clock_setting, "display_clock_setting"},
  };
  std::vector<std::string> names;
  for (const auto& b : k_bits) {
    if (mask & b.bit) names.emplace_back(b.name);
    mask &= ~b.bit;
  }
  // Bits a newer driver defines: named by value so nothing is silently dropped.
  for (int i = 0; i < 64; ++i) {
    std::uint64_t bit = std::uint64_t{1} << i;
    if (mask & bit) {
      char text[24];
      std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(bit));
      names.emplace_back(text);
    }
  }
  return names;
}

}  // namespace gpuhost::gpu
