#include "gpu/nvml_library.h"

#include <initializer_list>
#include <utility>

#include "base/strings.h"
#include "gpu/nvml_errors.h"
#include "platform/environment.h"

namespace gpuhost::gpu {
namespace {

using namespace nvml;

// Resolves the first exported name of `names` into `out`; returns its position in the list, or
// -1 (recording names[0] as missing) when none is exported.
template <typename Fn>
int resolve_one(const platform::SharedLibrary& library, Fn& out, std::initializer_list<const char*> names,
                std::vector<std::string>& missing) {
  int position = 0;
  for (const char* name : names) {
    if (void* address = library.symbol(name)) {
      // POSIX and Win32 both guarantee that a data pointer from dlsym/GetProcAddress converts to
      // the function pointer it names.
      out = reinterpret_cast<Fn>(address);
      return position;
    }
    ++position;
  }
  out = nullptr;
  missing.emplace_back(*names.begin());
  return -1;
}

// `base`_v3 or `base`_v2 into `newer` (same nvmlProcessInfo_v2_t layout), else plain `base` into
// `older`; records `base`_v3 as missing when none is exported.
template <typename NewFn, typename OldFn>
void resolve_versioned_pair(const platform::SharedLibrary& library, NewFn& newer, OldFn& older,
                            const std::string& base, std::vector<std::string>& missing) {
  const std::string v3 = base + "_v3", v2 = base + "_v2";
  std::vector<std::string> unused;
  older = nullptr;
  if (resolve_one(library, newer, {v3.c_str(), v2.c_str()}, unused) >= 0) return;
  if (resolve_one(library, older, {base.c_str()}, unused) >= 0) return;
  missing.push_back(v3);
}

std::string join_path(std::string_view dir, std::string_view rest) {
  std::string path(dir);
  if (!path.empty() && path.back() != '\\' && path.back() != '/') path += '\\';
  path += rest;
  return path;
}

}  // namespace

std::vector<std::string> nvml_library_candidates(platform::OsFamily os, const EnvLookup& env) {
  if (auto explicit_path = env(k_nvml_library_env); explicit_path && !explicit_path->empty())
    return {*explicit_path};
  if (os == platform::OsFamily::linux) return {"libnvidia-ml.so.1"};
  auto system_root = env("SystemRoot");
  auto program_files = env("ProgramFiles");
  return {
      join_path(system_root && !system_root->empty() ? *system_root : "C:\\Windows", "System32\\nvml.dll"),
      join_path(program_files && !program_files->empty() ? *program_files : "C:\\Program Files",
                "NVIDIA Corporation\\NVSMI\\nvml.dll"),
  };
}

std::vector<std::string> nvml_library_candidates() {
  return nvml_library_candidates(platform::current_os(),
                                 [](std::string_view name) { return platform::get_env(name); });
}

NvmlLibrary NvmlLibrary::open() {
  return open(nvml_library_candidates());
}

NvmlLibrary NvmlLibrary::open(const std::vector<std::string>& candidates) {
  NvmlLibrary nvml;
  std::vector<std::string> failures;
  bool found_unusable = false;
  for (const auto& candidate : candidates) {
    auto library = platform::SharedLibrary::open(candidate);
    if (!library) {
      failures.push_back(library.error().message);
      continue;
    }
    NvmlLibrary attempt;
    attempt.m_library = std::move(*library);
    attempt.m_path = candidate;
    attempt.resolve();
    if (!attempt.m_functions.init || !attempt.m_functions.shutdown) {
      // Keep what this library lacks for the report; the library itself is unloaded.
      found_unusable = true;
      failures.push_back(candidate + " does not export nvmlInit and nvmlShutdown");
      nvml.m_path = candidate;
      nvml.m_missing = std::move(attempt.m_missing);
      continue;
    }
    attempt.initialize();
    return attempt;
  }
  int status = found_unusable ? NVML_ERROR_FUNCTION_NOT_FOUND : NVML_ERROR_LIBRARY_NOT_FOUND;
  NvmlIssue issue = make_nvml_issue(status);
  if (!failures.empty()) issue.message += " Tried: " + join(failures, "; ") + ".";
  nvml.m_error = std::move(issue);
  return nvml;
}

void NvmlLibrary::resolve() {
  auto& f = m_functions;
  auto& lib = m_library;
  auto& miss = m_missing;
  resolve_one(lib, f.init, {"nvmlInit_v2", "nvmlInit"}, miss);
  resolve_one(lib, f.shutdown, {"nvmlShutdown"}, miss);
  resolve_one(lib, f.error_string, {"nvmlErrorString"}, miss);
  resolve_one(lib, f.system_get_driver_version, {"nvmlSystemGetDriverVersion"}, miss);
  resolve_one(lib, f.system_get_nvml_version, {"nvmlSystemGetNVMLVersion"}, miss);
  resolve_one(lib, f.system_get_cuda_driver_version,
              {"nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"}, miss);
  resolve_one(lib, f.device_get_count, {"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, miss);
  resolve_one(lib, f.device_get_handle_by_index,
              {"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"}, miss);
  resolve_one(lib, f.device_get_name, {"nvmlDeviceGetName"}, miss);
  resolve_one(lib, f.device_get_uuid, {"nvmlDeviceGetUUID"}, miss);
  resolve_one(lib, f.device_get_serial, {"nvmlDeviceGetSerial"}, miss);
  resolve_one(lib, f.device_get_vbios_version, {"nvmlDeviceGetVbiosVersion"}, miss);
  int pci = resolve_one(lib, f.device_get_pci_info,
                        {"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo_v2", "nvmlDeviceGetPciInfo"}, miss);
  f.pci_info_version = pci < 0 ? 0 : 3 - pci;
  resolve_one(lib, f.device_get_architecture, {"nvmlDeviceGetArchitecture"}, miss);
  resolve_one(lib, f.device_get_cuda_compute_capability, {"nvmlDeviceGetCudaComputeCapability"}, miss);
  resolve_one(lib, f.device_validate_inforom, {"nvmlDeviceValidateInforom"}, miss);

  std::vector<std::string> memory_missing;
  resolve_one(lib, f.device_get_memory_info_v2, {"nvmlDeviceGetMemoryInfo_v2"}, memory_missing);
  resolve_one(lib, f.device_get_memory_info, {"nvmlDeviceGetMemoryInfo"}, memory_missing);
  if (memory_missing.size() == 2) miss.push_back(memory_missing.front());

  resolve_one(lib, f.device_get_ecc_mode, {"nvmlDeviceGetEccMode"}, miss);
  resolve_one(lib, f.device_get_total_ecc_errors, {"nvmlDeviceGetTotalEccErrors"}, miss);
  resolve_one(lib, f.device_get_retired_pages, {"nvmlDeviceGetRetiredPages"}, miss);
  resolve_one(lib, f.device_get_retired_pages_pending_status, {"nvmlDeviceGetRetiredPagesPendingStatus"},
              miss);
  resolve_one(lib, f.device_get_remapped_rows, {"nvmlDeviceGetRemappedRows"}, miss);
  resolve_one(lib, f.device_get_curr_pcie_link_generation, {"nvmlDeviceGetCurrPcieLinkGeneration"}, miss);
  resolve_one(lib, f.device_get_curr_pcie_link_width, {"nvmlDeviceGetCurrPcieLinkWidth"}, miss);
  resolve_one(lib, f.device_get_max_pcie_link_generation, {"nvmlDeviceGetMaxPcieLinkGeneration"}, miss);
  resolve_one(lib, f.device_get_max_pcie_link_width, {"nvmlDeviceGetMaxPcieLinkWidth"}, miss);
  resolve_one(lib, f.device_get_gpu_max_pcie_link_generation, {"nvmlDeviceGetGpuMaxPcieLinkGeneration"},
              miss);
  resolve_one(lib, f.device_get_pcie_replay_counter, {"nvmlDeviceGetPcieReplayCounter"}, miss);
  resolve_one(lib, f.device_get_persistence_mode, {"nvmlDeviceGetPersistenceMode"}, miss);
  resolve_one(lib, f.device_get_compute_mode, {"nvmlDeviceGetComputeMode"}, miss);
  resolve_one(lib, f.device_get_driver_model, {"nvmlDeviceGetDriverModel_v2", "nvmlDeviceGetDriverModel"},
              miss);
  resolve_one(lib, f.device_get_mig_mode, {"nvmlDeviceGetMigMode"}, miss);
  resolve_one(lib, f.device_get_max_mig_device_count, {"nvmlDeviceGetMaxMigDeviceCount"}, miss);
  resolve_one(lib, f.device_get_mig_device_handle_by_index, {"nvmlDeviceGetMigDeviceHandleByIndex"}, miss);
  resolve_one(lib, f.device_get_gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"}, miss);
  resolve_one(lib, f.device_get_compute_instance_id, {"nvmlDeviceGetComputeInstanceId"}, miss);
  resolve_one(lib, f.device_get_virtualization_mode, {"nvmlDeviceGetVirtualizationMode"}, miss);

  std::vector<std::string> management;  // optional: gpu/mig_manager.h names what it lacks
  resolve_one(lib, f.device_set_mig_mode, {"nvmlDeviceSetMigMode"}, management);
  resolve_one(lib, f.device_get_gpu_instance_profile_info, {"nvmlDeviceGetGpuInstanceProfileInfo"}, management);
  resolve_one(lib, f.device_get_gpu_instance_profile_info_v, {"nvmlDeviceGetGpuInstanceProfileInfoV"}, management);
  resolve_one(lib, f.device_create_gpu_instance, {"nvmlDeviceCreateGpuInstance"}, management);
  resolve_one(lib, f.device_get_gpu_instances, {"nvmlDeviceGetGpuInstances"}, management);
  resolve_one(lib, f.gpu_instance_get_info, {"nvmlGpuInstanceGetInfo"}, management);
  resolve_one(lib, f.gpu_instance_destroy, {"nvmlGpuInstanceDestroy"}, management);
  resolve_one(lib, f.gpu_instance_get_compute_instance_profile_info,
              {"nvmlGpuInstanceGetComputeInstanceProfileInfo"}, management);
  resolve_one(lib, f.gpu_instance_create_compute_instance, {"nvmlGpuInstanceCreateComputeInstance"}, management);
  resolve_one(lib, f.gpu_instance_get_compute_instances, {"nvmlGpuInstanceGetComputeInstances"}, management);
  resolve_one(lib, f.compute_instance_destroy, {"nvmlComputeInstanceDestroy"}, management);

  std::vector<std::string> grid_missing;
  if (resolve_one(lib, f.device_get_grid_licensable_features_v4, {"nvmlDeviceGetGridLicensableFeatures_v4"},
                  grid_missing) == 0)
    f.grid_licensable_features_version = 4;
  else if (resolve_one(lib, f.device_get_grid_licensable_features_v3,
                       {"nvmlDeviceGetGridLicensableFeatures_v3"}, grid_missing) == 0)
    f.grid_licensable_features_version = 3;
  else if (resolve_one(lib, f.device_get_grid_licensable_features_v2,
                       {"nvmlDeviceGetGridLicensableFeatures_v2"}, grid_missing) == 0)
    f.grid_licensable_features_version = 2;
  else if (resolve_one(lib, f.device_get_grid_licensable_features_v1, {"nvmlDeviceGetGridLicensableFeatures"},
                       grid_missing) == 0)
    f.grid_licensable_features_version = 1;
  else
    miss.push_back(grid_missing.front());

  resolve_one(lib, f.device_get_current_clocks_event_reasons,
              {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"}, miss);
  resolve_one(lib, f.device_get_temperature, {"nvmlDeviceGetTemperature"}, miss);
  resolve_one(lib, f.device_get_temperature_threshold, {"nvmlDeviceGetTemperatureThreshold"}, miss);
  resolve_one(lib, f.device_get_clock_info, {"nvmlDeviceGetClockInfo"}, miss);
  resolve_one(lib, f.device_get_max_clock_info, {"nvmlDeviceGetMaxClockInfo"}, miss);
  resolve_one(lib, f.device_get_power_usage, {"nvmlDeviceGetPowerUsage"}, miss);
  resolve_one(lib, f.device_get_enforced_power_limit, {"nvmlDeviceGetEnforcedPowerLimit"}, miss);
  resolve_one(lib, f.device_get_utilization_rates, {"nvmlDeviceGetUtilizationRates"}, miss);
  resolve_one(lib, f.device_get_performance_state, {"nvmlDeviceGetPerformanceState"}, miss);
  resolve_one(lib, f.device_get_fan_speed, {"nvmlDeviceGetFanSpeed"}, miss);
  resolve_one(lib, f.device_get_total_energy_consumption, {"nvmlDeviceGetTotalEnergyConsumption"}, miss);
  resolve_one(lib, f.device_get_pcie_throughput, {"nvmlDeviceGetPcieThroughput"}, miss);
  resolve_one(lib, f.device_get_encoder_utilization, {"nvmlDeviceGetEncoderUtilization"}, miss);
  resolve_one(lib, f.device_get_decoder_utilization, {"nvmlDeviceGetDecoderUtilization"}, miss);
  resolve_one(lib, f.device_get_field_values, {"nvmlDeviceGetFieldValues"}, miss);
  resolve_versioned_pair(lib, f.device_get_compute_running_processes_v2,
                         f.device_get_compute_running_processes_v1, "nvmlDeviceGetComputeRunningProcesses",
                         miss);
  resolve_versioned_pair(lib, f.device_get_graphics_running_processes_v2,
                         f.device_get_graphics_running_processes_v1, "nvmlDeviceGetGraphicsRunningProcesses",
                         miss);
  resolve_one(lib, f.event_set_create, {"nvmlEventSetCreate"}, miss);
  resolve_one(lib, f.device_register_events, {"nvmlDeviceRegisterEvents"}, miss);
  resolve_one(lib, f.event_set_wait, {"nvmlEventSetWait_v2", "nvmlEventSetWait"}, miss);
  resolve_one(lib, f.event_set_free, {"nvmlEventSetFree"}, miss);
  resolve_one(lib, f.gpm_query_device_support, {"nvmlGpmQueryDeviceSupport"}, miss);
  resolve_one(lib, f.gpm_sample_alloc, {"nvmlGpmSampleAlloc"}, miss);
  resolve_one(lib, f.gpm_sample_free, {"nvmlGpmSampleFree"}, miss);
  resolve_one(lib, f.gpm_sample_get, {"nvmlGpmSampleGet"}, miss);
  resolve_one(lib, f.gpm_mig_sample_get, {"nvmlGpmMigSampleGet"}, miss);
  resolve_one(lib, f.gpm_metrics_get, {"nvmlGpmMetricsGet"}, miss);
}

void NvmlLibrary::initialize() {
  nvmlReturn_t status = m_functions.init();
  if (status == NVML_SUCCESS) {
    m_initialized = true;
    return;
  }
  m_error = issue(status);
}

NvmlIssue NvmlLibrary::issue(int status) const {
  const char* text = nullptr;
  if (m_functions.error_string) text = m_functions.error_string(static_cast<nvmlReturn_t>(status));
  return make_nvml_issue(status, text ? std::string_view(text) : std::string_view());
}

NvmlLibrary::NvmlLibrary(NvmlLibrary&& other) noexcept
    : m_library(std::move(other.m_library)),
      m_path(std::move(other.m_path)),
      m_functions(std::exchange(other.m_functions, {})),
      m_missing(std::move(other.m_missing)),
      m_error(std::move(other.m_error)),
      m_initialized(std::exchange(other.m_initialized, false)) {}

NvmlLibrary& NvmlLibrary::operator=(NvmlLibrary&& other) noexcept {
  if (this != &other) {
    if (m_initialized) m_functions.shutdown();
    m_library = std::move(other.m_library);
    m_path = std::move(other.m_path);
    m_functions = std::exchange(other.m_functions, {});
    m_missing = std::move(other.m_missing);
    m_error = std::move(other.m_error);
    m_initialized = std::exchange(other.m_initialized, false);
  }
  return *this;
}

NvmlLibrary::~NvmlLibrary() {
  // Shut down before m_library unloads the code.
  if (m_initialized) m_functions.shutdown();
}

}  // namespace gpuhost::gpu
