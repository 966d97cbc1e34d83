// Names, types, units and HELP texts follow dcgm-exporter's default counter set,
// NVIDIA/dcgm-exporter etc/default-counters.csv @00d6d34 (research/01 §2.1), and its label
// template internal/pkg/rendermetrics/render_metrics.go (research/01 §2.2). Host label spelled
// `Hostname` as in releases 4.5.3-4.8.2, which dashboard 12239 and existing alerts key on.
#include "telemetry/gpu_metrics.h"

#include <string>

namespace gpuhost::telemetry {
namespace {

constexpr double k_mib = 1024.0 * 1024.0;

struct Emitter {
  MetricSet& out;
  Labels labels;
  std::string gpu;

  void value(std::string_view name, MetricType type, std::string_view help, double v) const {
    out.add(name, type, help, labels, v);
  }
};

void unavailable(MetricSet& out, std::string_view metric, std::string_view gpu, std::string_view reason) {
  Labels labels{{"metric", std::string(metric)}};
  if (!gpu.empty()) labels.push_back({"gpu", std::string(gpu)});
  labels.push_back({"reason", std::string(reason)});
  out.add("gpuhost_metric_unavailable", MetricType::gauge,
          "dcgm-exporter metrics gpuhost does not emit on this host, and why (1 per metric, GPU and reason); "
          "see doc/metrics.md",
          std::move(labels), 1);
}

// Emits when the reading has a value; lists the metrics as unavailable with NVML's reason when
// NVML answered an error; stays silent for a reading never attempted (lost GPU, no handle).
template <typename T, typename F>
void from_reading(const Emitter& e, const gpu::Reading<T>& reading,
                  std::initializer_list<std::string_view> metrics, F&& emit) {
  if (reading.value) {
    emit(*reading.value);
    return;
  }
  if (reading.issue)
    for (auto metric : metrics) unavailable(e.out, metric, e.gpu, reading.issue->name);
}

void append_device(const gpu::GpuDevice& d, const std::string& driver, std::string_view hostname,
                   MetricSet& out) {
  Emitter e{out, {}, std::to_string(d.index)};
  e.labels = {{"gpu", e.gpu},
              {"UUID", d.uuid},
              {"pci_bus_id", d.pci_bus_id},
              // dcgm-exporter uses the /dev/nvidiaN minor number; NVML index is the same on
              // hosts without CUDA_VISIBLE_DEVICES remapping of the device nodes.
              {"device", "nvidia" + std::to_string(d.index)},
              {"modelName", d.name},
              {"Hostname", std::string(hostname)},
              {"DCGM_FI_DRIVER_VERSION", driver}};
  if (d.lost)
    out.add("gpuhost_gpu_lost", MetricType::gauge, "1 when the GPU answered NVML_ERROR_GPU_IS_LOST", e.labels,
            1);
  if (d.handle_error) {
    unavailable(out, "*", e.gpu, d.handle_error->name);
    return;
  }

  from_reading(e, d.clocks, {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK"}, [&](const gpu::Clocks& c) {
    e.value("DCGM_FI_DEV_SM_CLOCK", MetricType::gauge, "SM clock frequency (in MHz).", c.sm_mhz);
    if (c.memory_mhz)
      e.value("DCGM_FI_DEV_MEM_CLOCK", MetricType::gauge, "Memory clock frequency (in MHz).", c.memory_mhz);
  });
  from_reading(e, d.temperature, {"DCGM_FI_DEV_GPU_TEMP"}, [&](const gpu::Temperatures& t) {
    e.value("DCGM_FI_DEV_GPU_TEMP", MetricType::gauge, "GPU temperature (in C).", t.current_c);
  });
  from_reading(e, d.power, {"DCGM_FI_DEV_POWER_USAGE"}, [&](const gpu::Power& p) {
    e.value("DCGM_FI_DEV_POWER_USAGE", MetricType::gauge, "Power draw (in W).", p.usage_mw / 1000.0);
  });
  from_reading(e, d.pcie_replay_counter, {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER"}, [&](unsigned v) {
    e.value("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", MetricType::counter, "Total number of PCIe retries.", v);
  });
  from_reading(e, d.utilization, {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"},
               [&](const gpu::Utilization& u) {
                 e.value("DCGM_FI_DEV_GPU_UTIL", MetricType::gauge, "GPU utilization (in %).", u.gpu_percent);
                 e.value("DCGM_FI_DEV_MEM_COPY_UTIL", MetricType::gauge, "Memory utilization (in %).",
                         u.memory_percent);
               });
  from_reading(e, d.memory, {"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED"}, [&](const gpu::MemoryState& m) {
    e.value("DCGM_FI_DEV_FB_FREE", MetricType::gauge, "Framebuffer memory free (in MiB).",
            static_cast<double>(m.free_bytes) / k_mib);
    e.value("DCGM_FI_DEV_FB_USED", MetricType::gauge, "Framebuffer memory used (in MiB).",
            static_cast<double>(m.used_bytes) / k_mib);
    e.value("DCGM_FI_DEV_FB_RESERVED", MetricType::gauge,
            "Framebuffer memory reserved (in MiB); 0 where the driver lacks nvmlDeviceGetMemoryInfo_v2.",
            static_cast<double>(m.reserved_bytes) / k_mib);
  });
  from_reading(e, d.vgpu_license, {"DCGM_FI_DEV_VGPU_LICENSE_STATUS"}, [&](const gpu::VgpuLicense& l) {
    e.value("DCGM_FI_DEV_VGPU_LICENSE_STATUS", MetricType::gauge, "vGPU License status", l.licensed ? 1 : 0);
  });
  from_reading(e, d.remapped_rows,
               {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
                "DCGM_FI_DEV_ROW_REMAP_FAILURE"},
               [&](const gpu::RemappedRows& r) {
                 e.value("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", MetricType::counter,
                         "Number of remapped rows for uncorrectable errors", r.uncorrectable);
                 e.value("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", MetricType::counter,
                         "Number of remapped rows for correctable errors", r.correctable);
                 e.value("DCGM_FI_DEV_ROW_REMAP_FAILURE", MetricType::gauge,
                         "Whether remapping of rows has failed", r.failure ? 1 : 0);
               });
  // Commented out in dcgm-exporter's defaults but read anyway by gpuhost's collector.
  from_reading(e, d.ecc, {}, [&](const gpu::EccState& ecc) {
    if (!ecc.enabled_current) return;
    e.value("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", MetricType::counter,
            "Total number of single-bit volatile ECC errors.", static_cast<double>(ecc.volatile_corrected));
    e.value("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", MetricType::counter,
            "Total number of double-bit volatile ECC errors.", static_cast<double>(ecc.volatile_uncorrected));
    e.value("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", MetricType::counter,
            "Total number of single-bit persistent ECC errors.",
            static_cast<double>(ecc.aggregate_corrected));
    e.value("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", MetricType::counter,
            "Total number of double-bit persistent ECC errors.",
            static_cast<double>(ecc.aggregate_uncorrected));
  });
  from_reading(e, d.retired_pages, {}, [&](const gpu::RetiredPages& r) {
    e.value("DCGM_FI_DEV_RETIRED_SBE", MetricType::counter,
            "Total number of retired pages due to single-bit errors.", r.single_bit);
    e.value("DCGM_FI_DEV_RETIRED_DBE", MetricType::counter,
            "Total number of retired pages due to double-bit errors.", r.double_bit);
    e.value("DCGM_FI_DEV_RETIRED_PENDING", MetricType::counter, "Total number of pages pending retirement.",
            r.pending ? 1 : 0);
  });
}

}  // namespace

const std::vector<UnavailableMetric>& dcgm_metrics_without_nvml_source() {
  static const std::vector<UnavailableMetric> list = {
      {"DCGM_FI_DEV_MEMORY_TEMP", "", "not read by gpuhost's NVML collector (NVML field values)"},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "", "not read by gpuhost's NVML collector yet"},
      {"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "", "not read by gpuhost's NVML collector yet"},
      {"DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "", "not read by gpuhost's NVML collector yet"},
      {"DCGM_FI_DEV_ENC_UTIL", "", "not read by gpuhost's NVML collector yet"},
      {"DCGM_FI_DEV_DEC_UTIL", "", "not read by gpuhost's NVML collector yet"},
      {"DCGM_FI_DEV_XID_ERRORS", "", "needs an NVML event listener; not implemented yet"},
      {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "", "not read by gpuhost's NVML collector yet"},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "", "DCGM profiling (DCP) field: no NVML equivalent"},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "", "DCGM profiling (DCP) field: no NVML equivalent"},
      {"DCGM_FI_PROF_DRAM_ACTIVE", "", "DCGM profiling (DCP) field: no NVML equivalent"},
  };
  return list;
}

void append_gpu_metrics(const gpu::GpuSnapshot& snapshot, std::string_view hostname, MetricSet& out) {
  Labels up_labels;
  if (!snapshot.available && snapshot.error) up_labels.push_back({"error", snapshot.error->name});
  out.add("gpuhost_nvml_up", MetricType::gauge,
          "1 when NVML is loaded and initialised; 0 with the NVML status in the error label",
          std::move(up_labels), snapshot.available ? 1 : 0);
  if (snapshot.available) {
    out.add("gpuhost_gpus", MetricType::gauge, "Number of GPUs NVML reports", {},
            static_cast<double>(snapshot.devices.size()));
    for (const auto& device : snapshot.devices) append_device(device, snapshot.driver_version, hostname, out);
  }
  for (const auto& m : dcgm_metrics_without_nvml_source()) unavailable(out, m.metric, m.gpu, m.reason);
}

}  // namespace gpuhost::telemetry
