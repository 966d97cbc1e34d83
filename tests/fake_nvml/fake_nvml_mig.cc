// The fake NVML's MIG management functions (nvml.h, "Multi Instance GPU Management"), answering
// from the MIG state machine (mig_state.h). Handles: a GPU instance is the address of its
// MigInstance, a compute instance that of its MigCompute; a destroyed one is INVALID_ARGUMENT.

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "fake_nvml_internal.h"
#include "mig_state.h"
#include "nvml_clients.h"

using namespace gpuhost::gpu::nvml;
using fake_nvml::MigCompute;
using fake_nvml::MigGpu;
using fake_nvml::MigInstance;
using fake_nvml::MigProfileSpec;

namespace {

// Locks, checks init and the GPU handle; declares `index` and `gpu` (nullptr: no MIG on it).
#define FAKE_MIG_GPU_CALL(handle)                                                                    \
  auto lock_ = fake_nvml::state_lock();                                                              \
  std::size_t index = 0;                                                                             \
  if (nvmlReturn_t status_ = fake_nvml::begin_gpu(__func__, handle, index); status_ != NVML_SUCCESS) \
    return status_;                                                                                  \
  MigGpu* gpu = fake_nvml::mig().gpu(index)

// Locks, checks init; declares `instance` and its `gpu_index`, or returns INVALID_ARGUMENT.
#define FAKE_MIG_INSTANCE_CALL(handle)                                                                 \
  auto lock_ = fake_nvml::state_lock();                                                                \
  if (nvmlReturn_t status_ = fake_nvml::begin_call(__func__); status_ != NVML_SUCCESS) return status_; \
  const int gpu_index = fake_nvml::mig().owner(handle);                                                \
  if (gpu_index < 0) return NVML_ERROR_INVALID_ARGUMENT;                                               \
  auto* instance = reinterpret_cast<MigInstance*>(handle)

void fill(const MigProfileSpec& p, nvmlGpuInstanceProfileInfo_t& info) {
  info = {};
  info.id = p.id;
  info.isP2pSupported = 0;
  info.sliceCount = p.slices;
  info.instanceCount = p.instances;
  info.multiprocessorCount = p.multiprocessors;
  info.copyEngineCount = p.slices;
  info.memorySizeMB = p.memory_mb;
}

}  // namespace

extern "C" {

nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t* activation) {
  FAKE_MIG_GPU_CALL(device);
  if (!gpu) return NVML_ERROR_NOT_SUPPORTED;
  // A reset needs every other process off the GPU: compute processes, and any that has NVML open.
  const bool held = fake_nvml::gpu_busy(index) || !fake_nvml::other_nvml_clients().empty();
  const nvmlReturn_t status = fake_nvml::mig().set_mode(index, mode, held, activation);
  fake_nvml::mig_devices_changed(index);
  return status;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                 nvmlGpuInstanceProfileInfo_t* info) {
  FAKE_MIG_GPU_CALL(device);
  if (!info) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu || gpu->current != 1) return NVML_ERROR_NOT_SUPPORTED;
  const MigProfileSpec* p = gpu->by_index(profile);
  if (!p)
    return profile < NVML_GPU_INSTANCE_PROFILE_COUNT ? NVML_ERROR_NOT_SUPPORTED : NVML_ERROR_INVALID_ARGUMENT;
  fill(*p, *info);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfoV(nvmlDevice_t device, unsigned int profile,
                                                  nvmlGpuInstanceProfileInfo_v2_t* info) {
  FAKE_MIG_GPU_CALL(device);
  if (!info) return NVML_ERROR_INVALID_ARGUMENT;
  if (info->version != nvmlGpuInstanceProfileInfo_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
  if (!gpu || gpu->current != 1) return NVML_ERROR_NOT_SUPPORTED;
  const MigProfileSpec* p = gpu->by_index(profile);
  if (!p) return NVML_ERROR_NOT_SUPPORTED;
  nvmlGpuInstanceProfileInfo_t v1;
  fill(*p, v1);
  const unsigned version = info->version;
  *info = {};
  info->version = version;
  info->id = v1.id;
  info->sliceCount = v1.sliceCount;
  info->instanceCount = v1.instanceCount;
  info->multiprocessorCount = v1.multiprocessorCount;
  info->copyEngineCount = v1.copyEngineCount;
  info->memorySizeMB = v1.memorySizeMB;
  const std::string name = "MIG " + p->name;
  std::strncpy(info->name, name.c_str(), sizeof info->name - 1);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profile_id,
                                         nvmlGpuInstance_t* out) {
  FAKE_MIG_GPU_CALL(device);
  if (!gpu) return NVML_ERROR_NOT_SUPPORTED;
  MigInstance* created = nullptr;
  const nvmlReturn_t status = fake_nvml::mig().create_instance(index, profile_id, &created);
  if (status == NVML_SUCCESS) *out = reinterpret_cast<nvmlGpuInstance_t>(created);
  fake_nvml::mig_devices_changed(index);
  return status;
}

nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profile_id,
                                       nvmlGpuInstance_t* instances, unsigned int* count) {
  FAKE_MIG_GPU_CALL(device);
  if (!instances || !count) return NVML_ERROR_INVALID_ARGUMENT;
  if (!gpu || gpu->current != 1) return NVML_ERROR_NOT_SUPPORTED;
  const MigProfileSpec* p = gpu->by_id(profile_id);
  if (!p) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned n = 0;
  for (auto& gi : gpu->instances)
    if (gi.profile == p) instances[n++] = reinterpret_cast<nvmlGpuInstance_t>(&gi);
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t handle, nvmlGpuInstanceInfo_t* info) {
  FAKE_MIG_INSTANCE_CALL(handle);
  if (!info) return NVML_ERROR_INVALID_ARGUMENT;
  info->device = fake_nvml::gpu_handle(static_cast<std::size_t>(gpu_index));
  info->id = instance->id;
  info->profileId = instance->profile->id;
  info->placement = {instance->start, instance->profile->size};
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t handle) {
  FAKE_MIG_INSTANCE_CALL(handle);
  const nvmlReturn_t status =
      fake_nvml::mig().destroy_instance(static_cast<std::size_t>(gpu_index), instance);
  fake_nvml::mig_devices_changed(static_cast<std::size_t>(gpu_index));
  return status;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t handle, unsigned int profile,
                                                          unsigned int engine_profile,
                                                          nvmlComputeInstanceProfileInfo_t* info) {
  FAKE_MIG_INSTANCE_CALL(handle);
  if (!info || engine_profile != NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
    return NVML_ERROR_INVALID_ARGUMENT;
  const unsigned slices = fake_nvml::compute_profile_slices(profile);
  if (slices == 0 || slices > instance->profile->slices) return NVML_ERROR_NOT_SUPPORTED;
  *info = {};
  info->id = profile;
  info->sliceCount = slices;
  info->instanceCount = instance->profile->slices / slices;
  info->multiprocessorCount = instance->profile->multiprocessors * slices / instance->profile->slices;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t handle, unsigned int profile_id,
                                                  nvmlComputeInstance_t* out) {
  FAKE_MIG_INSTANCE_CALL(handle);
  MigCompute* created = nullptr;
  const nvmlReturn_t status = fake_nvml::mig().create_compute(instance, profile_id, &created);
  if (status == NVML_SUCCESS) *out = reinterpret_cast<nvmlComputeInstance_t>(created);
  fake_nvml::mig_devices_changed(static_cast<std::size_t>(gpu_index));
  return status;
}

nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t handle, unsigned int profile_id,
                                                nvmlComputeInstance_t* computes, unsigned int* count) {
  FAKE_MIG_INSTANCE_CALL(handle);
  if (!computes || !count) return NVML_ERROR_INVALID_ARGUMENT;
  unsigned n = 0;
  for (auto& ci : instance->computes)
    if (ci.profile == profile_id) computes[n++] = reinterpret_cast<nvmlComputeInstance_t>(&ci);
  *count = n;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t handle) {
  auto lock_ = fake_nvml::state_lock();
  if (nvmlReturn_t status = fake_nvml::begin_call(__func__); status != NVML_SUCCESS) return status;
  int gpu_index = -1;
  MigInstance* instance = fake_nvml::mig().instance_of_compute(handle, &gpu_index);
  if (!instance) return NVML_ERROR_INVALID_ARGUMENT;
  const nvmlReturn_t status =
      fake_nvml::mig().destroy_compute(instance, reinterpret_cast<MigCompute*>(handle));
  fake_nvml::mig_devices_changed(static_cast<std::size_t>(gpu_index));
  return status;
}

}  // extern "C"

// The exports have exactly the types gpuhost calls them through.
#define FAKE_CHECK(function, type) static_assert(std::is_same_v<decltype(&function), type>, #function)
FAKE_CHECK(nvmlDeviceSetMigMode, nvmlDeviceSetMigMode_fn);
FAKE_CHECK(nvmlDeviceGetGpuInstanceProfileInfo, nvmlDeviceGetGpuInstanceProfileInfo_fn);
FAKE_CHECK(nvmlDeviceGetGpuInstanceProfileInfoV, nvmlDeviceGetGpuInstanceProfileInfoV_fn);
FAKE_CHECK(nvmlDeviceCreateGpuInstance, nvmlDeviceCreateGpuInstance_fn);
FAKE_CHECK(nvmlDeviceGetGpuInstances, nvmlDeviceGetGpuInstances_fn);
FAKE_CHECK(nvmlGpuInstanceGetInfo, nvmlGpuInstanceGetInfo_fn);
FAKE_CHECK(nvmlGpuInstanceDestroy, nvmlGpuInstanceDestroy_fn);
FAKE_CHECK(nvmlGpuInstanceGetComputeInstanceProfileInfo, nvmlGpuInstanceGetComputeInstanceProfileInfo_fn);
FAKE_CHECK(nvmlGpuInstanceCreateComputeInstance, nvmlGpuInstanceCreateComputeInstance_fn);
FAKE_CHECK(nvmlGpuInstanceGetComputeInstances, nvmlGpuInstanceGetComputeInstances_fn);
FAKE_CHECK(nvmlComputeInstanceDestroy, nvmlComputeInstanceDestroy_fn);
