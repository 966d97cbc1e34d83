#include "gpu/collector.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

#include "gpu/mig_devices.h"
#include "gpu/nvml_errors.h"

namespace gpuhost::gpu {
namespace {

using namespace nvml;

// More GPUs than any host has; a count above it comes from a broken library and would otherwise
// make us loop for a very long time.
constexpr unsigned k_max_devices = 256;

// GPUs are read on up to this many threads: nvmlDeviceGetPcieThroughput alone samples for 2 x 20 ms
// per GPU (nvml.h), so eight GPUs read one after another would take a third of a second.
constexpr unsigned k_max_reader_threads = 8;

// Seconds since the epoch for a licence expiry NVML reports as calendar fields (nvidia-smi prints
// them as GMT); 0 when the fields do not form a date.
std::int64_t expiry_to_unix(const nvmlGridLicenseExpiry_t& e) {
  using namespace std::chrono;
  year_month_day date{year{static_cast<int>(e.year)}, month{e.month}, day{e.day}};
  if (!date.ok() || e.hour > 23 || e.min > 59 || e.sec > 60) return 0;
  auto t = sys_days{date} + hours{e.hour} + minutes{e.min} + seconds{e.sec};
  return duration_cast<seconds>(t.time_since_epoch()).count();
}

const char* feature_code_name(int code) {
  // nvml.h nvmlGridLicenseFeatureCode_t comments.
  switch (code) {
    case NVML_GRID_LICENSE_FEATURE_CODE_VGPU: return "Virtual GPU";
    case NVML_GRID_LICENSE_FEATURE_CODE_NVIDIA_RTX: return "NVIDIA RTX";
    case NVML_GRID_LICENSE_FEATURE_CODE_GAMING: return "Gaming";
    case NVML_GRID_LICENSE_FEATURE_CODE_COMPUTE: return "Compute";
    default: return "unknown";
  }
}

// Fixed-size char arrays from a library are not trusted to be terminated.
template <std::size_t N>
std::string bounded_string(const char (&text)[N]) {
  return std::string(text, std::find(text, text + N, '\0'));
}

// Folds any layout of nvmlGridLicensableFeatures into VgpuLicense. The feature that matters is the
// enabled one (v3+ say which; older layouts list only relevant features); it is licensed when
// NVML reports a non-zero featureState for it.
template <typename Features>
VgpuLicense to_vgpu_license(const Features& features) {
  VgpuLicense license;
  license.licensing_supported = features.isGridLicenseSupported != 0;
  if (!license.licensing_supported) {
    license.state = "not supported";
    return license;
  }
  unsigned count = std::min(features.licensableFeaturesCount, NVML_GRID_LICENSE_FEATURE_MAX_COUNT);
  using Feature = std::remove_cvref_t<decltype(features.gridLicensableFeatures[0])>;
  const Feature* licensed = nullptr;
  const Feature* first_enabled = nullptr;
  for (unsigned i = 0; i < count && !licensed; ++i) {
    const Feature& f = features.gridLicensableFeatures[i];
    bool enabled = true;
    if constexpr (requires { f.featureEnabled; }) enabled = f.featureEnabled != 0;
    if (!enabled) continue;
    if (!first_enabled) first_enabled = &f;
    if (f.featureState != 0) licensed = &f;
  }
  const Feature* chosen = licensed ? licensed : first_enabled;
  if (!chosen && count > 0) chosen = &features.gridLicensableFeatures[0];
  license.licensed = licensed != nullptr;
  license.state = license.licensed ? "licensed" : "unlicensed";
  if (!chosen) return license;
  if constexpr (requires { chosen->productName; }) license.feature = bounded_string(chosen->productName);
  if (license.feature.empty()) license.feature = feature_code_name(chosen->featureCode);
  if constexpr (requires { chosen->licenseExpiry; }) {
    if (chosen->licenseExpiry.status == NVML_GRID_LICENSE_EXPIRY_VALID)
      license.expiry_unix = expiry_to_unix(chosen->licenseExpiry);
  }
  return license;
}

// Queries one device. Every call goes through call(), which stops querying once the GPU is lost.
class DeviceReader {
 public:
  DeviceReader(const NvmlLibrary& nvml, nvmlDevice_t handle, GpuDevice& device)
      : m_nvml(nvml), m_f(nvml.functions()), m_handle(handle), m_device(device) {}

  void read_all() {
    read_identity();
    read_memory();
    read_ecc();
    read_retired_pages();
    read_remapped_rows();
    read_pcie();
    read_modes();
    read_mig_devices();
    read_vgpu_license();
    read_thermal_and_clocks();
    read_activity();
    read_field_values();
    read_processes();
  }

 private:
  // NVML_ERROR_FUNCTION_NOT_FOUND for a function the library lacks; NVML_ERROR_GPU_IS_LOST
  // without calling once the GPU is lost.
  template <typename Fn, typename... Args>
  nvmlReturn_t call(Fn fn, Args... args) {
    if (m_device.lost) return NVML_ERROR_GPU_IS_LOST;
    if (!fn) return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t status = fn(m_handle, args...);
    if (status == NVML_ERROR_GPU_IS_LOST) m_device.lost = true;
    return status;
  }

  // Stores `value` when the reading's main call succeeded and the GPU was not lost while its
  // secondary calls ran; otherwise the reason.
  template <typename T>
  void set(Reading<T>& reading, nvmlReturn_t status, T value) {
    if (m_device.lost) status = NVML_ERROR_GPU_IS_LOST;
    if (status == NVML_SUCCESS)
      reading.value = std::move(value);
    else
      reading.issue = m_nvml.issue(status);
  }

  std::string read_string(nvmlDeviceGetString_fn fn, unsigned int size) {
    std::vector<char> buffer(size + 1, '\0');  // the extra byte stays 0 whatever the library writes
    if (call(fn, buffer.data(), size) != NVML_SUCCESS) return {};
    return std::string(buffer.data());
  }

  unsigned read_uint_or_zero(nvmlDeviceGetUint_fn fn) {
    unsigned value = 0;
    return call(fn, &value) == NVML_SUCCESS ? value : 0;
  }

  void read_identity() {
    m_device.name = read_string(m_f.device_get_name, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
    m_device.uuid = read_string(m_f.device_get_uuid, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
    m_device.serial = read_string(m_f.device_get_serial, NVML_DEVICE_SERIAL_BUFFER_SIZE);

    nvmlPciInfo_t pci{};
    if (call(m_f.device_get_pci_info, &pci) == NVML_SUCCESS) {
      m_device.pci_device_id = pci.pciDeviceId;
      // Only _v2 and _v3 fill busId; build NVML's own format (NVML_DEVICE_PCI_BUS_ID_FMT) otherwise.
      std::string bus_id = m_f.pci_info_version >= 2 ? bounded_string(pci.busId) : std::string();
      if (bus_id.empty()) {
        char text[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
        std::snprintf(text, sizeof text, "%08X:%02X:%02X.0", pci.domain, pci.bus, pci.device);
        bus_id = text;
      }
      m_device.pci_bus_id = bus_id;
    }

    nvmlDeviceArchitecture_t arch = 0;
    nvmlReturn_t status = call(m_f.device_get_architecture, &arch);
    set(m_device.architecture, status, static_cast<int>(arch));

    int major = 0, minor = 0;
    status = call(m_f.device_get_cuda_compute_capability, &major, &minor);
    set(m_device.cc_major, status, major);
    set(m_device.cc_minor, status, minor);

    m_device.vbios_version = read_string(m_f.device_get_vbios_version, NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE);

    status = call(m_f.device_validate_inforom);
    if (status == NVML_ERROR_CORRUPTED_INFOROM)
      set(m_device.inforom_valid, NVML_SUCCESS, false);
    else
      set(m_device.inforom_valid, status, true);
  }

  void read_memory() {
    MemoryState memory;
    nvmlReturn_t status = m_device.lost ? NVML_ERROR_GPU_IS_LOST : read_memory_state(m_f, m_handle, memory);
    if (status == NVML_ERROR_GPU_IS_LOST) m_device.lost = true;
    set(m_device.memory, status, memory);
  }

  // The slices CUDA sees in MIG mode (gpu/mig_devices.h); not attempted otherwise.
  void read_mig_devices() {
    if (m_device.lost || !m_device.mig.value || !m_device.mig.value->current) return;
    std::vector<MigDevice> devices;
    const nvmlReturn_t status = gpu::read_mig_devices(m_f, m_handle, devices);
    if (status == NVML_ERROR_GPU_IS_LOST) m_device.lost = true;
    set(m_device.mig_devices, status, std::move(devices));
  }

  void read_ecc() {
    nvmlEnableState_t current = NVML_FEATURE_DISABLED, pending = NVML_FEATURE_DISABLED;
    nvmlReturn_t status = call(m_f.device_get_ecc_mode, &current, &pending);
    EccState ecc;
    if (status == NVML_SUCCESS) {
      ecc.enabled_current = current == NVML_FEATURE_ENABLED;
      ecc.enabled_pending = pending == NVML_FEATURE_ENABLED;
      // The counters answer NOT_SUPPORTED while ECC is off; they then stay 0.
      auto count = [&](nvmlMemoryErrorType_t type, nvmlEccCounterType_t counter) -> std::uint64_t {
        unsigned long long n = 0;
        return call(m_f.device_get_total_ecc_errors, type, counter, &n) == NVML_SUCCESS ? n : 0;
      };
      ecc.volatile_corrected = count(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC);
      ecc.volatile_uncorrected = count(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC);
      ecc.aggregate_corrected = count(NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC);
      ecc.aggregate_uncorrected = count(NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC);
    }
    set(m_device.ecc, status, ecc);
  }

  // The number of retired pages for one cause. A zero-sized first call returns the count with
  // SUCCESS (none) or INSUFFICIENT_SIZE (some), as DCGM reads it (repo NVIDIA/DCGM
  // dcgmlib/src/DcgmCacheManager.cpp); the addresses themselves are not needed. A one-element
  // buffer instead of NULL, since nvml.h lists a NULL `addresses` as INVALID_ARGUMENT.
  nvmlReturn_t retired_page_count(nvmlPageRetirementCause_t cause, unsigned& out) {
    unsigned count = 0;
    unsigned long long unused[1] = {};
    nvmlReturn_t status = call(m_f.device_get_retired_pages, cause, &count, unused);
    if (status != NVML_SUCCESS && status != NVML_ERROR_INSUFFICIENT_SIZE) return status;
    out = count;
    return NVML_SUCCESS;
  }

  void read_retired_pages() {
    RetiredPages pages;
    nvmlReturn_t status =
        retired_page_count(NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, pages.single_bit);
    if (status == NVML_SUCCESS) {
      (void)retired_page_count(NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, pages.double_bit);
      nvmlEnableState_t pending = NVML_FEATURE_DISABLED;
      if (call(m_f.device_get_retired_pages_pending_status, &pending) == NVML_SUCCESS)
        pages.pending = pending == NVML_FEATURE_ENABLED;
    }
    set(m_device.retired_pages, status, pages);
  }

  void read_remapped_rows() {
    unsigned correctable = 0, uncorrectable = 0, pending = 0, failure = 0;
    nvmlReturn_t status =
        call(m_f.device_get_remapped_rows, &correctable, &uncorrectable, &pending, &failure);
    set(m_device.remapped_rows, status, RemappedRows{correctable, uncorrectable, pending != 0, failure != 0});
  }

  void read_pcie() {
    PcieLink link;
    nvmlReturn_t status = call(m_f.device_get_curr_pcie_link_generation, &link.current_generation);
    if (status == NVML_SUCCESS) status = call(m_f.device_get_curr_pcie_link_width, &link.current_width);
    if (status == NVML_SUCCESS) {
      link.max_generation = read_uint_or_zero(m_f.device_get_max_pcie_link_generation);
      link.max_width = read_uint_or_zero(m_f.device_get_max_pcie_link_width);
      link.gpu_max_generation = read_uint_or_zero(m_f.device_get_gpu_max_pcie_link_generation);
    }
    set(m_device.pcie, status, link);

    unsigned replays = 0;
    status = call(m_f.device_get_pcie_replay_counter, &replays);
    set(m_device.pcie_replay_counter, status, replays);
  }

  void read_modes() {
    nvmlEnableState_t persistence = NVML_FEATURE_DISABLED;
    nvmlReturn_t status = call(m_f.device_get_persistence_mode, &persistence);
    set(m_device.persistence_mode, status, persistence == NVML_FEATURE_ENABLED);

    nvmlComputeMode_t compute = NVML_COMPUTEMODE_DEFAULT;
    status = call(m_f.device_get_compute_mode, &compute);
    set(m_device.compute_mode, status, static_cast<int>(compute));

    nvmlDriverModel_t current = NVML_DRIVER_WDDM, pending = NVML_DRIVER_WDDM;
    status = call(m_f.device_get_driver_model, &current, &pending);
    set(m_device.driver_model, status,
        DriverModelState{static_cast<DriverModel>(current), static_cast<DriverModel>(pending)});

    unsigned mig_current = 0, mig_pending = 0;
    status = call(m_f.device_get_mig_mode, &mig_current, &mig_pending);
    set(m_device.mig, status,
        MigState{mig_current == NVML_DEVICE_MIG_ENABLE, mig_pending == NVML_DEVICE_MIG_ENABLE});

    nvmlGpuVirtualizationMode_t virtualization = NVML_GPU_VIRTUALIZATION_MODE_NONE;
    status = call(m_f.device_get_virtualization_mode, &virtualization);
    set(m_device.virtualization, status, static_cast<VirtualizationMode>(virtualization));
  }

  template <typename Features, typename Fn>
  void read_license_layout(Fn fn) {
    Features features{};
    nvmlReturn_t status = call(fn, &features);
    set(m_device.vgpu_license, status, status == NVML_SUCCESS ? to_vgpu_license(features) : VgpuLicense{});
  }

  void read_vgpu_license() {
    switch (m_f.grid_licensable_features_version) {
      case 4:
        return read_license_layout<nvmlGridLicensableFeatures_v4_t>(
            m_f.device_get_grid_licensable_features_v4);
      case 3:
        return read_license_layout<nvmlGridLicensableFeatures_v3_t>(
            m_f.device_get_grid_licensable_features_v3);
      case 2:
        return read_license_layout<nvmlGridLicensableFeatures_v2_t>(
            m_f.device_get_grid_licensable_features_v2);
      case 1:
        return read_license_layout<nvmlGridLicensableFeatures_v1_t>(
            m_f.device_get_grid_licensable_features_v1);
      default:
        set(m_device.vgpu_license, m_device.lost ? NVML_ERROR_GPU_IS_LOST : NVML_ERROR_FUNCTION_NOT_FOUND,
            VgpuLicense{});
    }
  }

  void read_thermal_and_clocks() {
    unsigned long long reasons = 0;
    nvmlReturn_t status = call(m_f.device_get_current_clocks_event_reasons, &reasons);
    set(m_device.clocks_event_reasons, status, static_cast<std::uint64_t>(reasons));

    Temperatures temperature;
    status = call(m_f.device_get_temperature, NVML_TEMPERATURE_GPU, &temperature.current_c);
    if (status == NVML_SUCCESS) {
      auto threshold = [&](nvmlTemperatureThresholds_t which) -> std::optional<unsigned> {
        unsigned value = 0;
        if (call(m_f.device_get_temperature_threshold, which, &value) != NVML_SUCCESS) return std::nullopt;
        return value;
      };
      temperature.shutdown_c = threshold(NVML_TEMPERATURE_THRESHOLD_SHUTDOWN);
      temperature.slowdown_c = threshold(NVML_TEMPERATURE_THRESHOLD_SLOWDOWN);
      temperature.gpu_max_c = threshold(NVML_TEMPERATURE_THRESHOLD_GPU_MAX);
      temperature.memory_max_c = threshold(NVML_TEMPERATURE_THRESHOLD_MEM_MAX);
    }
    set(m_device.temperature, status, temperature);

    Clocks clocks;
    status = call(m_f.device_get_clock_info, NVML_CLOCK_SM, &clocks.sm_mhz);
    if (status == NVML_SUCCESS) {
      auto clock_or_zero = [&](nvmlDeviceGetClock_fn fn, nvmlClockType_t type) {
        unsigned mhz = 0;
        return call(fn, type, &mhz) == NVML_SUCCESS ? mhz : 0;
      };
      clocks.memory_mhz = clock_or_zero(m_f.device_get_clock_info, NVML_CLOCK_MEM);
      clocks.sm_max_mhz = clock_or_zero(m_f.device_get_max_clock_info, NVML_CLOCK_SM);
      clocks.memory_max_mhz = clock_or_zero(m_f.device_get_max_clock_info, NVML_CLOCK_MEM);
    }
    set(m_device.clocks, status, clocks);

    Power power;
    status = call(m_f.device_get_power_usage, &power.usage_mw);
    if (status == NVML_SUCCESS)
      power.enforced_limit_mw = read_uint_or_zero(m_f.device_get_enforced_power_limit);
    set(m_device.power, status, power);

    nvmlUtilization_t utilization{};
    status = call(m_f.device_get_utilization_rates, &utilization);
    set(m_device.utilization, status, Utilization{utilization.gpu, utilization.memory});

    nvmlPstates_t pstate = NVML_PSTATE_UNKNOWN;
    status = call(m_f.device_get_performance_state, &pstate);
    set(m_device.performance_state, status, static_cast<unsigned>(pstate));

    unsigned fan = 0;
    status = call(m_f.device_get_fan_speed, &fan);
    set(m_device.fan_percent, status, fan);
  }

  void read_activity() {
    unsigned long long energy = 0;
    nvmlReturn_t status = call(m_f.device_get_total_energy_consumption, &energy);
    set(m_device.total_energy_mj, status, static_cast<std::uint64_t>(energy));

    PcieThroughput pcie;
    status = call(m_f.device_get_pcie_throughput, NVML_PCIE_UTIL_TX_BYTES, &pcie.tx_kb_per_s);
    if (status == NVML_SUCCESS)
      status = call(m_f.device_get_pcie_throughput, NVML_PCIE_UTIL_RX_BYTES, &pcie.rx_kb_per_s);
    set(m_device.pcie_throughput, status, pcie);

    unsigned percent = 0, period_us = 0;
    status = call(m_f.device_get_encoder_utilization, &percent, &period_us);
    set(m_device.encoder_percent, status, percent);
    percent = 0;
    status = call(m_f.device_get_decoder_utilization, &percent, &period_us);
    set(m_device.decoder_percent, status, percent);
  }

  // One nvmlDeviceGetFieldValues call for every field-value reading; each field has its own status.
  void read_field_values() {
    nvmlFieldValue_t fields[3] = {};
    fields[0].fieldId = NVML_FI_DEV_MEMORY_TEMP;
    fields[1].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
    fields[1].scopeId = NVML_NVLINK_SCOPE_ALL_LINKS;
    fields[2].fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX;
    fields[2].scopeId = NVML_NVLINK_SCOPE_ALL_LINKS;
    nvmlReturn_t status = call(m_f.device_get_field_values, 3, fields);
    auto field_status = [&](const nvmlFieldValue_t& f) {
      return status == NVML_SUCCESS ? f.nvmlReturn : status;
    };

    // DCGM rejects readings above 200 C as garbage (DcgmCacheManager.cpp, DCGM_FI_DEV_MEMORY_TEMP_CELSIUS).
    nvmlReturn_t temp_status = field_status(fields[0]);
    unsigned temp = temp_status == NVML_SUCCESS ? field_as_uint(fields[0]) : 0;
    if (temp_status == NVML_SUCCESS && temp > 200) temp_status = NVML_ERROR_UNKNOWN;
    set(m_device.memory_temperature_c, temp_status, temp);

    nvmlReturn_t nvlink_status = field_status(fields[1]);
    if (nvlink_status == NVML_SUCCESS) nvlink_status = field_status(fields[2]);
    NvlinkTraffic traffic;
    if (nvlink_status == NVML_SUCCESS) {
      traffic.tx_kib = field_as_u64(fields[1]);
      traffic.rx_kib = field_as_u64(fields[2]);
      traffic.timestamp_us = std::max(fields[1].timestamp, fields[2].timestamp);
      if (traffic.timestamp_us == 0) {
        using namespace std::chrono;
        traffic.timestamp_us = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
      }
    }
    set(m_device.nvlink_traffic, nvlink_status, traffic);
  }

  static std::uint64_t field_as_u64(const nvmlFieldValue_t& f) {
    switch (f.valueType) {
      case NVML_VALUE_TYPE_DOUBLE: return f.value.dVal > 0 ? static_cast<std::uint64_t>(f.value.dVal) : 0;
      case NVML_VALUE_TYPE_UNSIGNED_INT: return f.value.uiVal;
      case NVML_VALUE_TYPE_UNSIGNED_LONG: return f.value.ulVal;
      case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        return f.value.sllVal > 0 ? static_cast<std::uint64_t>(f.value.sllVal) : 0;
      case NVML_VALUE_TYPE_SIGNED_INT:
        return f.value.siVal > 0 ? static_cast<std::uint64_t>(f.value.siVal) : 0;
      case NVML_VALUE_TYPE_UNSIGNED_SHORT: return f.value.usVal;
      default: return f.value.ullVal;
    }
  }
  static unsigned field_as_uint(const nvmlFieldValue_t& f) {
    return static_cast<unsigned>(std::min<std::uint64_t>(field_as_u64(f), ~0u));
  }

  // Appends one process list (compute or graphics) to `out`, skipping pids already there. The
  // count comes first: a call with *infoCount = 0 answers INSUFFICIENT_SIZE with the count, or
  // SUCCESS when none run (nvml.h); processes may start in between, hence the slack and retries.
  enum class ProcessList { compute, graphics };

  template <typename Info, typename Fn>
  nvmlReturn_t read_process_list(Fn fn, ProcessList list, std::vector<GpuProcess>& out) {
    std::vector<Info> infos;
    unsigned count = 0;
    nvmlReturn_t status = call(fn, &count, static_cast<Info*>(nullptr));
    for (int attempt = 0; attempt < 3 && status == NVML_ERROR_INSUFFICIENT_SIZE; ++attempt) {
      infos.resize(count + 8);
      count = static_cast<unsigned>(infos.size());
      status = call(fn, &count, infos.data());
    }
    if (status != NVML_SUCCESS) return status;
    count = std::min<unsigned>(count, static_cast<unsigned>(infos.size()));
    for (unsigned i = 0; i < count; ++i) {
      const Info& info = infos[i];
      if (std::any_of(out.begin(), out.end(), [&](const GpuProcess& p) { return p.pid == info.pid; }))
        continue;
      GpuProcess process;
      process.pid = info.pid;
      process.graphics = list == ProcessList::graphics;
      if (info.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL) process.used_memory_bytes = info.usedGpuMemory;
      out.push_back(process);
    }
    return NVML_SUCCESS;
  }

  template <typename NewFn, typename OldFn>
  nvmlReturn_t read_processes_of(NewFn newer, OldFn older, ProcessList list, std::vector<GpuProcess>& out) {
    if (newer) return read_process_list<nvmlProcessInfo_v2_t>(newer, list, out);
    if (older) return read_process_list<nvmlProcessInfo_v1_t>(older, list, out);
    return m_device.lost ? NVML_ERROR_GPU_IS_LOST : NVML_ERROR_FUNCTION_NOT_FOUND;
  }

  // The compute list decides: a GPU without graphics contexts may refuse the graphics query.
  void read_processes() {
    std::vector<GpuProcess> processes;
    nvmlReturn_t status =
        read_processes_of(m_f.device_get_compute_running_processes_v2,
                          m_f.device_get_compute_running_processes_v1, ProcessList::compute, processes);
    if (status == NVML_SUCCESS)
      (void)read_processes_of(m_f.device_get_graphics_running_processes_v2,
                              m_f.device_get_graphics_running_processes_v1, ProcessList::graphics, processes);
    set(m_device.processes, status, std::move(processes));
  }

  const NvmlLibrary& m_nvml;
  const NvmlFunctions& m_f;
  nvmlDevice_t m_handle;
  GpuDevice& m_device;
};

std::string read_system_string(nvmlSystemGetString_fn fn, unsigned int size) {
  if (!fn) return {};
  std::vector<char> buffer(size + 1, '\0');
  if (fn(buffer.data(), size) != NVML_SUCCESS) return {};
  return std::string(buffer.data());
}

}  // namespace

GpuSnapshot collect_snapshot(const NvmlLibrary& nvml) {
  GpuSnapshot snapshot;
  snapshot.library_path = nvml.path();
  snapshot.missing_symbols = nvml.missing_symbols();
  if (!nvml.initialized()) {
    snapshot.error = nvml.error();
    return snapshot;
  }
  snapshot.available = true;
  const NvmlFunctions& f = nvml.functions();

  snapshot.driver_version =
      read_system_string(f.system_get_driver_version, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
  snapshot.nvml_version = read_system_string(f.system_get_nvml_version, NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE);

  int cuda = 0;
  nvmlReturn_t status = f.system_get_cuda_driver_version ? f.system_get_cuda_driver_version(&cuda)
                                                         : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (status == NVML_SUCCESS)
    snapshot.cuda_driver_version = cuda;
  else
    snapshot.cuda_driver_error = nvml.issue(status);

  unsigned count = 0;
  status = f.device_get_count ? f.device_get_count(&count) : NVML_ERROR_FUNCTION_NOT_FOUND;
  if (status != NVML_SUCCESS) {
    snapshot.count_error = nvml.issue(status);
    return snapshot;
  }
  if (count > k_max_devices) {
    NvmlIssue issue = nvml.issue(NVML_ERROR_UNKNOWN);
    issue.message = "NVML reported " + std::to_string(count) + " GPUs, which no host has; only the first " +
                    std::to_string(k_max_devices) + " were read. " + issue.message;
    snapshot.count_error = std::move(issue);
    count = k_max_devices;
  }

  std::vector<nvmlDevice_t> handles(count, nullptr);
  snapshot.devices.resize(count);
  for (unsigned i = 0; i < count; ++i) {
    GpuDevice& device = snapshot.devices[i];
    device.index = i;
    status = f.device_get_handle_by_index ? f.device_get_handle_by_index(i, &handles[i])
                                          : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (status != NVML_SUCCESS) {
      handles[i] = nullptr;
      device.handle_error = nvml.issue(status);
      device.lost = status == NVML_ERROR_GPU_IS_LOST;
    }
  }

  // Each thread takes the next GPU and writes only that GPU's GpuDevice (NVML is thread-safe).
  std::atomic<unsigned> next{0};
  auto read_gpus = [&] {
    for (unsigned i = next++; i < count; i = next++)
      if (handles[i]) DeviceReader(nvml, handles[i], snapshot.devices[i]).read_all();
  };
  std::vector<std::thread> threads;
  for (unsigned t = 1; t < std::min(count, k_max_reader_threads); ++t) {
    try {
      threads.emplace_back(read_gpus);
    } catch (const std::system_error&) {
      break;  // fewer threads; this one reads the rest
    }
  }
  read_gpus();
  for (auto& thread : threads) thread.join();
  return snapshot;
}

GpuSnapshot take_snapshot() {
  NvmlLibrary nvml = NvmlLibrary::open();
  return collect_snapshot(nvml);
}

}  // namespace gpuhost::gpu
