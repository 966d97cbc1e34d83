#pragma once
// MIG state read and changed through NVML, as NVIDIA mig-parted does it (research/08 B2, B3):
// profile names resolved per GPU (profile IDs differ by SKU: never hard-coded), the mode set with
// its activation status (a passthrough VM cannot reset the GPU: the change stays pending until a
// reboot), a layout applied by clearing the GPU (compute instances before GPU instances) and
// trying creation orders until one fits, then read back. Linux only: NVIDIA supports MIG there
// alone, and on Windows NVML can only disable it.

#include <cstdint>
#include <string>
#include <vector>

#include "base/error.h"
#include "gpu/nvml_library.h"

namespace gpuhost::gpu {

struct MigGpuProfile {
  unsigned index = 0;  // NVML_GPU_INSTANCE_PROFILE_* (what nvmlDeviceGetGpuInstanceProfileInfo takes)
  unsigned id = 0;     // the profile ID nvidia-smi mig -lgip shows, which create takes
  std::string name;    // "3g.40gb", "1g.10gb+me"
  unsigned slices = 0;
  unsigned instances = 0;  // most instances of this profile the GPU holds
  std::uint64_t memory_mib = 0;
  unsigned multiprocessors = 0;
};

struct MigGpuInstance {
  unsigned id = 0;
  std::string profile;  // its profile's name
  unsigned start = 0;   // placement, in memory slices
  unsigned size = 0;
  std::vector<unsigned> compute_slices;  // one entry per compute instance: its slice count
  // The name mig-parted gives it in a layout: the profile for one compute instance spanning the
  // whole GPU instance, "1c.3g.40gb" for smaller ones.
  [[nodiscard]] std::vector<std::string> layout_names(unsigned gi_slices) const;
};

struct MigGpu {
  unsigned index = 0;
  std::string name;
  std::string uuid;
  std::uint32_t pci_device_id = 0;
  std::uint32_t pci_subsystem_id = 0;
  bool mig_capable = false;  // nvmlDeviceGetMigMode answered
  bool current = false;
  bool pending = false;
  std::vector<MigGpuProfile> profiles;
  std::vector<MigGpuInstance> instances;
  std::vector<unsigned> compute_pids;  // on the GPU or any of its MIG devices

  [[nodiscard]] const MigGpuProfile* profile(std::string_view name) const;
  // The instances' layout names, sorted, for comparing with a wanted layout.
  [[nodiscard]] std::vector<std::string> layout() const;
  [[nodiscard]] std::string profile_names() const;  // "1g.10gb, 1g.20gb, ..."
};

// What nvmlDeviceSetMigMode answered: the mode is set (pending) when `status` is success; it is
// current once `activation` is success too. RESET_REQUIRED: the platform cannot reset the GPU
// (a passthrough VM): a reboot applies it. IN_USE: a client holds the GPU.
struct MigModeChange {
  nvml::nvmlReturn_t status = nvml::NVML_SUCCESS;
  nvml::nvmlReturn_t activation = nvml::NVML_SUCCESS;
};

class MigManager {
 public:
  // REQUIRES: nvml.usable(); it outlives this object.
  explicit MigManager(const NvmlLibrary& nvml) : m_nvml(nvml) {}

  // Every GPU's MIG state. unavailable when NVML cannot list GPUs.
  [[nodiscard]] Result<std::vector<MigGpu>> read() const;

  [[nodiscard]] Result<MigModeChange> set_mode(unsigned index, bool enabled) const;

  // Makes GPU `index` hold exactly `profiles` (GPU-instance names, one per instance, each with one
  // compute instance spanning it): clears it, then tries each distinct creation order until all
  // fit, and reads the result back. When no order fits (invalid_argument), what the GPU held
  // before is made again where it can be, and the error says which; after a failed NVML call
  // (io_error) the GPU is left clear.
  // REQUIRES: MIG mode current on that GPU and no compute process on it (the caller checks).
  [[nodiscard]] Result<void> apply_layout(unsigned index, const std::vector<std::string>& profiles) const;

  // Destroys every compute instance, then every GPU instance, of GPU `index`.
  [[nodiscard]] Result<void> clear(unsigned index) const;

 private:
  [[nodiscard]] Result<nvml::nvmlDevice_t> handle(unsigned index) const;
  // Tries each distinct order of `order` (clearing the GPU between tries, and before the first
  // when `clear_first`); true once one fits and reads back, false when none does.
  [[nodiscard]] Result<bool> place(unsigned index, std::vector<const MigGpuProfile*> order, bool clear_first,
                                   std::string& last_error) const;
  [[nodiscard]] std::string error_text(nvml::nvmlReturn_t status) const;

  const NvmlLibrary& m_nvml;
};

}  // namespace gpuhost::gpu
