#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "gpu/snapshot.h"
#include "telemetry/prometheus_text.h"

namespace gpuhost::telemetry {

// A dcgm-exporter metric gpuhost does not emit on this host, and why: either NVML has no way to
// give it (DCP profiling fields need DCGM itself) or NVML answered with an error for one GPU.
struct UnavailableMetric {
  std::string metric;  // "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
  std::string gpu;     // "" when it applies to every GPU
  std::string reason;  // "needs DCGM profiling (DCP)", "NVML_ERROR_NOT_SUPPORTED"
};

// dcgm-exporter's default counters (etc/default-counters.csv) that no NVML call gives, with the
// reason; they go to gpuhost_metric_unavailable instead. Constant.
[[nodiscard]] const std::vector<UnavailableMetric>& dcgm_metrics_without_nvml_source();

// Adds, for every GPU of `snapshot`, the dcgm-exporter metrics NVML gave a value for, with
// dcgm-exporter's names, types, units and labels (gpu, UUID, pci_bus_id, device, modelName,
// Hostname, DCGM_FI_DRIVER_VERSION), plus:
//   gpuhost_nvml_up                 1 when NVML is loaded and initialised, else 0 with an
//                                   `error` label naming the NVML status
//   gpuhost_gpu_lost                1 per GPU that answered NVML_ERROR_GPU_IS_LOST
//   gpuhost_metric_unavailable      1 per {metric, gpu, reason} not emitted
// `hostname` fills the Hostname label. Pure; never fails (missing readings are skipped).
void append_gpu_metrics(const gpu::GpuSnapshot& snapshot, std::string_view hostname, MetricSet& out);

}  // namespace gpuhost::telemetry
