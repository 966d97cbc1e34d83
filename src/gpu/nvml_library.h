#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/nvml_types.h"
#include "gpu/snapshot.h"
#include "platform/shared_library.h"
#include "platform/system_info.h"

namespace gpuhost::gpu {

// Names a test or an unusual install can point at one NVML library file. When set (and not
// empty) it is the only candidate: a wrong path is reported, never silently replaced by the
// system's library.
inline constexpr const char* k_nvml_library_env = "GPUHOST_NVML_LIBRARY";

// The NVML functions gpuhost calls, as resolved from the loaded library. A null pointer means the
// library exports none of the names in that function's fallback chain (newest name first, listed
// next to each member); calls through it are reported as NVML_ERROR_FUNCTION_NOT_FOUND.
struct NvmlFunctions {
  nvml::nvmlInit_fn init = nullptr;          // nvmlInit_v2, nvmlInit (required)
  nvml::nvmlShutdown_fn shutdown = nullptr;  // nvmlShutdown (required)
  nvml::nvmlErrorString_fn error_string = nullptr;
  nvml::nvmlSystemGetString_fn system_get_driver_version = nullptr;
  nvml::nvmlSystemGetString_fn system_get_nvml_version = nullptr;
  nvml::nvmlSystemGetCudaDriverVersion_fn system_get_cuda_driver_version = nullptr;  // _v2, plain
  nvml::nvmlDeviceGetCount_fn device_get_count = nullptr;                            // _v2, plain
  nvml::nvmlDeviceGetHandleByIndex_fn device_get_handle_by_index = nullptr;          // _v2, plain

  nvml::nvmlDeviceGetString_fn device_get_name = nullptr;
  nvml::nvmlDeviceGetString_fn device_get_uuid = nullptr;
  nvml::nvmlDeviceGetString_fn device_get_serial = nullptr;
  nvml::nvmlDeviceGetString_fn device_get_vbios_version = nullptr;
  nvml::nvmlDeviceGetPciInfo_fn device_get_pci_info = nullptr;  // _v3, _v2, plain
  int pci_info_version = 0;  // 3, 2 or 1 (plain: only busIdLegacy is filled); 0 when absent
  nvml::nvmlDeviceGetArchitecture_fn device_get_architecture = nullptr;
  nvml::nvmlDeviceGetCudaComputeCapability_fn device_get_cuda_compute_capability = nullptr;
  nvml::nvmlDeviceValidateInforom_fn device_validate_inforom = nullptr;

  // Both are resolved: v1 is the run-time fallback when v2 rejects the struct version.
  nvml::nvmlDeviceGetMemoryInfo_v2_fn device_get_memory_info_v2 = nullptr;
  nvml::nvmlDeviceGetMemoryInfo_fn device_get_memory_info = nullptr;

  nvml::nvmlDeviceGetEnableStatePair_fn device_get_ecc_mode = nullptr;
  nvml::nvmlDeviceGetTotalEccErrors_fn device_get_total_ecc_errors = nullptr;
  nvml::nvmlDeviceGetRetiredPages_fn device_get_retired_pages = nullptr;
  nvml::nvmlDeviceGetEnableState_fn device_get_retired_pages_pending_status = nullptr;
  nvml::nvmlDeviceGetRemappedRows_fn device_get_remapped_rows = nullptr;

  nvml::nvmlDeviceGetUint_fn device_get_curr_pcie_link_generation = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_curr_pcie_link_width = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_max_pcie_link_generation = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_max_pcie_link_width = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_gpu_max_pcie_link_generation = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_pcie_replay_counter = nullptr;

  nvml::nvmlDeviceGetEnableState_fn device_get_persistence_mode = nullptr;
  nvml::nvmlDeviceGetComputeMode_fn device_get_compute_mode = nullptr;
  nvml::nvmlDeviceGetDriverModel_fn device_get_driver_model = nullptr;  // _v2, plain
  nvml::nvmlDeviceGetMigMode_fn device_get_mig_mode = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_max_mig_device_count = nullptr;
  nvml::nvmlDeviceGetMigDeviceHandleByIndex_fn device_get_mig_device_handle_by_index = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_gpu_instance_id = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_compute_instance_id = nullptr;
  nvml::nvmlDeviceGetVirtualizationMode_fn device_get_virtualization_mode = nullptr;

  // MIG management (gpu/mig_manager.h): not counted in missing_symbols, since only `gpuhost mig`
  // needs them and it names the one it lacks.
  nvml::nvmlDeviceSetMigMode_fn device_set_mig_mode = nullptr;
  nvml::nvmlDeviceGetGpuInstanceProfileInfo_fn device_get_gpu_instance_profile_info = nullptr;
  nvml::nvmlDeviceGetGpuInstanceProfileInfoV_fn device_get_gpu_instance_profile_info_v = nullptr;
  nvml::nvmlDeviceCreateGpuInstance_fn device_create_gpu_instance = nullptr;
  nvml::nvmlDeviceGetGpuInstances_fn device_get_gpu_instances = nullptr;
  nvml::nvmlGpuInstanceGetInfo_fn gpu_instance_get_info = nullptr;
  nvml::nvmlGpuInstanceDestroy_fn gpu_instance_destroy = nullptr;
  nvml::nvmlGpuInstanceGetComputeInstanceProfileInfo_fn gpu_instance_get_compute_instance_profile_info = nullptr;
  nvml::nvmlGpuInstanceCreateComputeInstance_fn gpu_instance_create_compute_instance = nullptr;
  nvml::nvmlGpuInstanceGetComputeInstances_fn gpu_instance_get_compute_instances = nullptr;
  nvml::nvmlComputeInstanceDestroy_fn compute_instance_destroy = nullptr;

  // nvmlDeviceGetGridLicensableFeatures_v4, _v3, _v2, plain: each has its own struct layout, so
  // exactly one of these is set (the newest the library exports), named by the version.
  int grid_licensable_features_version = 0;  // 4..1; 0 when absent
  nvml::nvmlDeviceGetGridLicensableFeatures_v4_fn device_get_grid_licensable_features_v4 = nullptr;
  nvml::nvmlDeviceGetGridLicensableFeatures_v3_fn device_get_grid_licensable_features_v3 = nullptr;
  nvml::nvmlDeviceGetGridLicensableFeatures_v2_fn device_get_grid_licensable_features_v2 = nullptr;
  nvml::nvmlDeviceGetGridLicensableFeatures_v1_fn device_get_grid_licensable_features_v1 = nullptr;

  // nvmlDeviceGetCurrentClocksEventReasons, nvmlDeviceGetCurrentClocksThrottleReasons (its
  // deprecated name, same bits).
  nvml::nvmlDeviceGetClocksEventReasons_fn device_get_current_clocks_event_reasons = nullptr;
  nvml::nvmlDeviceGetTemperature_fn device_get_temperature = nullptr;
  nvml::nvmlDeviceGetTemperatureThreshold_fn device_get_temperature_threshold = nullptr;
  nvml::nvmlDeviceGetClock_fn device_get_clock_info = nullptr;
  nvml::nvmlDeviceGetClock_fn device_get_max_clock_info = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_power_usage = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_enforced_power_limit = nullptr;
  nvml::nvmlDeviceGetUtilizationRates_fn device_get_utilization_rates = nullptr;
  nvml::nvmlDeviceGetPerformanceState_fn device_get_performance_state = nullptr;
  nvml::nvmlDeviceGetUint_fn device_get_fan_speed = nullptr;
  nvml::nvmlDeviceGetTotalEnergyConsumption_fn device_get_total_energy_consumption = nullptr;
  nvml::nvmlDeviceGetPcieThroughput_fn device_get_pcie_throughput = nullptr;
  nvml::nvmlDeviceGetCodecUtilization_fn device_get_encoder_utilization = nullptr;
  nvml::nvmlDeviceGetCodecUtilization_fn device_get_decoder_utilization = nullptr;
  nvml::nvmlDeviceGetFieldValues_fn device_get_field_values = nullptr;

  // nvmlDeviceGet{Compute,Graphics}RunningProcesses_v3, _v2 (nvmlProcessInfo_v2_t), plain
  // (nvmlProcessInfo_v1_t): exactly one pointer of each pair is set, the newest exported.
  nvml::nvmlDeviceGetRunningProcesses_v2_fn device_get_compute_running_processes_v2 = nullptr;
  nvml::nvmlDeviceGetRunningProcesses_v1_fn device_get_compute_running_processes_v1 = nullptr;
  nvml::nvmlDeviceGetRunningProcesses_v2_fn device_get_graphics_running_processes_v2 = nullptr;
  nvml::nvmlDeviceGetRunningProcesses_v1_fn device_get_graphics_running_processes_v1 = nullptr;

  // Xid events (gpu/xid_watcher.h).
  nvml::nvmlEventSetCreate_fn event_set_create = nullptr;
  nvml::nvmlDeviceRegisterEvents_fn device_register_events = nullptr;
  nvml::nvmlEventSetWait_fn event_set_wait = nullptr;  // _v2, plain
  nvml::nvmlEventSetFree_fn event_set_free = nullptr;

  // GPU Performance Monitoring (Hopper+; gpu/nvml_session.h).
  nvml::nvmlGpmQueryDeviceSupport_fn gpm_query_device_support = nullptr;
  nvml::nvmlGpmSampleAlloc_fn gpm_sample_alloc = nullptr;
  nvml::nvmlGpmSampleFree_fn gpm_sample_free = nullptr;
  nvml::nvmlGpmSampleGet_fn gpm_sample_get = nullptr;
  nvml::nvmlGpmMigSampleGet_fn gpm_mig_sample_get = nullptr;
  nvml::nvmlGpmMetricsGet_fn gpm_metrics_get = nullptr;
};

// The NVML library, loaded at run time (never linked), with its function table, initialised for
// the lifetime of this object: the destructor calls nvmlShutdown when nvmlInit succeeded (NVML
// counts init/shutdown pairs, so several objects may coexist).
//
// A host without a driver is a normal outcome, not an error: open() always returns an object and
// error() says why it is unusable (status 12 when no library could be loaded; the library's own
// status when nvmlInit failed, e.g. 9 driver not loaded, 18 library/driver version mismatch).
//
// Move-only. After open() the object is immutable, so its const members may be used from several
// threads at once (NVML itself is thread-safe).
class NvmlLibrary {
 public:
  // Tries nvml_library_candidates() in order.
  [[nodiscard]] static NvmlLibrary open();
  // Tries each path or bare name in order; the first that loads and exports nvmlInit(_v2) and
  // nvmlShutdown is used and initialised.
  [[nodiscard]] static NvmlLibrary open(const std::vector<std::string>& candidates);

  NvmlLibrary(NvmlLibrary&& other) noexcept;
  NvmlLibrary& operator=(NvmlLibrary&& other) noexcept;
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;
  ~NvmlLibrary();

  // A library is loaded and exports the required functions (nvmlInit(_v2), nvmlShutdown).
  [[nodiscard]] bool loaded() const { return m_library.is_open(); }
  // nvmlInit succeeded: the device functions may be called.
  [[nodiscard]] bool initialized() const { return m_initialized; }
  // Why the library is unusable; empty when initialized().
  [[nodiscard]] const std::optional<NvmlIssue>& error() const { return m_error; }
  // The candidate that was loaded ("libnvidia-ml.so.1", "C:\Windows\System32\nvml.dll"); when
  // none was usable, the last one that loaded but lacked the required functions, else empty.
  [[nodiscard]] const std::string& path() const { return m_path; }
  // The first name of each fallback chain the library does not export, in NvmlFunctions order.
  [[nodiscard]] const std::vector<std::string>& missing_symbols() const { return m_missing; }
  // REQUIRES: loaded() for any pointer to be set.
  [[nodiscard]] const NvmlFunctions& functions() const { return m_functions; }

  // The issue for a failed call's status, with the library's nvmlErrorString text where it adds
  // something (see make_nvml_issue).
  [[nodiscard]] NvmlIssue issue(int status) const;

 private:
  NvmlLibrary() = default;
  void resolve();
  void initialize();

  platform::SharedLibrary m_library;
  std::string m_path;
  NvmlFunctions m_functions;
  std::vector<std::string> m_missing;
  std::optional<NvmlIssue> m_error;
  bool m_initialized = false;
};

// Where NVML is looked for, in order: $GPUHOST_NVML_LIBRARY alone when set; otherwise on Linux
// the driver's soname "libnvidia-ml.so.1" (what DCGM and nvidia-ml-py dlopen; the unversioned .so
// comes from development packages only); on Windows %SystemRoot%\System32\nvml.dll (DCH drivers)
// then %ProgramFiles%\NVIDIA Corporation\NVSMI\nvml.dll (older drivers) — the order of NVIDIA's
// nvidia-ml-py loader (mirrored in repo NVIDIA/DCGM testing/python3/dcgm_nvml.py).
[[nodiscard]] std::vector<std::string> nvml_library_candidates();

// The same, for a given OS and environment (pure; for tests).
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
[[nodiscard]] std::vector<std::string> nvml_library_candidates(platform::OsFamily os, const EnvLookup& env);

}  // namespace gpuhost::gpu
