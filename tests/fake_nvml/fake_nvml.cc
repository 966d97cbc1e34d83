// A fake NVML: a shared library exporting the NVML C functions gpuhost calls, answering from a
// scenario file named by $GPUHOST_FAKE_NVML_SCENARIO (format: tests/fake_nvml/README.md).
// The same source builds three libraries that differ only in which symbols the linker exports
// (tests/fake_nvml/CMakeLists.txt): full, legacy (an older driver) and minimal.
//
// Behaviour copied from real NVML (nvml.h): calls before nvmlInit return UNINITIALIZED; init and
// shutdown are reference counted; a value the scenario omits is NOT_SUPPORTED; versioned structs
// are checked; a buffer that is too small gives INSUFFICIENT_SIZE.

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#ifdef _WIN32
#include <windows.h>
#endif

#include "base/json.h"
#include "fake_nvml_internal.h"
#include "gpu/nvml_types.h"
#include "mig_state.h"
#include "nvml_clients.h"
#include "timeline.h"

using gpuhost::json::Value;
using namespace gpuhost::gpu::nvml;

namespace {

constexpr const char* k_scenario_env = "GPUHOST_FAKE_NVML_SCENARIO";
constexpr const char* k_clock_env = "GPUHOST_FAKE_NVML_CLOCK";  // a file holding the fake clock's seconds

// The process environment, not the C runtime's copy: on Windows the tests set variables with
// SetEnvironmentVariableW, which msvcrt's getenv does not see.
std::string read_env(const char* name) {
#ifdef _WIN32
  char buffer[4096];
  DWORD n = GetEnvironmentVariableA(name, buffer, sizeof buffer);
  return n > 0 && n < sizeof buffer ? std::string(buffer, n) : std::string();
#else
  const char* value = std::getenv(name);
  return value ? value : "";
#endif
}

using fake_nvml::Device;
using fake_nvml::MigGpu;
using fake_nvml::MigInstance;

struct EventSet {
  std::deque<nvmlEventData_t> pending;
};

struct GpmSample {
  // Set by nvmlGpmSampleGet (the GPU) or nvmlGpmMigSampleGet (the GPU instance's MIG device,
  // whose "gpm" metrics nvmlGpmMetricsGet answers).
  const Device* device = nullptr;
  unsigned long long sequence = 0;  // order of nvmlGpmSampleGet calls
};

// Everything below is guarded by g_mutex.
std::mutex g_mutex;
int g_init_count = 0;
Value g_scenario;
std::vector<Device> g_devices;
std::deque<Device> g_mig_devices;  // MIG devices: the scenario's "mig_devices", then those the MIG state made
fake_nvml::MigMachine g_mig;       // the MIG state machine (mig_state.h)
std::string g_load_error;    // why the scenario could not be loaded, for nvmlErrorString(999)
std::string g_unknown_text;  // storage for that string
std::vector<std::unique_ptr<EventSet>> g_event_sets;
std::condition_variable g_event_arrived;  // waits on g_mutex
std::vector<std::unique_ptr<GpmSample>> g_gpm_samples;
unsigned long long g_gpm_sequence = 0;
std::string g_clock_file;  // GPUHOST_FAKE_NVML_CLOCK at load
double g_loaded_at = 0;    // steady seconds when the scenario was loaded

// The device's values now, on the fake clock.
const Value& current(const Device& device) {
  return device.timeline.at(fake_nvml::fake_clock_seconds(g_clock_file, g_loaded_at));
}

EventSet* find_event_set(nvmlEventSet_t set) {
  for (auto& s : g_event_sets)
    if (reinterpret_cast<nvmlEventSet_t>(s.get()) == set) return s.get();
  return nullptr;
}

GpmSample* find_gpm_sample(nvmlGpmSample_t sample) {
  for (auto& s : g_gpm_samples)
    if (reinterpret_cast<nvmlGpmSample_t>(s.get()) == sample) return s.get();
  return nullptr;
}

bool load_scenario() {
  g_load_error.clear();
  g_devices.clear();
  g_mig_devices.clear();
  std::string path = read_env(k_scenario_env);
  if (path.empty()) {
    g_load_error = std::string(k_scenario_env) + " is not set";
    return false;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    g_load_error = "cannot open scenario " + path;
    return false;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = gpuhost::json::parse(text.str());
  if (!parsed) {
    g_load_error = "scenario " + path + ": " + parsed.error().message;
    return false;
  }
  if (!parsed->is_object()) {
    g_load_error = "scenario " + path + ": not a JSON object";
    return false;
  }
  const Value* devices = parsed->find("devices");
  if (devices && !devices->is_array()) {
    g_load_error = "scenario " + path + ": \"devices\" is not an array";
    return false;
  }
  g_scenario = std::move(*parsed);
  if (const Value* list = g_scenario.find("devices"))
    for (const auto& d : list->items()) {
      Device device;
      device.data = d;
      std::string problem;
      if (!fake_nvml::Timeline::build(d, device.timeline, problem)) {
        g_load_error = "scenario " + path + ": device " + std::to_string(g_devices.size()) + ": " + problem;
        g_devices.clear();
        return false;
      }
      g_devices.push_back(std::move(device));
    }
  // MIG devices, in one vector whose addresses (the handles) never move.
  for (std::size_t i = 0; i < g_devices.size(); ++i) {
    const Value* list = g_devices[i].data.find("mig_devices");
    if (!list || !list->is_array()) continue;
    for (const auto& m : list->items()) {
      Device mig;
      mig.data = m;
      mig.parent = static_cast<int>(i);
      std::string problem;
      if (!fake_nvml::Timeline::build(m, mig.timeline, problem)) {
        g_load_error = "scenario " + path + ": device " + std::to_string(i) + " MIG device: " + problem;
        g_devices.clear();
        g_mig_devices.clear();
        return false;
      }
      g_devices[i].children.push_back(g_mig_devices.size());
      g_mig_devices.push_back(std::move(mig));
    }
  }
  std::string problem;
  if (!g_mig.load(g_scenario, problem)) {
    g_load_error = "scenario " + path + ": " + problem;
    g_devices.clear();
    g_mig_devices.clear();
    return false;
  }
  for (std::size_t i = 0; i < g_devices.size(); ++i)
    if (g_mig.gpu(i)) fake_nvml::mig_devices_changed(i);
  g_clock_file = read_env(k_clock_env);
  g_loaded_at = fake_nvml::steady_seconds();
  return true;
}

// The error a scenario forces on `function`: exact key first, then the longest "prefix*" key.
bool forced_error(const Value* errors, std::string_view function, nvmlReturn_t& out) {
  if (!errors || !errors->is_object()) return false;
  if (const Value* v = errors->find(function); v && v->is_integer()) {
    out = static_cast<nvmlReturn_t>(v->as_int());
    return true;
  }
  std::size_t best = 0;
  bool found = false;
  for (const auto& [key, v] : errors->members()) {
    if (key.empty() || key.back() != '*' || !v.is_integer()) continue;
    std::string_view prefix(key.data(), key.size() - 1);
    if (function.starts_with(prefix) && (!found || prefix.size() >= best)) {
      best = prefix.size();
      out = static_cast<nvmlReturn_t>(v.as_int());
      found = true;
    }
  }
  return found;
}

// Entry check for system functions.
nvmlReturn_t begin_system(std::string_view function) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  nvmlReturn_t forced;
  if (forced_error(g_scenario.find("errors"), function, forced)) return forced;
  return NVML_SUCCESS;
}

// Entry check for device functions; sets `out` to the device's scenario object.
nvmlReturn_t begin_device(std::string_view function, nvmlDevice_t handle, const Value*& out) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  auto* device = reinterpret_cast<const Device*>(handle);
  const bool gpu = !g_devices.empty() && device >= g_devices.data() && device < g_devices.data() + g_devices.size();
  bool mig = false;
  for (const auto& m : g_mig_devices) mig = mig || (&m == device && m.parent >= 0);
  if (!gpu && !mig) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t forced;
  if (forced_error(device->data.find("errors"), function, forced)) return forced;
  if (forced_error(g_scenario.find("errors"), function, forced)) return forced;
  out = &current(*device);
  return NVML_SUCCESS;
}

// Follows a path of keys; nullptr when any is missing or null.
const Value* at(const Value* v, std::initializer_list<std::string_view> keys) {
  for (auto key : keys) {
    if (!v) return nullptr;
    v = v->find(key);
  }
  return v && !v->is_null() ? v : nullptr;
}

// Integers may be written as JSON numbers, booleans (1/0) or "0x..." strings.
bool as_u64(const Value* v, unsigned long long& out) {
  if (!v) return false;
  if (v->is_bool()) {
    out = v->as_bool() ? 1 : 0;
    return true;
  }
  if (v->is_integer()) {
    out = static_cast<unsigned long long>(v->as_int());
    return true;
  }
  if (v->is_string()) {
    const std::string& s = v->as_string();
    char* end = nullptr;
    out = std::strtoull(s.c_str(), &end, 0);
    return !s.empty() && end && *end == '\0';
  }
  return false;
}

template <typename T>
nvmlReturn_t get_number(const Value* v, T* out) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned long long n = 0;
  if (!as_u64(v, n)) return NVML_ERROR_NOT_SUPPORTED;
  *out = static_cast<T>(n);
  return NVML_SUCCESS;
}

unsigned long long number_or(const Value* v, unsigned long long fallback) {
  unsigned long long n = fallback;
  as_u64(v, n);
  return n;
}

nvmlReturn_t get_string(const Value* v, char* buffer, unsigned int length) {
  if (!buffer) return NVML_ERROR_INVALID_ARGUMENT;
  if (!v || !v->is_string()) return NVML_ERROR_NOT_SUPPORTED;
  const std::string& s = v->as_string();
  if (s.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  std::memcpy(buffer, s.c_str(), s.size() + 1);
  return NVML_SUCCESS;
}

void copy_bounded(char* dest, std::size_t size, const std::string& s) {
  std::size_t n = std::min(s.size(), size - 1);
  std::memcpy(dest, s.data(), n);
  dest[n] = '\0';
}

#define FAKE_SYSTEM_CALL()                   \
  std::lock_guard<std::mutex> lock(g_mutex); \
  if (nvmlReturn_t status_ = begin_system(__func__); status_ != NVML_SUCCESS) return status_

// Declares `dev`, the device's scenario object, or returns the status the call must give.
// `function` is the exported name, which the scenario's "errors" keys match.
#define FAKE_DEVICE_CALL_AS(function, handle) \
  std::lock_guard<std::mutex> lock(g_mutex);  \
  const Value* dev = nullptr;                 \
  if (nvmlReturn_t status_ = begin_device(function, handle, dev); status_ != NVML_SUCCESS) return status_
#define FAKE_DEVICE_CALL(handle) FAKE_DEVICE_CALL_AS(__func__, handle)

nvmlReturn_t init(std::string_view function) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_init_count == 0 && !load_scenario()) return NVML_ERROR_UNKNOWN;
  nvmlReturn_t forced;
  if (forced_error(g_scenario.find("errors"), function, forced) && forced != NVML_SUCCESS) {
    if (g_init_count == 0) g_devices.clear();
    return forced;
  }
  if (g_init_count++ == 0) fake_nvml::register_nvml_client();
  return NVML_SUCCESS;
}

nvmlReturn_t get_pci(std::string_view function, nvmlDevice_t device, nvmlPciInfo_t* pci, int version) {
  FAKE_DEVICE_CALL_AS(function, device);
  if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
  const Value* info = at(dev, {"pci"});
  if (!info) return NVML_ERROR_NOT_SUPPORTED;
  unsigned domain = static_cast<unsigned>(number_or(at(info, {"domain"}), 0));
  unsigned bus = static_cast<unsigned>(number_or(at(info, {"bus"}), 0));
  unsigned slot = static_cast<unsigned>(number_or(at(info, {"device"}), 0));
  pci->domain = domain;
  pci->bus = bus;
  pci->device = slot;
  pci->pciDeviceId = static_cast<unsigned>(number_or(at(info, {"pci_device_id"}), 0));
  pci->pciSubSystemId = static_cast<unsigned>(number_or(at(info, {"pci_subsystem_id"}), 0));
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", domain, bus, slot);
  if (version >= 2)
    std::snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.0", domain, bus, slot);
  else
    copy_bounded(pci->busId, 16, "RESERVED");  // the old layout's reserved words live here
  return NVML_SUCCESS;
}

// Fills any layout of nvmlGridLicensableFeatures from the scenario.
template <typename Features>
nvmlReturn_t get_grid(const Value* dev, Features* out) {
  if (!out) return NVML_ERROR_INVALID_ARGUMENT;
  const Value* grid = at(dev, {"grid_licensable_features"});
  if (!grid) return NVML_ERROR_NOT_SUPPORTED;
  std::memset(out, 0, sizeof *out);
  out->isGridLicenseSupported = number_or(at(grid, {"supported"}), 0) != 0 ? 1 : 0;
  const Value* list = at(grid, {"features"});
  unsigned count = 0;
  if (list && list->is_array()) {
    for (const auto& f : list->items()) {
      if (count == NVML_GRID_LICENSE_FEATURE_MAX_COUNT) break;
      auto& feature = out->gridLicensableFeatures[count++];
      feature.featureCode = static_cast<nvmlGridLicenseFeatureCode_t>(number_or(at(&f, {"code"}), 0));
      feature.featureState = static_cast<unsigned>(number_or(at(&f, {"state"}), 0));
      copy_bounded(feature.licenseInfo, sizeof feature.licenseInfo, f.get_string("license_info"));
      if constexpr (requires { feature.productName; })
        copy_bounded(feature.productName, sizeof feature.productName, f.get_string("product_name"));
      if constexpr (requires { feature.featureEnabled; })
        feature.featureEnabled = static_cast<unsigned>(number_or(at(&f, {"enabled"}), 1));
      if constexpr (requires { feature.licenseExpiry; }) {
        if (const Value* e = at(&f, {"expiry"})) {
          feature.licenseExpiry.year = static_cast<unsigned>(number_or(at(e, {"year"}), 0));
          feature.licenseExpiry.month = static_cast<unsigned short>(number_or(at(e, {"month"}), 0));
          feature.licenseExpiry.day = static_cast<unsigned short>(number_or(at(e, {"day"}), 0));
          feature.licenseExpiry.hour = static_cast<unsigned short>(number_or(at(e, {"hour"}), 0));
          feature.licenseExpiry.min = static_cast<unsigned short>(number_or(at(e, {"min"}), 0));
          feature.licenseExpiry.sec = static_cast<unsigned short>(number_or(at(e, {"sec"}), 0));
          feature.licenseExpiry.status = static_cast<unsigned char>(number_or(at(e, {"status"}), 0));
        }
      }
    }
  }
  out->licensableFeaturesCount = count;
  return NVML_SUCCESS;
}

nvmlReturn_t get_handle(std::string_view function, unsigned int index, nvmlDevice_t* device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= g_devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t forced;
  if (forced_error(g_devices[index].data.find("errors"), function, forced)) return forced;
  if (forced_error(g_scenario.find("errors"), function, forced)) return forced;
  *device = reinterpret_cast<nvmlDevice_t>(&g_devices[index]);
  return NVML_SUCCESS;
}

nvmlReturn_t get_driver_model(const Value* dev, nvmlDriverModel_t* current, nvmlDriverModel_t* pending) {
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t s = get_number(at(dev, {"driver_model", "current"}), current); s != NVML_SUCCESS) return s;
  return get_number(at(dev, {"driver_model", "pending"}), pending);
}
const char* clock_key(nvmlClockType_t type) {
  switch (type) {
    case NVML_CLOCK_GRAPHICS: return "graphics";
    case NVML_CLOCK_SM: return "sm";
    case NVML_CLOCK_MEM: return "mem";
    case NVML_CLOCK_VIDEO: return "video";
  }
  return "unknown";
}
// nvmlDeviceGet{Compute,Graphics}RunningProcesses*: the scenario's "processes" of one type.
template <typename Info>
nvmlReturn_t get_processes(const Value* dev, std::string_view type, unsigned int* count, Info* infos) {
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  const Value* list = at(dev, {"processes"});
  if (!list || !list->is_array()) return NVML_ERROR_NOT_SUPPORTED;
  std::vector<const Value*> matching;
  for (const auto& p : list->items()) {
    const Value* t = p.find("type");
    std::string_view process_type = t && t->is_string() ? std::string_view(t->as_string()) : "compute";
    if (process_type == type) matching.push_back(&p);
  }
  if (*count < matching.size()) {
    *count = static_cast<unsigned>(matching.size());
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (!matching.empty() && !infos) return NVML_ERROR_INVALID_ARGUMENT;
  for (std::size_t i = 0; i < matching.size(); ++i) {
    Info info{};
    info.pid = static_cast<unsigned>(number_or(at(matching[i], {"pid"}), 0));
    // A missing or null used_memory is Windows WDDM's NVML_VALUE_NOT_AVAILABLE.
    info.usedGpuMemory = number_or(at(matching[i], {"used_memory"}), NVML_VALUE_NOT_AVAILABLE_ULL);
    if constexpr (requires { info.gpuInstanceId; }) {
      info.gpuInstanceId = 0xFFFFFFFFu;
      info.computeInstanceId = 0xFFFFFFFFu;
    }
    infos[i] = info;
  }
  *count = static_cast<unsigned>(matching.size());
  return NVML_SUCCESS;
}

nvmlReturn_t get_codec_utilization(const Value* dev, const char* key, unsigned int* utilization,
                                   unsigned int* period_us) {
  if (!utilization || !period_us) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t s = get_number(at(dev, {key}), utilization); s != NVML_SUCCESS) return s;
  *period_us = 167000;  // a typical NVML sampling period
  return NVML_SUCCESS;
}

// GPM metric ids the fake knows, by their key in the scenario's "gpm": {"metrics": {...}}.
const char* gpm_metric_key(unsigned id) {
  switch (id) {
    case NVML_GPM_METRIC_GRAPHICS_UTIL: return "graphics_util";
    case NVML_GPM_METRIC_ANY_TENSOR_UTIL: return "any_tensor_util";
    case NVML_GPM_METRIC_DRAM_BW_UTIL: return "dram_bw_util";
    case NVML_GPM_METRIC_PCIE_TX_PER_SEC: return "pcie_tx_per_sec";
    case NVML_GPM_METRIC_PCIE_RX_PER_SEC: return "pcie_rx_per_sec";
    default: return nullptr;
  }
}

// Waits without holding the fake's lock, so other calls proceed meanwhile.
// The plain nvmlEventSetWait predates the MIG instance ids and leaves them alone.
enum class EventLayout { plain, v2 };

nvmlReturn_t wait_for_event(std::string_view function, nvmlEventSet_t set, nvmlEventData_t* data,
                            unsigned int timeout_ms, EventLayout layout) {
  std::unique_lock<std::mutex> lock(g_mutex);
  if (nvmlReturn_t s = begin_system(function); s != NVML_SUCCESS) return s;
  if (!data) return NVML_ERROR_INVALID_ARGUMENT;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
    EventSet* events = find_event_set(set);
    if (!events) return NVML_ERROR_INVALID_ARGUMENT;
    if (!events->pending.empty()) {
      nvmlEventData_t next = events->pending.front();
      events->pending.pop_front();
      data->device = next.device;
      data->eventType = next.eventType;
      data->eventData = next.eventData;
      if (layout == EventLayout::v2) {
        data->gpuInstanceId = next.gpuInstanceId;
        data->computeInstanceId = next.computeInstanceId;
      }
      return NVML_SUCCESS;
    }
    if (g_event_arrived.wait_until(lock, deadline) == std::cv_status::timeout) return NVML_ERROR_TIMEOUT;
  }
}

const char* error_text(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    default: return "Unknown Error";
  }
}

}  // namespace

namespace fake_nvml {

std::unique_lock<std::mutex> state_lock() { return std::unique_lock<std::mutex>(g_mutex); }

nvmlReturn_t begin_call(std::string_view function) { return begin_system(function); }

nvmlReturn_t begin_gpu(std::string_view function, nvmlDevice_t handle, std::size_t& index) {
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  auto* device = reinterpret_cast<const Device*>(handle);
  if (g_devices.empty() || device < g_devices.data() || device >= g_devices.data() + g_devices.size())
    return NVML_ERROR_INVALID_ARGUMENT;
  nvmlReturn_t forced;
  if (forced_error(device->data.find("errors"), function, forced)) return forced;
  if (forced_error(g_scenario.find("errors"), function, forced)) return forced;
  index = static_cast<std::size_t>(device - g_devices.data());
  return NVML_SUCCESS;
}

MigMachine& mig() { return g_mig; }

nvmlDevice_t gpu_handle(std::size_t index) { return reinterpret_cast<nvmlDevice_t>(&g_devices[index]); }

bool gpu_busy(std::size_t index) {
  const Value* list = g_devices[index].data.find("processes");
  return list && list->is_array() && !list->items().empty();
}

// Deterministic MIG UUIDs: FNV-1a of the GPU UUID and the instance ids, in UUID form.
std::string mig_uuid(const std::string& gpu_uuid, unsigned gi, unsigned ci) {
  unsigned long long h = 1469598103934665603ULL;
  for (char c : gpu_uuid + "/" + std::to_string(gi) + "/" + std::to_string(ci)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  char text[64];
  std::snprintf(text, sizeof text, "MIG-%08llx-%04llx-5%03llx-8%03llx-%012llx", h >> 32, (h >> 16) & 0xFFFF,
                (h >> 4) & 0xFFF, h & 0xFFF, (h * 31) & 0xFFFFFFFFFFFFULL);
  return text;
}

void mig_devices_changed(std::size_t index) {
  Device& gpu = g_devices[index];
  for (std::size_t child : gpu.children) {
    g_mig_devices[child].parent = -2;
    g_mig_devices[child].data = Value();
  }
  gpu.children.clear();
  const MigGpu* state = g_mig.gpu(index);
  if (!state || state->current != 1) return;
  std::vector<const MigInstance*> order;
  for (const auto& gi : state->instances) order.push_back(&gi);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) { return a->start < b->start; });
  const std::string gpu_name = gpu.data.get_string("name");
  const std::string gpu_uuid = gpu.data.get_string("uuid");
  unsigned slot = 0;
  for (const MigInstance* gi : order)
    for (const auto& ci : gi->computes) {
      Value d = Value::object();
      d["slot"] = slot++;
      const std::string profile =
          ci.slices == gi->profile->slices ? gi->profile->name : std::to_string(ci.slices) + "c." + gi->profile->name;
      d["name"] = gpu_name + " MIG " + profile;
      d["uuid"] = mig_uuid(gpu_uuid, gi->id, ci.id);
      d["gpu_instance_id"] = gi->id;
      d["compute_instance_id"] = ci.id;
      unsigned long long used = 0;
      if (gi->processes.is_array())
        for (const auto& p : gi->processes.items()) used += static_cast<unsigned long long>(p.get_int("used_memory"));
      const unsigned long long total = gi->profile->memory_mb * 1024ULL * 1024ULL;
      d["memory"]["total"] = total;
      d["memory"]["used"] = used;
      d["memory"]["free"] = total > used ? total - used : 0ULL;
      d["memory"]["reserved"] = 0;
      d["processes"] = gi->processes.is_array() ? gi->processes : Value::array();
      for (const char* metric : {"graphics_util", "any_tensor_util", "dram_bw_util", "pcie_tx_per_sec", "pcie_rx_per_sec"})
        d["gpm"]["metrics"][metric] = 0;
      Device mig;
      mig.data = std::move(d);
      mig.parent = static_cast<int>(index);
      std::string problem;
      (void)Timeline::build(mig.data, mig.timeline, problem);
      gpu.children.push_back(g_mig_devices.size());
      g_mig_devices.push_back(std::move(mig));
    }
}

}  // namespace fake_nvml

// ---- the exported C ABI (names and signatures: nvml.h; checked against gpu/nvml_types.h below) ----

extern "C" {

nvmlReturn_t nvmlInit_v2() {
  return init(__func__);
}
nvmlReturn_t nvmlInit() {
  return init(__func__);
}

nvmlReturn_t nvmlShutdown() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_init_count == 0) return NVML_ERROR_UNINITIALIZED;
  if (--g_init_count == 0) {
    fake_nvml::unregister_nvml_client();
    // Handles, event sets and samples die with the last shutdown; a waiter wakes up to see it.
    g_devices.clear();
    g_scenario = Value();
    g_event_sets.clear();
    g_gpm_samples.clear();
    g_event_arrived.notify_all();
  }
  return NVML_SUCCESS;
}

const char* nvmlErrorString(nvmlReturn_t result) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (result == NVML_ERROR_UNKNOWN && !g_load_error.empty()) {
    g_unknown_text = "Unknown Error (fake NVML: " + g_load_error + ")";
    return g_unknown_text.c_str();
  }
  return error_text(result);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  FAKE_SYSTEM_CALL();
  return get_string(at(&g_scenario, {"driver_version"}), version, length);
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char* version, unsigned int length) {
  FAKE_SYSTEM_CALL();
  return get_string(at(&g_scenario, {"nvml_version"}), version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int* version) {
  FAKE_SYSTEM_CALL();
  return get_number(at(&g_scenario, {"cuda_driver_version"}), version);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int* version) {
  FAKE_SYSTEM_CALL();
  return get_number(at(&g_scenario, {"cuda_driver_version"}), version);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  FAKE_SYSTEM_CALL();
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(g_devices.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int* count) {
  FAKE_SYSTEM_CALL();
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = static_cast<unsigned>(g_devices.size());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  return get_handle(__func__, index, device);
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t* device) {
  return get_handle(__func__, index, device);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  FAKE_DEVICE_CALL(device);
  return get_string(at(dev, {"name"}), name, length);
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  FAKE_DEVICE_CALL(device);
  return get_string(at(dev, {"uuid"}), uuid, length);
}

nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char* serial, unsigned int length) {
  FAKE_DEVICE_CALL(device);
  return get_string(at(dev, {"serial"}), serial, length);
}

nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char* version, unsigned int length) {
  FAKE_DEVICE_CALL(device);
  return get_string(at(dev, {"vbios_version"}), version, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return get_pci(__func__, device, pci, 3);
}
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return get_pci(__func__, device, pci, 2);
}
nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  return get_pci(__func__, device, pci, 1);
}

nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t* arch) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"architecture"}), arch);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major, int* minor) {
  FAKE_DEVICE_CALL(device);
  if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t s = get_number(at(dev, {"cuda_compute_capability", "major"}), major); s != NVML_SUCCESS)
    return s;
  return get_number(at(dev, {"cuda_compute_capability", "minor"}), minor);
}

nvmlReturn_t nvmlDeviceValidateInforom(nvmlDevice_t device) {
  FAKE_DEVICE_CALL(device);
  const Value* valid = at(dev, {"inforom_valid"});
  if (!valid) return NVML_ERROR_NOT_SUPPORTED;
  return number_or(valid, 1) != 0 ? NVML_SUCCESS : NVML_ERROR_CORRUPTED_INFOROM;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t* memory) {
  FAKE_DEVICE_CALL(device);
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  if (memory->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const Value* m = at(dev, {"memory"});
  if (!m) return NVML_ERROR_NOT_SUPPORTED;
  memory->total = number_or(at(m, {"total"}), 0);
  memory->reserved = number_or(at(m, {"reserved"}), 0);
  memory->free = number_or(at(m, {"free"}), 0);
  memory->used = number_or(at(m, {"used"}), 0);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  FAKE_DEVICE_CALL(device);
  if (!memory) return NVML_ERROR_INVALID_ARGUMENT;
  const Value* m = at(dev, {"memory"});
  if (!m) return NVML_ERROR_NOT_SUPPORTED;
  // v1's "used" is reserved plus allocated (nvml.h nvmlMemory_t).
  memory->total = number_or(at(m, {"total"}), 0);
  memory->free = number_or(at(m, {"free"}), 0);
  memory->used = number_or(at(m, {"used"}), 0) + number_or(at(m, {"reserved"}), 0);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t* current,
                                  nvmlEnableState_t* pending) {
  FAKE_DEVICE_CALL(device);
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t s = get_number(at(dev, {"ecc_mode", "current"}), current); s != NVML_SUCCESS) return s;
  return get_number(at(dev, {"ecc_mode", "pending"}), pending);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t error_type,
                                         nvmlEccCounterType_t counter_type, unsigned long long* count) {
  FAKE_DEVICE_CALL(device);
  if (number_or(at(dev, {"ecc_mode", "current"}), 0) == 0) return NVML_ERROR_NOT_SUPPORTED;
  const char* counter = counter_type == NVML_VOLATILE_ECC ? "volatile" : "aggregate";
  const char* type = error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? "corrected" : "uncorrected";
  return get_number(at(dev, {"ecc_errors", counter, type}), count);
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                       unsigned int* page_count, unsigned long long* addresses) {
  FAKE_DEVICE_CALL(device);
  if (!page_count) return NVML_ERROR_INVALID_ARGUMENT;
  const char* key =
      cause == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS ? "single_bit" : "double_bit";
  unsigned n = 0;
  if (nvmlReturn_t s = get_number(at(dev, {"retired_pages", key}), &n); s != NVML_SUCCESS) return s;
  if (*page_count < n) {
    *page_count = n;
    return NVML_ERROR_INSUFFICIENT_SIZE;
  }
  if (n > 0 && !addresses) return NVML_ERROR_INVALID_ARGUMENT;
  for (unsigned i = 0; i < n; ++i) addresses[i] = 0x1000ULL * (i + 1);
  *page_count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t* pending) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"retired_pages", "pending"}), pending);
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int* correctable,
                                       unsigned int* uncorrectable, unsigned int* pending,
                                       unsigned int* failure) {
  FAKE_DEVICE_CALL(device);
  if (!correctable || !uncorrectable || !pending || !failure) return NVML_ERROR_INVALID_ARGUMENT;
  const Value* rows = at(dev, {"remapped_rows"});
  if (!rows) return NVML_ERROR_NOT_SUPPORTED;
  *correctable = static_cast<unsigned>(number_or(at(rows, {"correctable"}), 0));
  *uncorrectable = static_cast<unsigned>(number_or(at(rows, {"uncorrectable"}), 0));
  *pending = static_cast<unsigned>(number_or(at(rows, {"pending"}), 0));
  *failure = static_cast<unsigned>(number_or(at(rows, {"failure"}), 0));
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int* value) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"pcie", "current_generation"}), value);
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int* value) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"pcie", "current_width"}), value);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* value) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"pcie", "max_generation"}), value);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int* value) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"pcie", "max_width"}), value);
}
nvmlReturn_t nvmlDeviceGetGpuMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int* value) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"pcie", "gpu_max_generation"}), value);
}
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int* value) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"pcie", "replay_counter"}), value);
}

nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t* mode) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"persistence_mode"}), mode);
}

nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t* mode) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"compute_mode"}), mode);
}

nvmlReturn_t nvmlDeviceGetDriverModel_v2(nvmlDevice_t device, nvmlDriverModel_t* current,
                                         nvmlDriverModel_t* pending) {
  FAKE_DEVICE_CALL(device);
  return get_driver_model(dev, current, pending);
}
nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t device, nvmlDriverModel_t* current,
                                      nvmlDriverModel_t* pending) {
  FAKE_DEVICE_CALL(device);
  return get_driver_model(dev, current, pending);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current, unsigned int* pending) {
  FAKE_DEVICE_CALL(device);
  if (!current || !pending) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* d = reinterpret_cast<const Device*>(device);
  if (d >= g_devices.data() && d < g_devices.data() + g_devices.size())
    if (const auto* state = g_mig.gpu(static_cast<std::size_t>(d - g_devices.data()))) {
      *current = state->current;
      *pending = state->pending;
      return NVML_SUCCESS;
    }
  if (nvmlReturn_t s = get_number(at(dev, {"mig_mode", "current"}), current); s != NVML_SUCCESS) return s;
  return get_number(at(dev, {"mig_mode", "pending"}), pending);
}

// MIG devices (README.md, "MIG devices"): a GPU's "mig_devices" answer through their own handles;
// the slot functions need MIG mode current, as on a real GPU.
nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  FAKE_DEVICE_CALL(device);
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* gpu = reinterpret_cast<const Device*>(device);
  if (gpu->parent >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (g_mig.gpu(static_cast<std::size_t>(gpu - g_devices.data())) && !at(dev, {"max_mig_devices"})) {
    *count = 7;  // seven GPU instances at most on the GPUs that have MIG (MIG user guide)
    return NVML_SUCCESS;
  }
  return get_number(at(dev, {"max_mig_devices"}), count);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t* mig) {
  FAKE_DEVICE_CALL(device);
  const auto* gpu = reinterpret_cast<const Device*>(device);
  if (!mig || gpu->parent >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  const auto* state = g_mig.gpu(static_cast<std::size_t>(gpu - g_devices.data()));
  if ((state ? state->current : number_or(at(dev, {"mig_mode", "current"}), 0)) != 1) return NVML_ERROR_NOT_SUPPORTED;
  for (std::size_t child : gpu->children) {
    const Device& m = g_mig_devices[child];
    if (number_or(m.data.find("slot"), ~0ULL) == index) {
      *mig = reinterpret_cast<nvmlDevice_t>(const_cast<Device*>(&m));
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_DEVICE_CALL(device);
  if (!id) return NVML_ERROR_INVALID_ARGUMENT;
  if (reinterpret_cast<const Device*>(device)->parent < 0) return NVML_ERROR_NOT_SUPPORTED;
  return get_number(at(dev, {"gpu_instance_id"}), id);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int* id) {
  FAKE_DEVICE_CALL(device);
  if (!id) return NVML_ERROR_INVALID_ARGUMENT;
  if (reinterpret_cast<const Device*>(device)->parent < 0) return NVML_ERROR_NOT_SUPPORTED;
  return get_number(at(dev, {"compute_instance_id"}), id);
}

nvmlReturn_t nvmlDeviceGetVirtualizationMode(nvmlDevice_t device, nvmlGpuVirtualizationMode_t* mode) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"virtualization_mode"}), mode);
}

nvmlReturn_t nvmlDeviceGetGridLicensableFeatures_v4(nvmlDevice_t device,
                                                    nvmlGridLicensableFeatures_v4_t* features) {
  FAKE_DEVICE_CALL(device);
  return get_grid(dev, features);
}
nvmlReturn_t nvmlDeviceGetGridLicensableFeatures_v3(nvmlDevice_t device,
                                                    nvmlGridLicensableFeatures_v3_t* features) {
  FAKE_DEVICE_CALL(device);
  return get_grid(dev, features);
}
nvmlReturn_t nvmlDeviceGetGridLicensableFeatures_v2(nvmlDevice_t device,
                                                    nvmlGridLicensableFeatures_v2_t* features) {
  FAKE_DEVICE_CALL(device);
  return get_grid(dev, features);
}
nvmlReturn_t nvmlDeviceGetGridLicensableFeatures(nvmlDevice_t device,
                                                 nvmlGridLicensableFeatures_v1_t* features) {
  FAKE_DEVICE_CALL(device);
  return get_grid(dev, features);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long* reasons) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"clocks_event_reasons"}), reasons);
}
nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long* reasons) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"clocks_event_reasons"}), reasons);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensor,
                                      unsigned int* temp) {
  FAKE_DEVICE_CALL(device);
  if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
  return get_number(at(dev, {"temperature"}), temp);
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, nvmlTemperatureThresholds_t threshold,
                                               unsigned int* temp) {
  FAKE_DEVICE_CALL(device);
  const char* key = nullptr;
  switch (threshold) {
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: key = "shutdown"; break;
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: key = "slowdown"; break;
    case NVML_TEMPERATURE_THRESHOLD_MEM_MAX: key = "mem_max"; break;
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX: key = "gpu_max"; break;
    default: return NVML_ERROR_NOT_SUPPORTED;
  }
  return get_number(at(dev, {"temperature_thresholds", key}), temp);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"clocks", clock_key(type)}), mhz);
}
nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int* mhz) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"max_clocks", clock_key(type)}), mhz);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int* mw) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"power_usage_mw"}), mw);
}
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int* mw) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"enforced_power_limit_mw"}), mw);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  FAKE_DEVICE_CALL(device);
  if (!utilization) return NVML_ERROR_INVALID_ARGUMENT;
  if (nvmlReturn_t s = get_number(at(dev, {"utilization", "gpu"}), &utilization->gpu); s != NVML_SUCCESS)
    return s;
  return get_number(at(dev, {"utilization", "memory"}), &utilization->memory);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t* state) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"performance_state"}), state);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int* percent) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"fan_speed"}), percent);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long* energy) {
  FAKE_DEVICE_CALL(device);
  return get_number(at(dev, {"total_energy_mj"}), energy);
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                         unsigned int* value) {
  FAKE_DEVICE_CALL(device);
  const char* key = nullptr;
  switch (counter) {
    case NVML_PCIE_UTIL_TX_BYTES: key = "tx"; break;
    case NVML_PCIE_UTIL_RX_BYTES: key = "rx"; break;
    default: return NVML_ERROR_INVALID_ARGUMENT;
  }
  return get_number(at(dev, {"pcie_throughput_kb_per_s", key}), value);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                             unsigned int* sampling_period_us) {
  FAKE_DEVICE_CALL(device);
  return get_codec_utilization(dev, "encoder_utilization", utilization, sampling_period_us);
}
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int* utilization,
                                             unsigned int* sampling_period_us) {
  FAKE_DEVICE_CALL(device);
  return get_codec_utilization(dev, "decoder_utilization", utilization, sampling_period_us);
}

// Memory temperature and the NVLink data counters. The counters advance by their "*_step" on every
// call and the timestamps by "step_us", so rates computed from two calls are exact.
nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int values_count, nvmlFieldValue_t* values) {
  FAKE_DEVICE_CALL(device);
  if (values_count < 0 || (values_count > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
  Device* d = reinterpret_cast<Device*>(device);
  const unsigned long long reads = d->field_reads++;
  const Value* nvlink = at(dev, {"nvlink_data_kib"});
  const long long base_us = 1750000000000000LL;
  const long long timestamp =
      base_us + static_cast<long long>(reads * number_or(at(nvlink, {"step_us"}), 1000000));
  for (int i = 0; i < values_count; ++i) {
    nvmlFieldValue_t& v = values[i];
    v.timestamp = timestamp;
    v.latencyUsec = 0;
    v.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    unsigned long long n = 0;
    switch (v.fieldId) {
      case NVML_FI_DEV_MEMORY_TEMP:
        if (as_u64(at(dev, {"memory_temperature"}), n)) {
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
          v.value.uiVal = static_cast<unsigned>(n);
          v.nvmlReturn = NVML_SUCCESS;
        }
        break;
      case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
      case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX: {
        const bool tx = v.fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX;
        if (as_u64(at(nvlink, {tx ? "tx" : "rx"}), n)) {
          v.valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
          v.value.ullVal = n + reads * number_or(at(nvlink, {tx ? "tx_step" : "rx_step"}), 0);
          v.nvmlReturn = NVML_SUCCESS;
        }
        break;
      }
      default: break;
    }
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_v2_t* infos) {
  FAKE_DEVICE_CALL(device);
  return get_processes(dev, "compute", count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_v2_t* infos) {
  FAKE_DEVICE_CALL(device);
  return get_processes(dev, "compute", count, infos);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                  nvmlProcessInfo_v1_t* infos) {
  FAKE_DEVICE_CALL(device);
  return get_processes(dev, "compute", count, infos);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_v2_t* infos) {
  FAKE_DEVICE_CALL(device);
  return get_processes(dev, "graphics", count, infos);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int* count,
                                                      nvmlProcessInfo_v2_t* infos) {
  FAKE_DEVICE_CALL(device);
  return get_processes(dev, "graphics", count, infos);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int* count,
                                                   nvmlProcessInfo_v1_t* infos) {
  FAKE_DEVICE_CALL(device);
  return get_processes(dev, "graphics", count, infos);
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  FAKE_SYSTEM_CALL();
  if (!set) return NVML_ERROR_INVALID_ARGUMENT;
  g_event_sets.push_back(std::make_unique<EventSet>());
  *set = reinterpret_cast<nvmlEventSet_t>(g_event_sets.back().get());
  return NVML_SUCCESS;
}

// Registering for Xid events queues the device's scenario "xid_events", as if each happened just
// after registration.
nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long event_types,
                                      nvmlEventSet_t set) {
  FAKE_DEVICE_CALL(device);
  EventSet* events = find_event_set(set);
  if (!events) return NVML_ERROR_INVALID_ARGUMENT;
  if ((event_types & nvmlEventTypeXidCriticalError) == 0) return NVML_SUCCESS;
  if (const Value* xids = at(dev, {"xid_events"}); xids && xids->is_array()) {
    for (const auto& x : xids->items()) {
      nvmlEventData_t data{};
      data.device = device;
      data.eventType = nvmlEventTypeXidCriticalError;
      data.eventData = number_or(&x, 999);
      data.gpuInstanceId = 0xFFFFFFFFu;
      data.computeInstanceId = 0xFFFFFFFFu;
      events->pending.push_back(data);
    }
    g_event_arrived.notify_all();
  }
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  return wait_for_event(__func__, set, data, timeout_ms, EventLayout::v2);
}
nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t* data, unsigned int timeout_ms) {
  return wait_for_event(__func__, set, data, timeout_ms, EventLayout::plain);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  FAKE_SYSTEM_CALL();
  auto it = std::find_if(g_event_sets.begin(), g_event_sets.end(),
                         [&](const auto& s) { return reinterpret_cast<nvmlEventSet_t>(s.get()) == set; });
  if (it == g_event_sets.end()) return NVML_ERROR_INVALID_ARGUMENT;
  g_event_sets.erase(it);
  g_event_arrived.notify_all();
  return NVML_SUCCESS;
}

// A device whose scenario has no "gpm" object is a pre-Hopper GPU: SUCCESS with isSupportedDevice 0.
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t* support) {
  FAKE_DEVICE_CALL(device);
  if (!support) return NVML_ERROR_INVALID_ARGUMENT;
  if (support->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  support->isSupportedDevice = number_or(at(dev, {"gpm", "supported"}), 0) != 0 ? 1 : 0;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
  FAKE_SYSTEM_CALL();
  if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
  g_gpm_samples.push_back(std::make_unique<GpmSample>());
  *sample = reinterpret_cast<nvmlGpmSample_t>(g_gpm_samples.back().get());
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
  FAKE_SYSTEM_CALL();
  auto it = std::find_if(g_gpm_samples.begin(), g_gpm_samples.end(),
                         [&](const auto& s) { return reinterpret_cast<nvmlGpmSample_t>(s.get()) == sample; });
  if (it == g_gpm_samples.end()) return NVML_ERROR_INVALID_ARGUMENT;
  g_gpm_samples.erase(it);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
  FAKE_DEVICE_CALL(device);
  GpmSample* s = find_gpm_sample(sample);
  if (!s) return NVML_ERROR_INVALID_ARGUMENT;
  if (number_or(at(dev, {"gpm", "supported"}), 0) == 0) return NVML_ERROR_NOT_SUPPORTED;
  s->device = reinterpret_cast<const Device*>(device);
  s->sequence = ++g_gpm_sequence;
  return NVML_SUCCESS;
}

// A GPU instance's sample, asked of its parent GPU: the GPU must have GPM and MIG mode current
// (else NOT_SUPPORTED) and the instance must exist (else NOT_FOUND). The metrics are those of the
// instance's first MIG device ("gpm" in a scenario's "mig_devices", zeros for instances the MIG
// state machine made).
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t sample) {
  FAKE_DEVICE_CALL(device);
  GpmSample* s = find_gpm_sample(sample);
  const auto* gpu = reinterpret_cast<const Device*>(device);
  if (!s || gpu->parent >= 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (number_or(at(dev, {"gpm", "supported"}), 0) == 0) return NVML_ERROR_NOT_SUPPORTED;
  const auto* state = g_mig.gpu(static_cast<std::size_t>(gpu - g_devices.data()));
  if ((state ? state->current : number_or(at(dev, {"mig_mode", "current"}), 0)) != 1) return NVML_ERROR_NOT_SUPPORTED;
  for (std::size_t child : gpu->children) {
    const Device& m = g_mig_devices[child];
    if (number_or(m.data.find("gpu_instance_id"), ~0ULL) == gpuInstanceId) {
      s->device = &m;
      s->sequence = ++g_gpm_sequence;
      return NVML_SUCCESS;
    }
  }
  return NVML_ERROR_NOT_FOUND;
}

// As NVML: both samples taken, from the same GPU, sample1 before sample2. The values are the
// scenario's, whatever the interval.
nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t* request) {
  FAKE_SYSTEM_CALL();
  if (!request) return NVML_ERROR_INVALID_ARGUMENT;
  if (request->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  const GpmSample* first = find_gpm_sample(request->sample1);
  const GpmSample* second = find_gpm_sample(request->sample2);
  if (!first || !second || !first->device || first->device != second->device ||
      first->sequence >= second->sequence || request->numMetrics > NVML_GPM_METRIC_MAX)
    return NVML_ERROR_INVALID_ARGUMENT;
  const Value* metrics = at(&current(*first->device), {"gpm", "metrics"});
  for (unsigned i = 0; i < request->numMetrics; ++i) {
    nvmlGpmMetric_t& m = request->metrics[i];
    const char* key = gpm_metric_key(m.metricId);
    const Value* v = key ? at(metrics, {key}) : nullptr;
    if (v && v->is_number()) {
      m.value = v->as_number();
      m.nvmlReturn = NVML_SUCCESS;
    } else {
      m.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    }
  }
  return NVML_SUCCESS;
}

}  // extern "C"

// The exports have exactly the types gpuhost calls them through.
#define FAKE_CHECK(function, type) static_assert(std::is_same_v<decltype(&function), type>, #function)
FAKE_CHECK(nvmlInit_v2, nvmlInit_fn);
FAKE_CHECK(nvmlInit, nvmlInit_fn);
FAKE_CHECK(nvmlShutdown, nvmlShutdown_fn);
FAKE_CHECK(nvmlErrorString, nvmlErrorString_fn);
FAKE_CHECK(nvmlSystemGetDriverVersion, nvmlSystemGetString_fn);
FAKE_CHECK(nvmlSystemGetNVMLVersion, nvmlSystemGetString_fn);
FAKE_CHECK(nvmlSystemGetCudaDriverVersion_v2, nvmlSystemGetCudaDriverVersion_fn);
FAKE_CHECK(nvmlSystemGetCudaDriverVersion, nvmlSystemGetCudaDriverVersion_fn);
FAKE_CHECK(nvmlDeviceGetCount_v2, nvmlDeviceGetCount_fn);
FAKE_CHECK(nvmlDeviceGetCount, nvmlDeviceGetCount_fn);
FAKE_CHECK(nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetHandleByIndex_fn);
FAKE_CHECK(nvmlDeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex_fn);
FAKE_CHECK(nvmlDeviceGetName, nvmlDeviceGetString_fn);
FAKE_CHECK(nvmlDeviceGetUUID, nvmlDeviceGetString_fn);
FAKE_CHECK(nvmlDeviceGetSerial, nvmlDeviceGetString_fn);
FAKE_CHECK(nvmlDeviceGetVbiosVersion, nvmlDeviceGetString_fn);
FAKE_CHECK(nvmlDeviceGetPciInfo_v3, nvmlDeviceGetPciInfo_fn);
FAKE_CHECK(nvmlDeviceGetPciInfo_v2, nvmlDeviceGetPciInfo_fn);
FAKE_CHECK(nvmlDeviceGetPciInfo, nvmlDeviceGetPciInfo_fn);
FAKE_CHECK(nvmlDeviceGetArchitecture, nvmlDeviceGetArchitecture_fn);
FAKE_CHECK(nvmlDeviceGetCudaComputeCapability, nvmlDeviceGetCudaComputeCapability_fn);
FAKE_CHECK(nvmlDeviceValidateInforom, nvmlDeviceValidateInforom_fn);
FAKE_CHECK(nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMemoryInfo_v2_fn);
FAKE_CHECK(nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo_fn);
FAKE_CHECK(nvmlDeviceGetEccMode, nvmlDeviceGetEnableStatePair_fn);
FAKE_CHECK(nvmlDeviceGetTotalEccErrors, nvmlDeviceGetTotalEccErrors_fn);
FAKE_CHECK(nvmlDeviceGetRetiredPages, nvmlDeviceGetRetiredPages_fn);
FAKE_CHECK(nvmlDeviceGetRetiredPagesPendingStatus, nvmlDeviceGetEnableState_fn);
FAKE_CHECK(nvmlDeviceGetRemappedRows, nvmlDeviceGetRemappedRows_fn);
FAKE_CHECK(nvmlDeviceGetCurrPcieLinkGeneration, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetCurrPcieLinkWidth, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetMaxPcieLinkGeneration, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetMaxPcieLinkWidth, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetGpuMaxPcieLinkGeneration, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetPcieReplayCounter, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetPersistenceMode, nvmlDeviceGetEnableState_fn);
FAKE_CHECK(nvmlDeviceGetComputeMode, nvmlDeviceGetComputeMode_fn);
FAKE_CHECK(nvmlDeviceGetDriverModel_v2, nvmlDeviceGetDriverModel_fn);
FAKE_CHECK(nvmlDeviceGetDriverModel, nvmlDeviceGetDriverModel_fn);
FAKE_CHECK(nvmlDeviceGetMigMode, nvmlDeviceGetMigMode_fn);
FAKE_CHECK(nvmlDeviceGetMaxMigDeviceCount, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetMigDeviceHandleByIndex_fn);
FAKE_CHECK(nvmlDeviceGetGpuInstanceId, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetComputeInstanceId, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetVirtualizationMode, nvmlDeviceGetVirtualizationMode_fn);
FAKE_CHECK(nvmlDeviceGetGridLicensableFeatures_v4, nvmlDeviceGetGridLicensableFeatures_v4_fn);
FAKE_CHECK(nvmlDeviceGetGridLicensableFeatures_v3, nvmlDeviceGetGridLicensableFeatures_v3_fn);
FAKE_CHECK(nvmlDeviceGetGridLicensableFeatures_v2, nvmlDeviceGetGridLicensableFeatures_v2_fn);
FAKE_CHECK(nvmlDeviceGetGridLicensableFeatures, nvmlDeviceGetGridLicensableFeatures_v1_fn);
FAKE_CHECK(nvmlDeviceGetCurrentClocksEventReasons, nvmlDeviceGetClocksEventReasons_fn);
FAKE_CHECK(nvmlDeviceGetCurrentClocksThrottleReasons, nvmlDeviceGetClocksEventReasons_fn);
FAKE_CHECK(nvmlDeviceGetTemperature, nvmlDeviceGetTemperature_fn);
FAKE_CHECK(nvmlDeviceGetTemperatureThreshold, nvmlDeviceGetTemperatureThreshold_fn);
FAKE_CHECK(nvmlDeviceGetClockInfo, nvmlDeviceGetClock_fn);
FAKE_CHECK(nvmlDeviceGetMaxClockInfo, nvmlDeviceGetClock_fn);
FAKE_CHECK(nvmlDeviceGetPowerUsage, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetEnforcedPowerLimit, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetUtilizationRates, nvmlDeviceGetUtilizationRates_fn);
FAKE_CHECK(nvmlDeviceGetPerformanceState, nvmlDeviceGetPerformanceState_fn);
FAKE_CHECK(nvmlDeviceGetFanSpeed, nvmlDeviceGetUint_fn);
FAKE_CHECK(nvmlDeviceGetTotalEnergyConsumption, nvmlDeviceGetTotalEnergyConsumption_fn);
FAKE_CHECK(nvmlDeviceGetPcieThroughput, nvmlDeviceGetPcieThroughput_fn);
FAKE_CHECK(nvmlDeviceGetEncoderUtilization, nvmlDeviceGetCodecUtilization_fn);
FAKE_CHECK(nvmlDeviceGetDecoderUtilization, nvmlDeviceGetCodecUtilization_fn);
FAKE_CHECK(nvmlDeviceGetFieldValues, nvmlDeviceGetFieldValues_fn);
FAKE_CHECK(nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetRunningProcesses_v2_fn);
FAKE_CHECK(nvmlDeviceGetComputeRunningProcesses_v2, nvmlDeviceGetRunningProcesses_v2_fn);
FAKE_CHECK(nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetRunningProcesses_v1_fn);
FAKE_CHECK(nvmlDeviceGetGraphicsRunningProcesses_v3, nvmlDeviceGetRunningProcesses_v2_fn);
FAKE_CHECK(nvmlDeviceGetGraphicsRunningProcesses_v2, nvmlDeviceGetRunningProcesses_v2_fn);
FAKE_CHECK(nvmlDeviceGetGraphicsRunningProcesses, nvmlDeviceGetRunningProcesses_v1_fn);
FAKE_CHECK(nvmlEventSetCreate, nvmlEventSetCreate_fn);
FAKE_CHECK(nvmlDeviceRegisterEvents, nvmlDeviceRegisterEvents_fn);
FAKE_CHECK(nvmlEventSetWait_v2, nvmlEventSetWait_fn);
FAKE_CHECK(nvmlEventSetWait, nvmlEventSetWait_fn);
FAKE_CHECK(nvmlEventSetFree, nvmlEventSetFree_fn);
FAKE_CHECK(nvmlGpmQueryDeviceSupport, nvmlGpmQueryDeviceSupport_fn);
FAKE_CHECK(nvmlGpmSampleAlloc, nvmlGpmSampleAlloc_fn);
FAKE_CHECK(nvmlGpmSampleFree, nvmlGpmSampleFree_fn);
FAKE_CHECK(nvmlGpmSampleGet, nvmlGpmSampleGet_fn);
FAKE_CHECK(nvmlGpmMigSampleGet, nvmlGpmMigSampleGet_fn);
FAKE_CHECK(nvmlGpmMetricsGet, nvmlGpmMetricsGet_fn);
