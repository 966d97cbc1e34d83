#pragma once

#include <string_view>
#include <vector>

#include "gpu/snapshot.h"
#include "telemetry/prometheus_text.h"

namespace gpuhost::telemetry {

// dcgm-exporter's default counter set (NVIDIA/dcgm-exporter etc/default-counters.csv @d5e5f51),
// every one of which append_gpu_metrics() either emits for a GPU or lists for it in
// gpuhost_metric_unavailable with the reason. Constant.
[[nodiscard]] const std::vector<std::string_view>& dcgm_exporter_default_metrics();

// Adds, for every GPU of `snapshot`, the dcgm-exporter metrics NVML gave a value for, with
// dcgm-exporter's names, types, units and labels (gpu, UUID, pci_bus_id, device, modelName,
// Hostname, DCGM_FI_DRIVER_VERSION), plus:
//   gpuhost_nvml_up                 1 when NVML is loaded and initialised, else 0 with an
//                                   `error` label naming the NVML status
//   gpuhost_gpus                    GPUs NVML reports
//   gpuhost_gpu_lost                1 per GPU that answered NVML_ERROR_GPU_IS_LOST
//   gpuhost_gpu_nvml_errors         per GPU: readings NVML failed this time for a reason other
//                                   than "not supported by this GPU/driver" (0 when all is well)
//   gpuhost_gpu_processes           per GPU: processes using it
//   gpuhost_gpu_process_used_memory_bytes  per GPU and process (labels pid, type)
//   gpuhost_metric_unavailable      1 per {metric, gpu, reason} not emitted
// `hostname` fills the Hostname label. Pure; never fails: a reading NVML refused only moves its
// metrics to gpuhost_metric_unavailable.
void append_gpu_metrics(const gpu::GpuSnapshot& snapshot, std::string_view hostname, MetricSet& out);

}  // namespace gpuhost::telemetry
