// Names, types, units and HELP texts follow dcgm-exporter's default counter set,
// NVIDIA/dcgm-exporter etc/default-counters.csv @d5e5f51 (research/01 §2.1), and its label
// template internal/pkg/rendermetrics/render_metrics.go (research/01 §2.2). Host label spelled
// `Hostname` as in releases 4.5.3-4.8.2, which dashboard 12239 and existing alerts key on.
// Where DCGM computes a value from NVML, gpuhost computes it the same way; the DCGM source is
// named at each such metric.
#include "telemetry/gpu_metrics.h"

#include <algorithm>
#include <string>

#include "gpu/nvml_types.h"

namespace gpuhost::telemetry {
namespace {

using namespace gpu::nvml;

constexpr double k_mib = 1024.0 * 1024.0;

// Why a reading that only a long-running NVML session fills (Xid, GPM, NVLink rate) is missing
// from a one-off snapshot.
constexpr std::string_view k_not_collected = "not collected: needs gpuhost serve's long-running NVML session";

// err_msg for the Xids seen most in practice, spelled as dcgm-exporter spells them
// (internal/pkg/collector/xid_errors.go @d5e5f51, from NVIDIA's catalog
// https://docs.nvidia.com/deploy/xid-errors/); other Xids read "Xid <n>".
std::string xid_message(unsigned xid) {
  switch (xid) {
    case 0: return "No Error";
    case 8: return "GPU stopped processing";
    case 13: return "Graphics Engine Exception";
    case 31: return "GPU memory page fault";
    case 32: return "Invalid or corrupted push buffer stream";
    case 38: return "Driver firmware error";
    case 43: return "GPU stopped processing";
    case 45:
      return "Preemptive cleanup, due to previous errors -- Most likely to see when running multiple cuda";
    case 48: return "Double Bit ECC Error";
    case 61: return "Internal micro-controller breakpoint/warning";
    case 62: return "Internal micro-controller halt";
    case 63: return "ECC page retirement or row remapping recording event";
    case 64: return "ECC page retirement or row remapper recording failure";
    case 68: return "NVDEC0 Exception";
    case 69: return "Graphics Engine class error";
    case 74: return "NVLINK Error";
    case 79: return "GPU has fallen off the bus";
    case 92: return "High single-bit ECC error rate";
    case 94: return "Contained ECC error";
    case 95: return "Uncontained ECC error";
    case 119: return "GSP RPC Timeout";
    case 120: return "GSP Error";
    case 121: return "C2C Link Error";
    case 140: return "Unrecovered ECC Error";
    case 143: return "GPU Initialization Failure";
    default: return "Xid " + std::to_string(xid);
  }
}

// Statuses that say "this GPU, driver or moment cannot give it", as opposed to a failure.
bool is_expected_absence(int status) {
  return status == NVML_ERROR_NOT_SUPPORTED || status == NVML_ERROR_FUNCTION_NOT_FOUND ||
         status == NVML_ERROR_NO_DATA || status == NVML_ERROR_NOT_FOUND;
}

// The gpuhost_metric_unavailable reason: the NVML status name, then why where gpuhost knows more.
std::string reason_for(const gpu::NvmlIssue& issue, std::string_view context) {
  if (context.empty()) {
    if (issue.status == NVML_ERROR_FUNCTION_NOT_FOUND) context = "this NVIDIA driver lacks the NVML function";
    if (issue.status == NVML_ERROR_NO_DATA) context = "first collection: a rate needs the previous scrape";
  }
  std::string reason = issue.name;
  if (!context.empty()) reason += ": " + std::string(context);
  return reason;
}

void add_unavailable(MetricSet& out, std::string_view metric, std::string_view gpu, std::string_view reason) {
  Labels labels{{"metric", std::string(metric)}};
  if (!gpu.empty()) labels.push_back({"gpu", std::string(gpu)});
  labels.push_back({"reason", std::string(reason)});
  out.add("gpuhost_metric_unavailable", MetricType::gauge,
          "dcgm-exporter metrics gpuhost does not emit on this host, and why (1 per metric, GPU and reason); "
          "see doc/metrics.md",
          std::move(labels), 1);
}

// One GPU's series: its labels, and the count of readings NVML failed.
class DeviceMetrics {
 public:
  DeviceMetrics(MetricSet& out, const gpu::GpuDevice& d, const std::string& driver, std::string_view hostname)
      : m_out(out), m_gpu(std::to_string(d.index)) {
    m_labels = {{"gpu", m_gpu},
                {"UUID", d.uuid},
                {"pci_bus_id", d.pci_bus_id},
                // dcgm-exporter uses the /dev/nvidiaN minor number; NVML index is the same on
                // hosts without CUDA_VISIBLE_DEVICES remapping of the device nodes.
                {"device", "nvidia" + std::to_string(d.index)},
                {"modelName", d.name},
                {"Hostname", std::string(hostname)},
                {"DCGM_FI_DRIVER_VERSION", driver}};
    for (const auto& l : m_labels)
      if (l.name != "modelName") m_own_labels.push_back(l);
  }

  const std::string& gpu() const { return m_gpu; }
  MetricSet& out() const { return m_out; }
  int errors() const { return m_errors; }

  void value(std::string_view name, MetricType type, std::string_view help, double v) const {
    m_out.add(name, type, help, m_labels, v);
  }
  void value(std::string_view name, MetricType type, std::string_view help, const Labels& extra,
             double v) const {
    Labels labels = m_labels;
    labels.insert(labels.end(), extra.begin(), extra.end());
    m_out.add(name, type, help, std::move(labels), v);
  }
  // gpuhost's own per-GPU families: the same labels but dcgm-exporter's camelCase modelName, so
  // they lint clean (promtool check metrics) and still join with the DCGM series on the others.
  void own_value(std::string_view name, std::string_view help, const Labels& extra, double v) const {
    Labels labels = m_own_labels;
    labels.insert(labels.end(), extra.begin(), extra.end());
    m_out.add(name, MetricType::gauge, help, std::move(labels), v);
  }
  void unavailable(std::string_view metric, std::string_view reason) const {
    add_unavailable(m_out, metric, m_gpu, reason);
  }

  // Emits through `emit` when the reading has a value; otherwise lists `metrics` as unavailable,
  // with NVML's status and `context` (or a default explanation), counting real failures.
  template <typename T, typename F>
  void from(const gpu::Reading<T>& reading, std::initializer_list<std::string_view> metrics, F&& emit,
            std::string_view context = {}) {
    if (reading.value) {
      emit(*reading.value);
      return;
    }
    std::string reason;
    if (reading.issue) {
      if (!is_expected_absence(reading.issue->status)) ++m_errors;
      reason = reason_for(*reading.issue, context);
    } else {
      reason = k_not_collected;
    }
    for (auto metric : metrics) unavailable(metric, reason);
  }

 private:
  MetricSet& m_out;
  std::string m_gpu;
  Labels m_labels;
  Labels m_own_labels;
  int m_errors = 0;
};

void append_processes(DeviceMetrics& e, const gpu::GpuDevice& d) {
  constexpr std::string_view memory_metric = "gpuhost_gpu_process_used_memory_bytes";
  e.from(
      d.processes, {"gpuhost_gpu_processes", memory_metric}, [&](const std::vector<gpu::GpuProcess>& list) {
        e.own_value(
            "gpuhost_gpu_processes",
            "Processes with a compute or graphics context on this GPU (nvmlDeviceGet*RunningProcesses)", {},
            static_cast<double>(list.size()));
        bool memory_unknown = false;
        for (const auto& p : list) {
          if (!p.used_memory_bytes) {
            memory_unknown = true;
            continue;
          }
          e.own_value(memory_metric, "GPU memory a process uses on this GPU, in bytes",
                      Labels{{"pid", std::to_string(p.pid)}, {"type", p.graphics ? "graphics" : "compute"}},
                      static_cast<double>(*p.used_memory_bytes));
        }
        if (memory_unknown) {
          const bool wddm = d.driver_model.value && d.driver_model.value->current == gpu::DriverModel::wddm;
          e.unavailable(memory_metric,
                        wddm ? "NVML_VALUE_NOT_AVAILABLE: WDDM driver model, Windows manages GPU memory"
                             : "NVML_VALUE_NOT_AVAILABLE");
        }
      });
}

// DCGM's profiling fields from NVML GPM, as DCGM itself reads them on GPUs with GPM (repo
// NVIDIA/DCGM dcgmlib/src/DcgmGpmManager.cpp: a percentage / 100 gives the ratio;
// DcgmCacheManager.cpp: "PCIe ... throughput fields are returned in MiB/s by NVML", * 1024 * 1024).
struct GpmField {
  std::string_view name;
  std::string_view help;
  gpu::Reading<double> gpu::GpmActivity::*reading;
  double scale;
};
constexpr GpmField k_gpm_fields[] = {
    {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.",
     &gpu::GpmActivity::graphics_util_percent, 0.01},
    {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "Ratio of cycles the tensor (HMMA) pipe is active.",
     &gpu::GpmActivity::tensor_util_percent, 0.01},
    {"DCGM_FI_PROF_DRAM_ACTIVE",
     "Ratio of cycles the device memory interface is active sending or receiving data.",
     &gpu::GpmActivity::dram_bw_util_percent, 0.01},
    {"DCGM_FI_PROF_PCIE_TX_BYTES",
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - "
     "in "
     "bytes per second.",
     &gpu::GpmActivity::pcie_tx_mib_per_s, k_mib},
    {"DCGM_FI_PROF_PCIE_RX_BYTES",
     "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in "
     "bytes per second.",
     &gpu::GpmActivity::pcie_rx_mib_per_s, k_mib},
};

void append_gpm(DeviceMetrics& e, const gpu::GpuDevice& d) {
  std::string_view context;
  if (d.gpm.issue && d.gpm.issue->status == NVML_ERROR_NOT_SUPPORTED)
    context = "DCGM profiling field; NVML gives it through GPM on Hopper and newer GPUs only";
  e.from(
      d.gpm,
      {k_gpm_fields[0].name, k_gpm_fields[1].name, k_gpm_fields[2].name, k_gpm_fields[3].name,
       k_gpm_fields[4].name},
      [&](const gpu::GpmActivity& activity) {
        for (const GpmField& f : k_gpm_fields)
          e.from(activity.*(f.reading), {f.name},
                 [&](double v) { e.value(f.name, MetricType::gauge, f.help, v * f.scale); });
      },
      context);
}

void append_device(const gpu::GpuDevice& d, const std::string& driver, std::string_view hostname,
                   MetricSet& out) {
  DeviceMetrics e(out, d, driver, hostname);
  if (d.lost) e.own_value("gpuhost_gpu_lost", "1 when the GPU answered NVML_ERROR_GPU_IS_LOST", {}, 1);
  constexpr std::string_view errors_help =
      "NVML readings that failed for this GPU in this scrape for a reason other than the GPU or driver not "
      "supporting them (gpuhost_metric_unavailable says which and why)";
  if (d.handle_error) {
    e.unavailable("*", d.handle_error->name);
    e.own_value("gpuhost_gpu_nvml_errors", errors_help, {}, 1);
    return;
  }

  e.from(d.clocks, {"DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK"}, [&](const gpu::Clocks& c) {
    e.value("DCGM_FI_DEV_SM_CLOCK", MetricType::gauge, "SM clock frequency (in MHz).", c.sm_mhz);
    if (c.memory_mhz)
      e.value("DCGM_FI_DEV_MEM_CLOCK", MetricType::gauge, "Memory clock frequency (in MHz).", c.memory_mhz);
    else
      e.unavailable("DCGM_FI_DEV_MEM_CLOCK", "nvmlDeviceGetClockInfo(MEM) failed");
  });
  e.from(d.memory_temperature_c, {"DCGM_FI_DEV_MEMORY_TEMP"}, [&](unsigned c) {
    e.value("DCGM_FI_DEV_MEMORY_TEMP", MetricType::gauge, "Memory temperature (in C).", c);
  });
  e.from(d.temperature, {"DCGM_FI_DEV_GPU_TEMP"}, [&](const gpu::Temperatures& t) {
    e.value("DCGM_FI_DEV_GPU_TEMP", MetricType::gauge, "GPU temperature (in C).", t.current_c);
  });
  e.from(d.power, {"DCGM_FI_DEV_POWER_USAGE"}, [&](const gpu::Power& p) {
    e.value("DCGM_FI_DEV_POWER_USAGE", MetricType::gauge, "Power draw (in W).", p.usage_mw / 1000.0);
  });
  e.from(d.total_energy_mj, {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"}, [&](std::uint64_t mj) {
    e.value("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", MetricType::counter,
            "Total energy consumption since boot (in mJ).", static_cast<double>(mj));
  });
  e.from(d.pcie_replay_counter, {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER"}, [&](unsigned v) {
    e.value("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", MetricType::counter, "Total number of PCIe retries.", v);
  });
  // In dcgm-exporter's defaults up to release 3.3.6-3.4.2 (replaced by DCGM_FI_PROF_PCIE_*_BYTES in
  // #357), typed counter there; NVML's value is a KB/s rate over 20 ms, so gauge here. DCGM 4
  // answers NOT_SUPPORTED for these fields (DcgmCacheManager.cpp), so only gpuhost still fills them.
  e.from(
      d.pcie_throughput, {"DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT"},
      [&](const gpu::PcieThroughput& t) {
        e.value("DCGM_FI_DEV_PCIE_TX_THROUGHPUT", MetricType::gauge,
                "PCIe transmit throughput (in KB/s), sampled over 20 ms by nvmlDeviceGetPcieThroughput.",
                t.tx_kb_per_s);
        e.value("DCGM_FI_DEV_PCIE_RX_THROUGHPUT", MetricType::gauge,
                "PCIe receive throughput (in KB/s), sampled over 20 ms by nvmlDeviceGetPcieThroughput.",
                t.rx_kb_per_s);
      },
      d.virtualization.value && *d.virtualization.value == gpu::VirtualizationMode::vgpu
          ? "not available in vGPU guests"
          : "");
  const bool mig = d.mig.value && d.mig.value->current;
  e.from(
      d.utilization, {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL"},
      [&](const gpu::Utilization& u) {
        e.value("DCGM_FI_DEV_GPU_UTIL", MetricType::gauge, "GPU utilization (in %).", u.gpu_percent);
        e.value("DCGM_FI_DEV_MEM_COPY_UTIL", MetricType::gauge, "Memory utilization (in %).",
                u.memory_percent);
      },
      mig ? "MIG is enabled: NVML reports utilisation per MIG instance only" : "");
  e.from(d.encoder_percent, {"DCGM_FI_DEV_ENC_UTIL"}, [&](unsigned v) {
    e.value("DCGM_FI_DEV_ENC_UTIL", MetricType::gauge, "Encoder utilization (in %).", v);
  });
  e.from(d.decoder_percent, {"DCGM_FI_DEV_DEC_UTIL"}, [&](unsigned v) {
    e.value("DCGM_FI_DEV_DEC_UTIL", MetricType::gauge, "Decoder utilization (in %).", v);
  });
  // 0 with err_code "0" until an Xid arrives, then the last one: the value DCGM keeps
  // (DcgmCacheManager.cpp RecordXidForGpu), with dcgm-exporter's err_code/err_msg labels
  // (internal/pkg/collector/gpu_collector.go).
  e.from(d.xid, {"DCGM_FI_DEV_XID_ERRORS"}, [&](const gpu::XidState& x) {
    e.value("DCGM_FI_DEV_XID_ERRORS", MetricType::gauge, "Value of the last XID error encountered.",
            Labels{{"err_code", std::to_string(x.last_xid)}, {"err_msg", xid_message(x.last_xid)}},
            x.last_xid);
  });
  e.from(d.memory, {"DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED"},
         [&](const gpu::MemoryState& m) {
           e.value("DCGM_FI_DEV_FB_FREE", MetricType::gauge, "Framebuffer memory free (in MiB).",
                   static_cast<double>(m.free_bytes) / k_mib);
           e.value("DCGM_FI_DEV_FB_USED", MetricType::gauge, "Framebuffer memory used (in MiB).",
                   static_cast<double>(m.used_bytes) / k_mib);
           e.value(
               "DCGM_FI_DEV_FB_RESERVED", MetricType::gauge,
               "Framebuffer memory reserved (in MiB); 0 where the driver lacks nvmlDeviceGetMemoryInfo_v2.",
               static_cast<double>(m.reserved_bytes) / k_mib);
         });
  // MIG slices: dcgm-exporter's per-instance rows carry the GPU's labels plus GPU_I_PROFILE and
  // GPU_I_ID (research/01 §2.2); NVML gives memory per MIG device, not utilisation.
  if (d.mig_devices.value) {
    for (const auto& m : *d.mig_devices.value) {
      const Labels instance{{"GPU_I_PROFILE", m.profile},
                            {"GPU_I_ID", m.gpu_instance_id ? std::to_string(*m.gpu_instance_id) : std::string()}};
      Labels info = instance;
      info.push_back({"mig_uuid", m.uuid});
      info.push_back({"compute_instance",
                      m.compute_instance_id ? std::to_string(*m.compute_instance_id) : std::string()});
      e.own_value("gpuhost_gpu_mig_device_info",
                  "1 for each MIG device of this GPU (what CUDA_VISIBLE_DEVICES=MIG-<uuid> selects)", info, 1);
      // Memory and GPM activity belong to the GPU instance, which its compute instances share:
      // one row each per instance. A GPM metric NVML does not give for an instance is left out.
      const bool first_of_instance =
          std::find_if(d.mig_devices.value->data(), &m,
                       [&](const gpu::MigDevice& o) { return o.gpu_instance_id == m.gpu_instance_id; }) == &m;
      if (!first_of_instance) continue;
      if (m.gpm.value)
        for (const GpmField& f : k_gpm_fields)
          if (const auto& r = (*m.gpm.value).*(f.reading); r.value)
            e.value(f.name, MetricType::gauge, f.help, instance, *r.value * f.scale);
      if (!m.memory) continue;
      e.value("DCGM_FI_DEV_FB_FREE", MetricType::gauge, "Framebuffer memory free (in MiB).", instance,
              static_cast<double>(m.memory->free_bytes) / k_mib);
      e.value("DCGM_FI_DEV_FB_USED", MetricType::gauge, "Framebuffer memory used (in MiB).", instance,
              static_cast<double>(m.memory->used_bytes) / k_mib);
    }
  }
  // DCGM's value for DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL (a rate, though dcgm-exporter types it
  // counter): see GpuDevice::nvlink_bandwidth.
  e.from(d.nvlink_bandwidth, {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"}, [&](double v) {
    e.value("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", MetricType::counter,
            "Total number of NVLink bandwidth counters for all lanes.", v);
  });
  e.from(d.vgpu_license, {"DCGM_FI_DEV_VGPU_LICENSE_STATUS"}, [&](const gpu::VgpuLicense& l) {
    e.value("DCGM_FI_DEV_VGPU_LICENSE_STATUS", MetricType::gauge, "vGPU License status", l.licensed ? 1 : 0);
  });
  e.from(d.remapped_rows,
         {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
          "DCGM_FI_DEV_ROW_REMAP_FAILURE"},
         [&](const gpu::RemappedRows& r) {
           e.value("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", MetricType::counter,
                   "Number of remapped rows for uncorrectable errors", r.uncorrectable);
           e.value("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", MetricType::counter,
                   "Number of remapped rows for correctable errors", r.correctable);
           e.value("DCGM_FI_DEV_ROW_REMAP_FAILURE", MetricType::gauge, "Whether remapping of rows has failed",
                   r.failure ? 1 : 0);
         });
  append_gpm(e, d);
  // Commented out in dcgm-exporter's defaults but read anyway by gpuhost's collector.
  e.from(d.ecc, {}, [&](const gpu::EccState& ecc) {
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
  e.from(d.retired_pages, {}, [&](const gpu::RetiredPages& r) {
    e.value("DCGM_FI_DEV_RETIRED_SBE", MetricType::counter,
            "Total number of retired pages due to single-bit errors.", r.single_bit);
    e.value("DCGM_FI_DEV_RETIRED_DBE", MetricType::counter,
            "Total number of retired pages due to double-bit errors.", r.double_bit);
    e.value("DCGM_FI_DEV_RETIRED_PENDING", MetricType::counter, "Total number of pages pending retirement.",
            r.pending ? 1 : 0);
  });
  append_processes(e, d);
  e.own_value("gpuhost_gpu_nvml_errors", errors_help, {}, e.errors());
}

}  // namespace

const std::vector<std::string_view>& dcgm_exporter_default_metrics() {
  static const std::vector<std::string_view> list = {
      "DCGM_FI_DEV_SM_CLOCK",
      "DCGM_FI_DEV_MEM_CLOCK",
      "DCGM_FI_DEV_MEMORY_TEMP",
      "DCGM_FI_DEV_GPU_TEMP",
      "DCGM_FI_DEV_POWER_USAGE",
      "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
      "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
      "DCGM_FI_DEV_GPU_UTIL",
      "DCGM_FI_DEV_MEM_COPY_UTIL",
      "DCGM_FI_DEV_ENC_UTIL",
      "DCGM_FI_DEV_DEC_UTIL",
      "DCGM_FI_DEV_XID_ERRORS",
      "DCGM_FI_DEV_FB_FREE",
      "DCGM_FI_DEV_FB_USED",
      "DCGM_FI_DEV_FB_RESERVED",
      "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
      "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
      "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
      "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
      "DCGM_FI_DEV_ROW_REMAP_FAILURE",
      "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
      "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
      "DCGM_FI_PROF_DRAM_ACTIVE",
      "DCGM_FI_PROF_PCIE_TX_BYTES",
      "DCGM_FI_PROF_PCIE_RX_BYTES",
  };
  return list;
}

void append_gpu_metrics(const gpu::GpuSnapshot& snapshot, std::string_view hostname, MetricSet& out) {
  Labels up_labels;
  if (!snapshot.available && snapshot.error) up_labels.push_back({"error", snapshot.error->name});
  out.add("gpuhost_nvml_up", MetricType::gauge,
          "1 when NVML is loaded and initialised; 0 with the NVML status in the error label",
          std::move(up_labels), snapshot.available ? 1 : 0);
  if (!snapshot.available) return;
  out.add("gpuhost_gpus", MetricType::gauge, "Number of GPUs NVML reports", {},
          static_cast<double>(snapshot.devices.size()));
  if (snapshot.count_error)
    add_unavailable(out, "*", "", reason_for(*snapshot.count_error, "nvmlDeviceGetCount failed"));
  for (const auto& device : snapshot.devices) append_device(device, snapshot.driver_version, hostname, out);
}

}  // namespace gpuhost::telemetry
