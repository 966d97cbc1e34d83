#include "gpu/mig_manager.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "gpu/mig_devices.h"
#include "gpu/nvml_errors.h"

namespace gpuhost::gpu {

using namespace nvml;

namespace {

// Compute-instance profiles: NVML_COMPUTE_INSTANCE_PROFILE_{1,2,3,4,7,8,6}_SLICE are 0..6 and
// the slice count of each (nvml.h); 1_SLICE_REV1 (7) is a one-slice profile too.
constexpr unsigned k_ci_profile_slices[] = {1, 2, 3, 4, 7, 8, 6, 1};
// Compute-instance profile index for a GPU instance of N slices (its whole span).
std::optional<unsigned> ci_profile_for_slices(unsigned slices) {
  for (unsigned i = 0; i < 7; ++i)
    if (k_ci_profile_slices[i] == slices) return i;
  return std::nullopt;
}

// The attribute NVML_GPU_INSTANCE_PROFILE_* index `index` carries in a profile name: the REV1
// profiles have the media extensions (+me), 10..12 are GFX, 13..14 NO_ME, 15..16 ALL_ME (nvml.h).
const char* profile_attribute(unsigned index) {
  if (index == 7 || index == 8) return "+me";
  if (index >= 10 && index <= 12) return "+gfx";
  if (index == 13 || index == 14) return "-me";
  if (index == 15 || index == 16) return "+me.all";
  return "";
}

// A profile's name where the library has no nvmlDeviceGetGpuInstanceProfileInfoV: slices, then
// the memory as a share of the GPU's rounded up to eighths (MIG's memory slices) times the GPU's
// memory in GB, rounded up. This gives the names of NVIDIA's published profile tables (1g.10gb,
// 3g.40gb, 7g.80gb on an 80 GB A100; 1g.18gb, 3g.71gb, 7g.141gb on an H200).
std::string derived_profile_name(const nvmlGpuInstanceProfileInfo_t& info, std::uint64_t gpu_memory_mib,
                                 unsigned index) {
  std::uint64_t gb = (info.memorySizeMB + 1023) / 1024;
  if (gpu_memory_mib > 0) {
    const double eighths =
        std::ceil(static_cast<double>(info.memorySizeMB) * 8 / static_cast<double>(gpu_memory_mib) - 1e-9);
    gb = static_cast<std::uint64_t>(
        std::ceil(eighths / 8 * static_cast<double>(gpu_memory_mib) / 1024 - 1e-9));
  }
  return std::to_string(info.sliceCount) + "g." + std::to_string(gb) + "gb" + profile_attribute(index);
}

// The compute instances of GPU instance `gi`, each with its slice count (every compute-instance
// profile asked in turn); empty where the library lacks the calls.
std::vector<std::pair<nvmlComputeInstance_t, unsigned>> compute_instances(const NvmlFunctions& f,
                                                                          nvmlGpuInstance_t gi) {
  std::vector<std::pair<nvmlComputeInstance_t, unsigned>> out;
  if (!f.gpu_instance_get_compute_instance_profile_info || !f.gpu_instance_get_compute_instances) return out;
  for (unsigned c = 0; c < std::size(k_ci_profile_slices); ++c) {
    nvmlComputeInstanceProfileInfo_t ci{};
    if (f.gpu_instance_get_compute_instance_profile_info(gi, c, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
                                                         &ci) != NVML_SUCCESS)
      continue;
    std::vector<nvmlComputeInstance_t> list(std::max(ci.instanceCount, 1u) + 1);
    unsigned n = 0;
    if (f.gpu_instance_get_compute_instances(gi, ci.id, list.data(), &n) != NVML_SUCCESS) continue;
    for (unsigned k = 0; k < std::min<unsigned>(n, static_cast<unsigned>(list.size())); ++k)
      out.emplace_back(list[k], ci.sliceCount);
  }
  return out;
}

}  // namespace

std::vector<std::string> MigGpuInstance::layout_names(unsigned gi_slices) const {
  std::vector<std::string> out;
  for (unsigned c : compute_slices)
    out.push_back(c == gi_slices ? profile : std::to_string(c) + "c." + profile);
  return out;
}

const MigGpuProfile* MigGpu::profile(std::string_view wanted) const {
  for (const auto& p : profiles)
    if (p.name == wanted) return &p;
  return nullptr;
}

std::vector<std::string> MigGpu::layout() const {
  std::vector<std::string> out;
  for (const auto& gi : instances) {
    const MigGpuProfile* p = profile(gi.profile);
    for (auto& n : gi.layout_names(p ? p->slices : 0)) out.push_back(std::move(n));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string MigGpu::profile_names() const {
  std::string out;
  for (const auto& p : profiles) out += (out.empty() ? "" : ", ") + p.name;
  return out;
}

std::string MigManager::error_text(nvmlReturn_t status) const {
  return m_nvml.issue(status).message;
}

Result<nvmlDevice_t> MigManager::handle(unsigned index) const {
  const auto& f = m_nvml.functions();
  nvmlDevice_t device = nullptr;
  if (!f.device_get_handle_by_index) return make_error(ErrorCode::unavailable, "NVML lists no GPUs");
  if (nvmlReturn_t s = f.device_get_handle_by_index(index, &device); s != NVML_SUCCESS)
    return make_error(ErrorCode::not_found, "GPU " + std::to_string(index) + ": " + error_text(s));
  return device;
}

Result<std::vector<MigGpu>> MigManager::read() const {
  const auto& f = m_nvml.functions();
  unsigned count = 0;
  if (!f.device_get_count || f.device_get_count(&count) != NVML_SUCCESS)
    return make_error(ErrorCode::unavailable, "NVML could not count the GPUs");
  std::vector<MigGpu> gpus;
  for (unsigned index = 0; index < count; ++index) {
    const nvmlDevice_t device = GPUHOST_TRY(handle(index));
    MigGpu g;
    g.index = index;
    char text[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
    if (f.device_get_name && f.device_get_name(device, text, sizeof text) == NVML_SUCCESS) g.name = text;
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
    if (f.device_get_uuid && f.device_get_uuid(device, uuid, sizeof uuid) == NVML_SUCCESS) g.uuid = uuid;
    nvmlPciInfo_t pci{};
    if (f.device_get_pci_info && f.pci_info_version >= 2 &&
        f.device_get_pci_info(device, &pci) == NVML_SUCCESS) {
      g.pci_device_id = pci.pciDeviceId;
      g.pci_subsystem_id = pci.pciSubSystemId;
    }
    MemoryState memory;
    const std::uint64_t memory_mib =
        read_memory_state(f, device, memory) == NVML_SUCCESS ? memory.total_bytes / (1024 * 1024) : 0;
    unsigned current = 0, pending = 0;
    g.mig_capable =
        f.device_get_mig_mode && f.device_get_mig_mode(device, &current, &pending) == NVML_SUCCESS;
    g.current = g.mig_capable && current == NVML_DEVICE_MIG_ENABLE;
    g.pending = g.mig_capable && pending == NVML_DEVICE_MIG_ENABLE;
    g.compute_pids = read_compute_pids(f, device);
    if (g.mig_capable && f.device_get_gpu_instance_profile_info) {
      for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; ++p) {
        nvmlGpuInstanceProfileInfo_t info{};
        if (f.device_get_gpu_instance_profile_info(device, p, &info) != NVML_SUCCESS) continue;
        MigGpuProfile profile{p,
                              info.id,
                              derived_profile_name(info, memory_mib, p),
                              info.sliceCount,
                              info.instanceCount,
                              info.memorySizeMB,
                              info.multiprocessorCount};
        nvmlGpuInstanceProfileInfo_v2_t v2{};
        v2.version = nvmlGpuInstanceProfileInfo_v2;
        if (f.device_get_gpu_instance_profile_info_v &&
            f.device_get_gpu_instance_profile_info_v(device, p, &v2) == NVML_SUCCESS && v2.name[0]) {
          std::string name(v2.name, strnlen(v2.name, sizeof v2.name));
          if (name.starts_with("MIG ")) name.erase(0, 4);
          profile.name = name;
        }
        g.profiles.push_back(std::move(profile));
      }
    }
    if (g.current && f.device_get_gpu_instances && f.gpu_instance_get_info) {
      for (const auto& p : g.profiles) {
        std::vector<nvmlGpuInstance_t> list(std::max(p.instances, 1u) + 1);
        unsigned n = 0;
        if (f.device_get_gpu_instances(device, p.id, list.data(), &n) != NVML_SUCCESS) continue;
        for (unsigned i = 0; i < std::min<unsigned>(n, static_cast<unsigned>(list.size())); ++i) {
          nvmlGpuInstanceInfo_t info{};
          if (f.gpu_instance_get_info(list[i], &info) != NVML_SUCCESS) continue;
          MigGpuInstance gi{info.id, p.name, info.placement.start, info.placement.size, {}};
          for (const auto& ci : compute_instances(f, list[i])) gi.compute_slices.push_back(ci.second);
          g.instances.push_back(std::move(gi));
        }
      }
      std::sort(g.instances.begin(), g.instances.end(),
                [](const MigGpuInstance& a, const MigGpuInstance& b) { return a.start < b.start; });
      // Processes on the MIG devices (a GPU in MIG mode lists none of its own).
      if (f.device_get_max_mig_device_count && f.device_get_mig_device_handle_by_index) {
        unsigned slots = 0;
        if (f.device_get_max_mig_device_count(device, &slots) == NVML_SUCCESS)
          for (unsigned s = 0; s < std::min(slots, 64u); ++s) {
            nvmlDevice_t mig = nullptr;
            if (f.device_get_mig_device_handle_by_index(device, s, &mig) != NVML_SUCCESS) continue;
            for (unsigned pid : read_compute_pids(f, mig))
              if (std::find(g.compute_pids.begin(), g.compute_pids.end(), pid) == g.compute_pids.end())
                g.compute_pids.push_back(pid);
          }
      }
    }
    gpus.push_back(std::move(g));
  }
  return gpus;
}

Result<MigModeChange> MigManager::set_mode(unsigned index, bool enabled) const {
  const auto& f = m_nvml.functions();
  if (!f.device_set_mig_mode)
    return make_error(ErrorCode::unavailable,
                      "this NVML has no nvmlDeviceSetMigMode (MIG needs driver R450 or later)");
  const nvmlDevice_t device = GPUHOST_TRY(handle(index));
  MigModeChange change;
  change.activation = NVML_SUCCESS;
  change.status = f.device_set_mig_mode(device, enabled ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE,
                                        &change.activation);
  return change;
}

Result<void> MigManager::clear(unsigned index) const {
  const auto& f = m_nvml.functions();
  if (!f.device_get_gpu_instances || !f.gpu_instance_destroy || !f.compute_instance_destroy ||
      !f.gpu_instance_get_compute_instance_profile_info || !f.gpu_instance_get_compute_instances)
    return make_error(ErrorCode::unavailable,
                      "this NVML lacks the MIG instance calls (driver R450 or later)");
  const nvmlDevice_t device = GPUHOST_TRY(handle(index));
  for (unsigned p = 0; p < NVML_GPU_INSTANCE_PROFILE_COUNT; ++p) {
    nvmlGpuInstanceProfileInfo_t info{};
    if (!f.device_get_gpu_instance_profile_info ||
        f.device_get_gpu_instance_profile_info(device, p, &info) != NVML_SUCCESS)
      continue;
    std::vector<nvmlGpuInstance_t> list(std::max(info.instanceCount, 1u) + 1);
    unsigned n = 0;
    if (f.device_get_gpu_instances(device, info.id, list.data(), &n) != NVML_SUCCESS) continue;
    for (unsigned i = 0; i < std::min<unsigned>(n, static_cast<unsigned>(list.size())); ++i) {
      // Compute instances first: a GPU instance that still has one cannot be destroyed.
      for (const auto& ci : compute_instances(f, list[i]))
        if (nvmlReturn_t s = f.compute_instance_destroy(ci.first); s != NVML_SUCCESS)
          return make_error(ErrorCode::io_error, "GPU " + std::to_string(index) +
                                                     ": destroying a compute instance: " + error_text(s));
      if (nvmlReturn_t s = f.gpu_instance_destroy(list[i]); s != NVML_SUCCESS)
        return make_error(ErrorCode::io_error,
                          "GPU " + std::to_string(index) + ": destroying a GPU instance: " + error_text(s));
    }
  }
  return {};
}

Result<bool> MigManager::place(unsigned index, std::vector<const MigGpuProfile*> order, bool clear_first,
                               std::string& last_error) const {
  const auto& f = m_nvml.functions();
  const nvmlDevice_t device = GPUHOST_TRY(handle(index));
  std::vector<std::string> want_sorted;
  for (const auto* p : order) want_sorted.push_back(p->name);
  std::sort(want_sorted.begin(), want_sorted.end());
  // Distinct orders only: sorting by name and next_permutation skip repeats of equal profiles.
  const auto by_name = [](const MigGpuProfile* a, const MigGpuProfile* b) { return a->name < b->name; };
  std::sort(order.begin(), order.end(), by_name);
  bool first = true;
  do {
    if (!first || clear_first) GPUHOST_TRY_VOID(clear(index));
    first = false;
    bool fits = true;
    for (const MigGpuProfile* p : order) {
      nvmlGpuInstance_t gi = nullptr;
      nvmlReturn_t s = f.device_create_gpu_instance(device, p->id, &gi);
      if (s == NVML_ERROR_INSUFFICIENT_RESOURCES) {
        last_error = "no free placement for " + p->name;
        fits = false;
        break;
      }
      if (s != NVML_SUCCESS)
        return make_error(ErrorCode::io_error, "GPU " + std::to_string(index) + ": creating a " + p->name +
                                                   " instance: " + error_text(s));
      const auto ci_profile = ci_profile_for_slices(p->slices);
      nvmlComputeInstanceProfileInfo_t ci{};
      s = ci_profile ? f.gpu_instance_get_compute_instance_profile_info(
                           gi, *ci_profile, NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, &ci)
                     : NVML_ERROR_NOT_SUPPORTED;
      nvmlComputeInstance_t compute = nullptr;
      if (s == NVML_SUCCESS) s = f.gpu_instance_create_compute_instance(gi, ci.id, &compute);
      if (s != NVML_SUCCESS)
        return make_error(ErrorCode::io_error, "GPU " + std::to_string(index) +
                                                   ": creating the compute instance of a " + p->name +
                                                   " instance: " + error_text(s));
    }
    if (fits) {
      const auto after = GPUHOST_TRY(read());
      if (after[index].layout() == want_sorted) return true;
      last_error = "NVML reports another layout after creating it";
    }
  } while (std::next_permutation(order.begin(), order.end(), by_name));
  return false;
}

Result<void> MigManager::apply_layout(unsigned index, const std::vector<std::string>& wanted) const {
  const auto& f = m_nvml.functions();
  if (!f.device_create_gpu_instance || !f.gpu_instance_create_compute_instance)
    return make_error(ErrorCode::unavailable,
                      "this NVML lacks nvmlDeviceCreateGpuInstance (driver R450 or later)");
  const auto gpus = GPUHOST_TRY(read());
  if (index >= gpus.size()) return make_error(ErrorCode::not_found, "no GPU " + std::to_string(index));
  const MigGpu& gpu = gpus[index];
  const std::string who = "GPU " + std::to_string(index) + " (" + gpu.name + ")";
  std::vector<const MigGpuProfile*> order, before;
  for (const auto& name : wanted) {
    const MigGpuProfile* p = gpu.profile(name);
    if (!p)
      return make_error(ErrorCode::invalid_argument,
                        who + " has no MIG profile " + name + "; it has " + gpu.profile_names());
    order.push_back(p);
  }
  // What the GPU holds now, to put back if the new layout fits in no order (whole GPU instances
  // only: a finer layout is not rebuilt).
  bool restorable = true;
  for (const auto& gi : gpu.instances) {
    const MigGpuProfile* p = gpu.profile(gi.profile);
    restorable = restorable && p && gi.compute_slices.size() == 1 && gi.compute_slices[0] == p->slices;
    if (p) before.push_back(p);
  }
  std::string last_error = "no order was tried";
  auto placed = place(index, order, !gpu.instances.empty(), last_error);
  if (!placed) {
    (void)clear(index);
    return std::unexpected(with_context(placed.error(), "the GPU is left without instances"));
  }
  if (*placed) return {};
  std::string outcome = "the GPU is left without instances";
  if (restorable && !before.empty()) {
    std::string unused;
    auto back = place(index, before, true, unused);
    if (back && *back)
      outcome = "its previous instances were made again (with new MIG UUIDs)";
    else
      (void)clear(index);
  } else {
    (void)clear(index);
  }
  return make_error(ErrorCode::invalid_argument,
                    who + ": the layout fits in no creation order (" + last_error + "); " + outcome);
}

}  // namespace gpuhost::gpu
