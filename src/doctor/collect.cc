#include "doctor/collect.h"

#include <chrono>
#include <filesystem>
#include <thread>

#include "base/time_format.h"
#include "gpu/collector.h"
#include "platform/environment.h"
#include "platform/files.h"

#ifndef GPUHOST_VERSION
#define GPUHOST_VERSION "0.0.0"
#endif

namespace gpuhost::doctor {

namespace {

DiskFacts disk_facts(std::string role, const std::filesystem::path& path) {
  DiskFacts d;
  d.role = std::move(role);
  d.path = path.string();
  auto space = platform::disk_space(path);
  if (space) {
    d.capacity_bytes = space->capacity_bytes;
    d.available_bytes = space->available_bytes;
  } else {
    d.error = space.error().message;
  }
  return d;
}

// Variables worth keeping in a report: what steers CUDA, NVIDIA libraries and the frameworks.
bool interesting_variable(const std::string& name) {
  static const char* prefixes[] = {"CUDA", "NVIDIA", "NCCL", "PYTORCH", "TORCH", "TF_", "LD_LIBRARY_PATH",
                                   "CONDA_PREFIX", "VIRTUAL_ENV", "OMP_NUM_THREADS", "XLA_"};
  for (const char* p : prefixes)
    if (name.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace

HostFacts collect_facts(const CollectOptions& options) {
  HostFacts facts;
  facts.collected_at = format_rfc3339_utc(std::chrono::system_clock::now());
  facts.gpuhost_version = GPUHOST_VERSION;

  facts.system = platform::collect_system_info();
  if (options.progress) options.progress("reading GPUs through NVML");
  facts.gpu = gpu::take_snapshot();
  collect_os_settings(facts);

  // Python interpreters take up to seconds (importing frameworks); the rest takes milliseconds,
  // so the probes start as soon as it is known whether this is a GPU host, and run beside the rest.
  bool gpu_host = !facts.gpu.devices.empty();
  for (const auto& d : facts.linux.pci_display_devices) gpu_host |= d.vendor_id == 0x10de;
  for (const auto& d : facts.windows_devices.display_devices) gpu_host |= d.vendor_id == 0x10de;
  std::thread python_thread;
  if (options.probe_python) {
    python_thread = std::thread([&facts, &options, gpu_host] { collect_pythons(facts, options, gpu_host); });
  } else {
    facts.python_skipped = true;
  }

  std::error_code ec;
  std::filesystem::path cwd =
      options.working_directory.empty() ? std::filesystem::current_path(ec) : std::filesystem::path(options.working_directory);
  facts.disks.push_back(disk_facts("working directory", cwd));
  facts.disks.push_back(disk_facts("temp directory", std::filesystem::temp_directory_path(ec)));
  collect_cuda(facts);
  collect_security(facts);
  for (auto& [name, value] : platform::environment())
    if (interesting_variable(name)) facts.environment.emplace_back(name, value);

  if (python_thread.joinable()) python_thread.join();
  return facts;
}

std::vector<std::string> xid_lines(std::string_view kernel_log) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < kernel_log.size()) {
    std::size_t end = kernel_log.find('\n', start);
    if (end == std::string_view::npos) end = kernel_log.size();
    std::string_view line = kernel_log.substr(start, end - start);
    if (line.find("NVRM: Xid") != std::string_view::npos) out.emplace_back(line);
    start = end + 1;
  }
  return out;
}

}  // namespace gpuhost::doctor
