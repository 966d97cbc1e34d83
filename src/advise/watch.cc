#include "advise/watch.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <utility>

#include "advise/observe.h"
#include "base/strings.h"
#include "platform/process_info.h"

namespace gpuhost::advise {

namespace {

HostReadings host_readings(const platform::GroupActivity& group) {
  return HostReadings{group, platform::swapped_in_pages(), platform::pressure_some_avg10("io"),
                      platform::pressure_some_avg10("cpu")};
}

// Sleeps until `when`; false when `stop` was requested first.
bool sleep_until(std::chrono::steady_clock::time_point when, const std::stop_token& stop) {
  std::mutex mutex;
  std::condition_variable_any wake;
  std::unique_lock lock(mutex);
  return !wake.wait_until(lock, stop, when, [] { return false; }) && !stop.stop_requested();
}

// The MIG device of `device` whose UUID is `entry`, or nullptr.
const gpu::MigDevice* mig_slice(const gpu::GpuDevice& device, std::string_view entry) {
  if (!device.mig_devices.value) return nullptr;
  for (const auto& m : *device.mig_devices.value)
    if (m.uuid == entry) return &m;
  return nullptr;
}

bool names_device(const gpu::GpuDevice& device, std::string_view entry) {
  if (entry == device.uuid || mig_slice(device, entry)) return true;
  auto index = parse_int(entry);
  return index && *index >= 0 && static_cast<unsigned>(*index) == device.index;
}

// A job on a MIG slice sees the slice: its memory and, on Hopper and later, its GPU instance's
// GPM activity. NVML gives no utilisation per slice (NOT_SUPPORTED in MIG mode) and clock and
// power readings for the whole GPU only, so those stay the GPU's.
void narrow_to_slice(gpu::GpuDevice& device, const gpu::MigDevice& slice) {
  device.name += " (MIG " + slice.profile + ")";
  device.memory = {};
  if (slice.memory)
    device.memory.value = slice.memory;
  else
    device.memory.issue =
        gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "NVML gave no memory for this MIG slice"};
  device.gpm = slice.gpm;
}

}  // namespace

std::vector<std::string> split_visible_devices(std::string_view value) {
  std::vector<std::string> entries;
  for (const auto& part : split(value, ',')) {
    std::string entry(trim(part));
    if (!entry.empty()) entries.push_back(std::move(entry));
  }
  return entries;
}

void keep_visible_devices(gpu::GpuSnapshot& snapshot, const std::vector<std::string>& visible) {
  if (visible.empty()) return;
  for (const auto& entry : visible)
    if (std::none_of(snapshot.devices.begin(), snapshot.devices.end(),
                     [&](const gpu::GpuDevice& d) { return names_device(d, entry); }))
      return;
  std::erase_if(snapshot.devices, [&](const gpu::GpuDevice& d) {
    return std::none_of(visible.begin(), visible.end(),
                        [&](const std::string& e) { return names_device(d, e); });
  });
  // CUDA shows a process one MIG device at most (run --gpu refuses more).
  if (visible.size() != 1) return;
  for (gpu::GpuDevice& d : snapshot.devices)
    if (const gpu::MigDevice* slice = mig_slice(d, visible.front())) narrow_to_slice(d, *slice);
}

Result<Watched> watch(const WatchOptions& options, gpu::NvmlSession& session, std::stop_token stop) {
  if (stop.stop_requested()) return make_error(ErrorCode::unavailable, "the watch was stopped");
  Watched result;
  result.observation.local_processes = options.local_processes;
  auto before = platform::read_group_activity(options.group);
  if (!before && before.error().code == ErrorCode::not_found)
    return make_error(ErrorCode::not_found,
                      "the trainer (process group " + std::to_string(options.group) + ") has ended");
  const HostReadings start = before ? host_readings(*before) : HostReadings{};
  const auto began = std::chrono::steady_clock::now();
  const auto until = began + options.window;
  std::vector<gpu::GpuSnapshot> samples;
  for (auto next = began; next < until; next += options.sample_interval) {
    if (!sleep_until(next, stop)) return make_error(ErrorCode::unavailable, "the watch was stopped");
    gpu::GpuSnapshot snapshot = session.collect();
    if (!snapshot.available && result.gpu_unseen.empty())
      result.gpu_unseen =
          snapshot.error ? "NVML: " + snapshot.error->message : std::string("NVML is not available");
    keep_visible_devices(snapshot, options.visible_devices);
    samples.push_back(std::move(snapshot));
  }
  if (!sleep_until(until, stop)) return make_error(ErrorCode::unavailable, "the watch was stopped");
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  result.observation.gpus = summarize_gpus(samples);
  if (before) {
    auto after = platform::read_group_activity(options.group);
    if (!after) return make_error(ErrorCode::not_found, "the trainer ended while it was watched");
    result.observation.host =
        summarize_host(start, host_readings(*after), result.seconds, std::thread::hardware_concurrency());
  } else {
    result.observation.host_unseen = before.error().message;
  }
  return result;
}

}  // namespace gpuhost::advise
