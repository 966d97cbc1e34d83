#pragma once
// What fake_nvml.cc shares with the files that export the rest of the fake (fake_nvml_mig.cc).
// Every function here REQUIRES the lock state_lock() returns to be held.

#include <mutex>
#include <string_view>
#include <vector>

#include "base/json.h"
#include "gpu/nvml_types.h"
#include "timeline.h"

namespace fake_nvml {

class MigMachine;

struct Device {
  gpuhost::json::Value data;           // the scenario's object for this device
  Timeline timeline;                   // its values over time (stage 0: `data`)
  unsigned long long field_reads = 0;  // nvmlDeviceGetFieldValues calls: the fake's clock for counters
  int parent = -1;                     // a MIG device: its GPU's index; -2 once destroyed
  std::vector<std::size_t> children;   // a GPU: its MIG devices (indices into the MIG device list)
};

[[nodiscard]] std::unique_lock<std::mutex> state_lock();

// Initialised, the scenario's forced error for `function` if any, and `handle` one of the GPUs
// (not a MIG device): its index.
[[nodiscard]] gpuhost::gpu::nvml::nvmlReturn_t begin_gpu(std::string_view function,
                                                         gpuhost::gpu::nvml::nvmlDevice_t handle,
                                                         std::size_t& index);
// Initialised, and the scenario's forced error for `function` if any.
[[nodiscard]] gpuhost::gpu::nvml::nvmlReturn_t begin_call(std::string_view function);

[[nodiscard]] MigMachine& mig();
[[nodiscard]] gpuhost::gpu::nvml::nvmlDevice_t gpu_handle(std::size_t index);
// Whether the GPU has compute processes of its own (the scenario's "processes").
[[nodiscard]] bool gpu_busy(std::size_t index);
// Rebuilds GPU `gpu`'s MIG devices from its MIG state: one per compute instance.
void mig_devices_changed(std::size_t gpu);

}  // namespace fake_nvml
