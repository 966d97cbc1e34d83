#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/json.h"

namespace gpuhost::gpu {

// Why a value could not be read: the NVML return code, its NVML name and message. Kept so a
// report can say *why* a value is missing (not supported under WDDM, under MIG, in a vGPU VM).
struct NvmlIssue {
  int status = 0;            // nvmlReturn_t
  std::string name;          // "NVML_ERROR_NOT_SUPPORTED"
  std::string message;       // "Not supported on this device"

  friend bool operator==(const NvmlIssue&, const NvmlIssue&) = default;
};

// A value read through NVML, or the reason it is missing. Neither is set only for a reading that
// was never attempted (a GPU whose handle could not be obtained).
template <typename T>
struct Reading {
  std::optional<T> value;
  std::optional<NvmlIssue> issue;  // set when value is empty because NVML returned an error

  [[nodiscard]] bool has_value() const { return value.has_value(); }
  [[nodiscard]] const T& operator*() const { return *value; }
  [[nodiscard]] T value_or(T fallback) const { return value.value_or(fallback); }

  friend bool operator==(const Reading&, const Reading&) = default;
};

struct MemoryState {
  std::uint64_t total_bytes = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::uint64_t reserved_bytes = 0;  // nvmlDeviceGetMemoryInfo_v2 only

  friend bool operator==(const MemoryState&, const MemoryState&) = default;
};

// Counters are 0 when NVML would not give them (it answers NOT_SUPPORTED while ECC is off).
struct EccState {
  bool enabled_current = false;
  bool enabled_pending = false;
  std::uint64_t volatile_corrected = 0;
  std::uint64_t volatile_uncorrected = 0;
  std::uint64_t aggregate_corrected = 0;
  std::uint64_t aggregate_uncorrected = 0;

  friend bool operator==(const EccState&, const EccState&) = default;
};

// Dynamic page retirement (pre-Ampere).
struct RetiredPages {
  unsigned single_bit = 0;  // NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS
  unsigned double_bit = 0;  // NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
  bool pending = false;     // nvmlDeviceGetRetiredPagesPendingStatus

  friend bool operator==(const RetiredPages&, const RetiredPages&) = default;
};

// Row remapping (Ampere and later).
struct RemappedRows {
  unsigned correctable = 0;
  unsigned uncorrectable = 0;
  bool pending = false;
  bool failure = false;

  friend bool operator==(const RemappedRows&, const RemappedRows&) = default;
};

// Read when the current generation and width are; the other fields are 0 when NVML could not say.
struct PcieLink {
  unsigned current_generation = 0;
  unsigned max_generation = 0;      // min(device, system): nvmlDeviceGetMaxPcieLinkGeneration
  unsigned gpu_max_generation = 0;  // device capability: nvmlDeviceGetGpuMaxPcieLinkGeneration (0 = unknown)
  unsigned current_width = 0;
  unsigned max_width = 0;

  friend bool operator==(const PcieLink&, const PcieLink&) = default;
};

// Windows driver model (nvmlDriverModel_t): 0 WDDM, 1 WDM (TCC), 2 MCDM.
enum class DriverModel { wddm = 0, tcc = 1, mcdm = 2 };
[[nodiscard]] const char* driver_model_name(DriverModel model);

struct DriverModelState {
  DriverModel current = DriverModel::wddm;
  DriverModel pending = DriverModel::wddm;

  friend bool operator==(const DriverModelState&, const DriverModelState&) = default;
};

struct MigState {
  bool current = false;  // NVML_DEVICE_MIG_ENABLE
  bool pending = false;

  friend bool operator==(const MigState&, const MigState&) = default;
};

// GPU Performance Monitoring (nvmlGpmMetricsGet, Hopper and later) between two samples: the
// previous collection's and this one's. Each metric has its own NVML status.
struct GpmActivity {
  double interval_s = 0;                  // time between the two samples
  Reading<double> graphics_util_percent;  // NVML_GPM_METRIC_GRAPHICS_UTIL
  Reading<double> tensor_util_percent;    // NVML_GPM_METRIC_ANY_TENSOR_UTIL
  Reading<double> dram_bw_util_percent;   // NVML_GPM_METRIC_DRAM_BW_UTIL
  Reading<double> pcie_tx_mib_per_s;      // NVML_GPM_METRIC_PCIE_TX_PER_SEC
  Reading<double> pcie_rx_mib_per_s;      // NVML_GPM_METRIC_PCIE_RX_PER_SEC

  friend bool operator==(const GpmActivity&, const GpmActivity&) = default;
};

// One MIG device (a GPU instance's compute instance) of a GPU in MIG mode, as CUDA sees it:
// CUDA_VISIBLE_DEVICES=MIG-<uuid>. The profile is the name's suffix ("NVIDIA A100-SXM4-80GB MIG
// 3g.40gb" -> "3g.40gb"), which is dcgm-exporter's GPU_I_PROFILE label.
struct MigDevice {
  unsigned slot = 0;  // index for nvmlDeviceGetMigDeviceHandleByIndex
  std::string uuid;   // "MIG-..."
  std::string name;
  std::string profile;
  std::optional<unsigned> gpu_instance_id;
  std::optional<unsigned> compute_instance_id;
  std::optional<MemoryState> memory;
  std::vector<unsigned> compute_pids;  // compute processes on this slice (NVML lists them per MIG device)
  // The GPU instance's activity (nvmlGpmMigSampleGet on the parent GPU, Hopper and later) between
  // the previous collection and this one; compute instances of one GPU instance share it.
  Reading<GpmActivity> gpm;

  friend bool operator==(const MigDevice&, const MigDevice&) = default;
};

// nvmlGpuVirtualizationMode_t: 0 NONE, 1 PASSTHROUGH, 2 VGPU, 3 HOST_VGPU, 4 HOST_VSGA.
enum class VirtualizationMode { none = 0, passthrough = 1, vgpu = 2, host_vgpu = 3, host_vsga = 4 };
[[nodiscard]] const char* virtualization_mode_name(VirtualizationMode mode);

// vGPU licensing (nvmlDeviceGetGridLicensableFeatures_v4), for VMs with a vGPU.
struct VgpuLicense {
  bool licensing_supported = false;
  bool licensed = false;               // an enabled licensable feature has a non-zero featureState
  std::string feature;                 // productName: "NVIDIA RTX Virtual Workstation", ...
  std::string state;                   // "licensed", "unlicensed", "not supported" (isGridLicenseSupported == 0)
  std::int64_t expiry_unix = 0;        // 0 when unknown

  friend bool operator==(const VgpuLicense&, const VgpuLicense&) = default;
};

// Read when the GPU temperature is; a threshold is empty when NVML could not say.
struct Temperatures {
  unsigned current_c = 0;
  std::optional<unsigned> shutdown_c;   // NVML_TEMPERATURE_THRESHOLD_SHUTDOWN
  std::optional<unsigned> slowdown_c;   // NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
  std::optional<unsigned> gpu_max_c;    // NVML_TEMPERATURE_THRESHOLD_GPU_MAX
  std::optional<unsigned> memory_max_c; // NVML_TEMPERATURE_THRESHOLD_MEM_MAX

  friend bool operator==(const Temperatures&, const Temperatures&) = default;
};

// Read when the SM clock is; the other fields are 0 when NVML could not say.
struct Clocks {
  unsigned sm_mhz = 0;
  unsigned memory_mhz = 0;
  unsigned sm_max_mhz = 0;
  unsigned memory_max_mhz = 0;

  friend bool operator==(const Clocks&, const Clocks&) = default;
};

// Read when the usage is; enforced_limit_mw is 0 when NVML could not say.
struct Power {
  unsigned usage_mw = 0;
  unsigned enforced_limit_mw = 0;

  friend bool operator==(const Power&, const Power&) = default;
};

struct Utilization {
  unsigned gpu_percent = 0;
  unsigned memory_percent = 0;

  friend bool operator==(const Utilization&, const Utilization&) = default;
};

// nvmlClocksEventReason* bits (nvml.h).
namespace clocks_event {
inline constexpr std::uint64_t gpu_idle = 0x1;
inline constexpr std::uint64_t applications_clocks_setting = 0x2;
inline constexpr std::uint64_t sw_power_cap = 0x4;
inline constexpr std::uint64_t hw_slowdown = 0x8;
inline constexpr std::uint64_t sync_boost = 0x10;
inline constexpr std::uint64_t sw_thermal_slowdown = 0x20;
inline constexpr std::uint64_t hw_thermal_slowdown = 0x40;
inline constexpr std::uint64_t hw_power_brake_slowdown = 0x80;
inline constexpr std::uint64_t display_clock_setting = 0x100;
}  // namespace clocks_event

// Names of the set bits, e.g. {"sw_thermal_slowdown"}.
[[nodiscard]] std::vector<std::string> clocks_event_reason_names(std::uint64_t mask);

// nvmlDeviceGetPcieThroughput: KB/s, each over a 20 ms window NVML samples during the call.
struct PcieThroughput {
  unsigned tx_kb_per_s = 0;
  unsigned rx_kb_per_s = 0;

  friend bool operator==(const PcieThroughput&, const PcieThroughput&) = default;
};

// NVLink data (payload) traffic summed over every link since the driver loaded (NVML field values
// NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX with the all-links scope), and when NVML read it.
struct NvlinkTraffic {
  std::uint64_t tx_kib = 0;
  std::uint64_t rx_kib = 0;
  std::int64_t timestamp_us = 0;  // NVML's CPU timestamp, microseconds since 1970

  friend bool operator==(const NvlinkTraffic&, const NvlinkTraffic&) = default;
};

// The last Xid (nvmlEventTypeXidCriticalError) gpuhost saw for a GPU since it started listening.
struct XidState {
  unsigned last_xid = 0;           // 0: none seen yet
  std::uint64_t count = 0;         // Xid events seen since listening started
  std::int64_t last_unix = 0;      // when the last one arrived; 0 when none

  friend bool operator==(const XidState&, const XidState&) = default;
};

// A process using a GPU (nvmlDeviceGetComputeRunningProcesses / ...GetGraphicsRunningProcesses).
struct GpuProcess {
  unsigned pid = 0;
  bool graphics = false;  // from the graphics list (else compute)
  // NVML_VALUE_NOT_AVAILABLE (Windows WDDM, where the OS owns GPU memory) gives nullopt.
  std::optional<std::uint64_t> used_memory_bytes;

  friend bool operator==(const GpuProcess&, const GpuProcess&) = default;
};

// One physical GPU as NVML reports it. A GPU that answered NVML_ERROR_GPU_IS_LOST has `lost` set
// and only what was read before that.
struct GpuDevice {
  unsigned index = 0;
  bool lost = false;
  std::optional<NvmlIssue> handle_error;  // nvmlDeviceGetHandleByIndex failed: nothing else is set

  std::string name;
  std::string uuid;
  std::string serial;
  std::string pci_bus_id;            // "00000000:3B:00.0"
  std::uint32_t pci_device_id = 0;   // (device << 16) | vendor, e.g. 0x20B210DE
  Reading<int> architecture;         // nvmlDeviceArchitecture_t
  Reading<int> cc_major;
  Reading<int> cc_minor;
  std::string vbios_version;
  Reading<bool> inforom_valid;

  Reading<MemoryState> memory;
  Reading<EccState> ecc;
  Reading<RetiredPages> retired_pages;
  Reading<RemappedRows> remapped_rows;
  Reading<PcieLink> pcie;
  Reading<unsigned> pcie_replay_counter;
  Reading<bool> persistence_mode;
  Reading<int> compute_mode;           // nvmlComputeMode_t
  Reading<DriverModelState> driver_model;  // Windows only
  Reading<MigState> mig;
  Reading<std::vector<MigDevice>> mig_devices;  // attempted only with MIG mode current
  Reading<VirtualizationMode> virtualization;
  Reading<VgpuLicense> vgpu_license;
  Reading<std::uint64_t> clocks_event_reasons;
  Reading<Temperatures> temperature;
  Reading<Clocks> clocks;
  Reading<Power> power;
  Reading<Utilization> utilization;
  Reading<unsigned> performance_state;  // P0..P15; 32 = NVML_PSTATE_UNKNOWN
  Reading<unsigned> fan_percent;
  Reading<std::vector<GpuProcess>> processes;  // compute then graphics; a pid in both listed once
  Reading<std::uint64_t> total_energy_mj;      // nvmlDeviceGetTotalEnergyConsumption (Volta+)
  Reading<PcieThroughput> pcie_throughput;     // nvmlDeviceGetPcieThroughput (not in vGPU guests)
  Reading<unsigned> encoder_percent;           // nvmlDeviceGetEncoderUtilization
  Reading<unsigned> decoder_percent;           // nvmlDeviceGetDecoderUtilization
  Reading<unsigned> memory_temperature_c;      // field value NVML_FI_DEV_MEMORY_TEMP (HBM parts)
  Reading<NvlinkTraffic> nvlink_traffic;       // field values NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_*

  // Readings that need time or a listener, filled only by an NvmlSession (gpu/nvml_session.h);
  // collect_snapshot() leaves them unattempted.
  Reading<XidState> xid;                       // from the session's Xid event thread
  Reading<GpmActivity> gpm;                    // between the previous collection and this one
  // dcgm-exporter's DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL as DCGM computes it (DcgmCacheManager.cpp
  // ReadAndCacheNvLinkBandwidth): the TX+RX KiB delta since the previous collection per second, / 1000.
  Reading<double> nvlink_bandwidth;

  friend bool operator==(const GpuDevice&, const GpuDevice&) = default;
};

// The library load and init outcome plus every GPU. `available` is false when NVML could not be
// loaded or initialised; `error` then says why (code distinguishes "no driver" from "broken").
struct GpuSnapshot {
  bool available = false;
  std::string library_path;                 // what was loaded, e.g. "libnvidia-ml.so.1"
  std::optional<NvmlIssue> error;           // load or init failure (status 12 LIBRARY_NOT_FOUND etc.)
  std::vector<std::string> missing_symbols; // functions the library lacks (older drivers, broken installs)
  std::string driver_version;               // "535.104.05"
  std::string nvml_version;                 // "12.535.104.05"
  std::optional<int> cuda_driver_version;   // 12020 for 12.2 (nvmlSystemGetCudaDriverVersion_v2)
  std::optional<NvmlIssue> cuda_driver_error;  // _v2 returns LIBRARY_NOT_FOUND when libcuda is missing
  std::optional<NvmlIssue> count_error;
  std::vector<GpuDevice> devices;

  friend bool operator==(const GpuSnapshot&, const GpuSnapshot&) = default;
};

// Serialisation for reports (`doctor --json`, `doctor --from`). from_json is lenient about
// missing fields (older reports) but rejects wrong types with a parse_error naming the field.
[[nodiscard]] json::Value to_json(const GpuSnapshot& snapshot);
[[nodiscard]] Result<GpuSnapshot> snapshot_from_json(const json::Value& value);

}  // namespace gpuhost::gpu
