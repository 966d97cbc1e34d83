#include "gpu/mig_devices.h"

#include <algorithm>
#include <string>

namespace gpuhost::gpu {

using namespace nvml;

namespace {

// More MIG devices than any GPU has (seven GPU instances, each with up to seven compute
// instances on an A100/H100: MIG user guide); a larger count comes from a broken library.
constexpr unsigned k_max_mig_devices = 64;

std::string read_text(nvmlDeviceGetString_fn fn, nvmlDevice_t device, unsigned size) {
  if (!fn) return {};
  std::string buffer(size + 1, '\0');
  if (fn(device, buffer.data(), size) != NVML_SUCCESS) return {};
  return buffer.substr(0, buffer.find('\0'));
}

std::optional<unsigned> read_uint(nvmlDeviceGetUint_fn fn, nvmlDevice_t device) {
  unsigned value = 0;
  if (!fn || fn(device, &value) != NVML_SUCCESS) return std::nullopt;
  return value;
}

}  // namespace

nvmlReturn_t read_memory_state(const NvmlFunctions& f, nvmlDevice_t device, MemoryState& out) {
  nvmlReturn_t status = NVML_ERROR_FUNCTION_NOT_FOUND;
  if (f.device_get_memory_info_v2) {
    nvmlMemory_v2_t m{};
    m.version = nvmlMemory_v2;
    status = f.device_get_memory_info_v2(device, &m);
    if (status == NVML_SUCCESS) out = {m.total, m.used, m.free, m.reserved};
  }
  if ((status == NVML_ERROR_ARGUMENT_VERSION_MISMATCH || status == NVML_ERROR_FUNCTION_NOT_FOUND) &&
      f.device_get_memory_info) {
    nvmlMemory_t m{};
    status = f.device_get_memory_info(device, &m);
    if (status == NVML_SUCCESS) out = {m.total, m.used, m.free, 0};
  }
  return status;
}

std::vector<unsigned> read_compute_pids(const NvmlFunctions& f, nvmlDevice_t device) {
  constexpr unsigned k_most = 64;
  std::vector<unsigned> pids;
  unsigned count = k_most;
  if (f.device_get_compute_running_processes_v2) {
    std::vector<nvmlProcessInfo_v2_t> infos(k_most);
    if (f.device_get_compute_running_processes_v2(device, &count, infos.data()) == NVML_SUCCESS)
      for (unsigned i = 0; i < std::min(count, k_most); ++i) pids.push_back(infos[i].pid);
  } else if (f.device_get_compute_running_processes_v1) {
    std::vector<nvmlProcessInfo_v1_t> infos(k_most);
    if (f.device_get_compute_running_processes_v1(device, &count, infos.data()) == NVML_SUCCESS)
      for (unsigned i = 0; i < std::min(count, k_most); ++i) pids.push_back(infos[i].pid);
  }
  return pids;
}

std::string mig_profile_from_name(const std::string& name) {
  const auto at = name.rfind(" MIG ");
  return at == std::string::npos ? std::string() : name.substr(at + 5);
}

nvmlReturn_t read_mig_devices(const NvmlFunctions& f, nvmlDevice_t parent, std::vector<MigDevice>& out) {
  out.clear();
  if (!f.device_get_max_mig_device_count || !f.device_get_mig_device_handle_by_index)
    return NVML_ERROR_FUNCTION_NOT_FOUND;
  unsigned count = 0;
  if (nvmlReturn_t s = f.device_get_max_mig_device_count(parent, &count); s != NVML_SUCCESS) return s;
  for (unsigned slot = 0; slot < std::min(count, k_max_mig_devices); ++slot) {
    nvmlDevice_t handle = nullptr;
    const nvmlReturn_t s = f.device_get_mig_device_handle_by_index(parent, slot, &handle);
    if (s == NVML_ERROR_GPU_IS_LOST) return s;
    if (s != NVML_SUCCESS) continue;  // an empty slot (NOT_FOUND), or one NVML will not describe
    MigDevice d;
    d.slot = slot;
    d.uuid = read_text(f.device_get_uuid, handle, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
    d.name = read_text(f.device_get_name, handle, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
    d.profile = mig_profile_from_name(d.name);
    d.gpu_instance_id = read_uint(f.device_get_gpu_instance_id, handle);
    d.compute_instance_id = read_uint(f.device_get_compute_instance_id, handle);
    MemoryState memory;
    if (read_memory_state(f, handle, memory) == NVML_SUCCESS) d.memory = memory;
    d.compute_pids = read_compute_pids(f, handle);
    out.push_back(std::move(d));
  }
  return NVML_SUCCESS;
}

}  // namespace gpuhost::gpu
