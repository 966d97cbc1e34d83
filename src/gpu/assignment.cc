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
      out.devices.push_back({item, item});
      out.notes.push_back(
          item + " is passed on as given: gpuhost does not list MIG devices yet (nvidia-smi -L does)");
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

}  // namespace gpuhost::gpu
