#include "gpu/assignment.h"

#include <algorithm>

#include "base/strings.h"

namespace gpuhost::gpu {

std::string GpuAssignment::visible_devices() const {
  std::string out;
  for (const Device& d : devices) out += (out.empty() ? "" : ",") + d.uuid;
  return out;
}

namespace {

std::unexpected<Error> refuse(std::string message) {
  return make_error(ErrorCode::invalid_argument, std::move(message));
}

std::string label(const GpuDevice& d) {
  return "GPU " + std::to_string(d.index) + " (" + d.name + ")";
}

std::string host_gpus(const GpuSnapshot& snapshot) {
  if (snapshot.devices.empty()) return "this host has no GPU NVML can see";
  return "this host has GPU 0-" + std::to_string(snapshot.devices.size() - 1) + " (nvidia-smi -L lists them)";
}

// "MIG 3g.40gb on GPU 0 (instance 2)" for a MIG device the snapshot lists; nullopt when no GPU
// in MIG mode could list its devices; refused, naming the ones there are, when none has that UUID.
Result<std::optional<std::string>> find_mig_device(const GpuSnapshot& snapshot, const std::string& uuid) {
  bool listed = false;
  std::string known;
  for (const GpuDevice& d : snapshot.devices) {
    if (!d.mig_devices.value) continue;
    listed = true;
    for (const MigDevice& m : *d.mig_devices.value) {
      const std::string where =
          "MIG " + (m.profile.empty() ? m.name : m.profile) + " on GPU " + std::to_string(d.index) +
          (m.gpu_instance_id ? " (instance " + std::to_string(*m.gpu_instance_id) + ")" : "");
      if (m.uuid == uuid) return std::optional<std::string>(where);
      known += (known.empty() ? "" : ", ") + m.uuid + " (" + where + ")";
    }
  }
  if (!listed) return std::optional<std::string>();
  return refuse(
      "--gpu " + uuid + ": no MIG device with that UUID; " +
      (known.empty()
           ? "the GPUs in MIG mode have no MIG device yet (create them with nvidia-smi mig -cgi ... -C)"
           : "this host has " + known));
}

}  // namespace

Result<GpuAssignment> assign_gpus(std::string_view spec, const GpuSnapshot& snapshot, bool windows) {
  GpuAssignment out;
  const std::vector<std::string> items = split(spec, ',');
  const auto mig = std::count_if(items.begin(), items.end(),
                                 [](const std::string& item) { return trim(item).starts_with("MIG-"); });
  if (mig > 1 || (mig == 1 && items.size() > 1))
    return refuse(
        "--gpu '" + std::string(spec) +
        "': a CUDA process sees one MIG device only (NVIDIA's MIG user guide), so one job gets one slice and "
        "DDP across slices cannot work; run one job per slice");
  for (const std::string& raw : items) {
    const std::string item(trim(raw));
    if (item.empty()) return refuse("--gpu '" + std::string(spec) + "' has an empty entry");
    if (item.starts_with("MIG-")) {
      if (windows)
        return refuse(
            "--gpu " + item +
            ": MIG is supported on Linux only (NVIDIA's MIG user guide); on Windows "
            "Server, Hyper-V GPU partitioning (Set-VMHostPartitionableGpu) is the way to share a GPU");
      if (snapshot.available &&
          std::none_of(snapshot.devices.begin(), snapshot.devices.end(),
                       [](const GpuDevice& d) { return d.mig.has_value() && (*d.mig).current; }))
        return refuse("--gpu " + item +
                      ": no GPU of this host has MIG mode on (gpuhost doctor shows the MIG state)");
      GpuAssignment::Device chosen{item, item};
      if (auto listed = find_mig_device(snapshot, item); !listed) {
        return std::unexpected(std::move(listed.error()));
      } else if (*listed) {
        chosen.label = **listed;
      } else {
        out.notes.push_back(item + " is not checked: NVML could not list this host's MIG devices");
      }
      out.devices.push_back(std::move(chosen));
      continue;
    }
    const GpuDevice* found = nullptr;
    if (item.starts_with("GPU-")) {
      for (const GpuDevice& d : snapshot.devices)
        if (d.uuid == item) found = &d;
      if (!found && snapshot.available)
        return refuse("--gpu " + item + ": no GPU with that UUID; " + host_gpus(snapshot));
      if (!found) {
        out.devices.push_back({item, item});
        out.notes.push_back(item + " is not checked: NVML cannot be read here");
        continue;
      }
    } else {
      const auto index = parse_int(item);
      if (!index || *index < 0)
        return refuse("--gpu expects GPU indices (0,1), GPU-<uuid> or MIG-<uuid>, got '" + item + "'");
      if (!snapshot.available)
        return refuse("--gpu " + item + ": GPU indices need NVML, which cannot be read here" +
                      (snapshot.error ? " (" + snapshot.error->message + ")" : std::string()) +
                      "; give the GPU's UUID (nvidia-smi -L), or see gpuhost doctor");
      for (const GpuDevice& d : snapshot.devices)
        if (static_cast<long long>(d.index) == *index) found = &d;
      if (!found) return refuse("--gpu " + item + ": no such GPU; " + host_gpus(snapshot));
      if (found->uuid.empty()) return refuse("--gpu " + item + ": NVML gave no UUID for " + label(*found));
    }
    for (const auto& d : out.devices)
      if (d.uuid == found->uuid) return refuse("--gpu names " + label(*found) + " twice");
    out.devices.push_back({found->uuid, label(*found)});
  }
  return out;
}

Result<std::vector<GpuAssignment::Device>> free_mig_slices(std::string_view profile,
                                                           const GpuSnapshot& snapshot, bool windows) {
  const std::string wanted(trim(profile));
  if (windows)
    return refuse("--gpu mig:" + wanted +
                  ": MIG is supported on Linux only (NVIDIA); on a Windows host use Hyper-V GPU partitioning "
                  "or a whole GPU");
  if (wanted.empty())
    return refuse("--gpu mig: needs a profile, such as mig:3g.40gb (gpuhost mig list shows them)");
  std::vector<GpuAssignment::Device> out;
  std::vector<std::string> profiles, busy;
  for (const GpuDevice& d : snapshot.devices) {
    if (!d.mig_devices.value) continue;
    for (const MigDevice& m : *d.mig_devices.value) {
      if (std::find(profiles.begin(), profiles.end(), m.profile) == profiles.end())
        profiles.push_back(m.profile);
      if (m.profile != wanted) continue;
      const std::string where =
          "MIG " + m.profile + " on GPU " + std::to_string(d.index) +
          (m.gpu_instance_id ? " (instance " + std::to_string(*m.gpu_instance_id) + ")" : "");
      if (!m.compute_pids.empty()) {
        std::string pids;
        for (unsigned pid : m.compute_pids) pids += (pids.empty() ? "" : " ") + std::to_string(pid);
        busy.push_back(m.uuid + " (PID " + pids + ")");
        continue;
      }
      out.push_back({m.uuid, where});
    }
  }
  if (!out.empty()) return out;
  if (!busy.empty()) {
    std::string list;
    for (const auto& b : busy) list += (list.empty() ? "" : ", ") + b;
    return refuse("--gpu mig:" + wanted + ": every " + wanted + " slice has a process on it: " + list +
                  "; wait for one to end, or make more with gpuhost mig apply");
  }
  if (profiles.empty())
    return refuse("--gpu mig:" + wanted +
                  ": this host has no MIG slice (no GPU in MIG mode with instances); create them with "
                  "gpuhost mig apply");
  std::string names;
  for (const auto& p : profiles) names += (names.empty() ? "" : ", ") + p;
  return refuse("--gpu mig:" + wanted + ": no slice of that profile; this host has " + names);
}

}  // namespace gpuhost::gpu
