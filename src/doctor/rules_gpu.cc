#include <map>
#include <set>

#include "base/strings.h"
#include "doctor/rules.h"
#include "doctor/rules_support.h"
#include "gpu/nvml_errors.h"
#include "knowledge/knowledge.h"

namespace gpuhost::doctor {

namespace {

// NVML return codes (nvml.h) the rules branch on.
constexpr int k_nvml_no_permission = 4;
constexpr int k_nvml_driver_not_loaded = 9;
constexpr int k_nvml_library_not_found = 12;
constexpr int k_nvml_function_not_found = 13;
constexpr int k_nvml_gpu_is_lost = 15;
constexpr int k_nvml_lib_rm_version_mismatch = 18;

// DCGM limits (repo NVIDIA/DCGM common/DcgmGPUHardwareLimits.h).
constexpr unsigned k_max_retired_pages = 63;
constexpr unsigned k_soft_retired_pages = 15;
constexpr unsigned k_max_row_remap_uncorrectable = 512;

// Xids DCGM treats as devastating on any watch (DcgmHealthWatch::BuildXidMappings, research/01 §1.4).
const std::set<int> k_devastating_xids = {48, 74, 79, 95, 119, 120, 140};

bool has_nvidia_pci(const HostFacts& facts) {
  for (const auto& d : facts.linux.pci_display_devices)
    if (d.vendor_id == 0x10de) return true;
  for (const auto& d : facts.windows_devices.display_devices)
    if (d.vendor_id == 0x10de) return true;
  return false;
}

std::string gpu_subject(const gpu::GpuDevice& d) {
  std::string s = "GPU " + std::to_string(d.index);
  if (!d.name.empty()) s += " (" + d.name + ")";
  return s;
}

std::string issue_text(const gpu::NvmlIssue& issue) { return issue.name + ": " + issue.message; }

std::string reset_gpu_fix(const HostFacts& facts, unsigned index) {
  if (facts.is_windows())
    return "stop every process using the GPU, then restart the machine (a GPU reset needs TCC/MCDM: nvidia-smi -i " +
           std::to_string(index) + " -r)";
  return "stop every process using the GPU, then: sudo nvidia-smi -i " + std::to_string(index) +
         " -r   (or reboot; on a cloud VM a stop/start also works)";
}

void judge_library(const HostFacts& facts, Findings& out) {
  const auto& g = facts.gpu;
  bool windows = facts.is_windows();
  if (!g.available) {
    int status = g.error ? g.error->status : k_nvml_library_not_found;
    std::string seen = g.error ? issue_text(*g.error) : "NVML not loaded";
    if (status == k_nvml_library_not_found) {
      bool pci = has_nvidia_pci(facts);
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.driver.missing",
                        pci ? "NVIDIA GPU present but no NVIDIA driver installed" : "No NVIDIA driver (and no NVIDIA GPU visible)");
      f.evidence.push_back(seen);
      f.evidence.push_back(windows ? "nvml.dll not found in System32 or NVSMI" : "libnvidia-ml.so.1 not found by the loader");
      if (!pci) {
        f.evidence.push_back(windows ? "no display adapter with vendor 10DE in Device Manager"
                                     : "no PCI device with vendor 0x10de under /sys/bus/pci/devices");
        f.fix = "this host has no NVIDIA GPU attached: pick a GPU instance type (or attach the GPU); once it is "
                "there, install the driver: " + driver_install_fix(facts);
      } else {
        f.fix = driver_install_fix(facts);
      }
      f.reference = "https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/";
      return;
    }
    if (status == k_nvml_lib_rm_version_mismatch) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.driver.version_mismatch",
                        "NVIDIA kernel module and user-space library versions differ");
      f.evidence.push_back(seen);
      f.evidence.push_back("typical after a driver upgrade without a reboot");
      f.fix = windows ? "restart Windows so the new driver is loaded"
                      : "reboot; or, with no GPU process running: sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia";
      return;
    }
    if (status == k_nvml_driver_not_loaded) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.driver.not_loaded", "NVIDIA driver installed but not running");
      f.evidence.push_back(seen);
      f.fix = windows ? "reinstall the NVIDIA driver (clean install) and restart; check Device Manager for the GPU's status"
                      : "sudo modprobe nvidia; if that fails, read 'sudo dmesg | grep -i nvidia' (Secure Boot may block an "
                        "unsigned module: check 'mokutil --sb-state' and enrol the key or use signed modules), then "
                        "reinstall the driver for the running kernel: " + driver_install_fix(facts);
      return;
    }
    if (status == k_nvml_no_permission) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.driver.no_permission", "No permission to use the GPU");
      f.evidence.push_back(seen);
      f.fix = windows ? "run from an account allowed to use the GPU" : "ls -l /dev/nvidia*; add the user to the group owning them "
                                                                       "(sudo usermod -aG video $USER) or run in a container started with --gpus all";
      return;
    }
    auto& f = out.add(Layer::gpu, Severity::fail, "gpu.driver.init_failed", "NVML could not start");
    f.evidence.push_back(seen);
    if (!g.library_path.empty()) f.evidence.push_back("library " + g.library_path);
    f.fix = "reinstall the NVIDIA driver: " + driver_install_fix(facts);
    return;
  }

  {
    auto& f = out.add(Layer::gpu, Severity::ok, "gpu.driver", "NVIDIA driver " + g.driver_version);
    f.evidence.push_back("driver " + g.driver_version + ", NVML " + g.nvml_version);
    if (g.cuda_driver_version)
      f.evidence.push_back("supports CUDA up to " + std::to_string(*g.cuda_driver_version / 1000) + "." +
                           std::to_string((*g.cuda_driver_version % 1000) / 10));
    f.evidence.push_back(std::to_string(g.devices.size()) + " GPU(s); library " + g.library_path);
  }
  if (g.cuda_driver_error && g.cuda_driver_error->status == k_nvml_library_not_found) {
    auto& f = out.add(Layer::gpu, Severity::fail, "gpu.libcuda.missing", "The CUDA driver library (libcuda) is missing");
    f.evidence.push_back("nvmlSystemGetCudaDriverVersion_v2: " + issue_text(*g.cuda_driver_error));
    f.fix = windows ? "reinstall the NVIDIA driver (nvcuda.dll comes with it)"
                    : "install the driver's compute library (Debian: libcuda1; Ubuntu: libnvidia-compute-<branch>), or in a "
                      "container start it with --gpus all / the NVIDIA container toolkit";
  }
  // GPM (nvmlGpm*, the profiling counters gpuhost serve exports on Hopper and later) arrived
  // with the R520 drivers (NVML API reference, "GPM Methods"); an older driver lacking them is
  // not a broken one: serve lists those metrics as unavailable instead.
  std::vector<std::string> missing;
  for (const auto& name : g.missing_symbols)
    if (!name.starts_with("nvmlGpm")) missing.push_back(name);
  if (!missing.empty()) {
    auto& f = out.add(Layer::gpu, Severity::warn, "gpu.nvml.missing_functions",
                      "The NVML library lacks functions gpuhost uses (old or partial driver)");
    f.evidence.push_back(join(missing, ", "));
    f.fix = "update the NVIDIA driver: " + driver_install_fix(facts);
  }
  if (g.count_error) {
    auto& f = out.add(Layer::gpu, Severity::fail, "gpu.enumeration", "NVML could not count the GPUs");
    f.evidence.push_back(issue_text(*g.count_error));
    f.fix = "reboot; if it persists, reinstall the driver: " + driver_install_fix(facts);
  } else if (g.devices.empty()) {
    auto& f = out.add(Layer::gpu, Severity::fail, "gpu.none", "The driver is loaded but sees no GPU");
    f.evidence.push_back("nvmlDeviceGetCount returned 0");
    f.fix = facts.is_windows() ? "check Device Manager for the GPU (a problem code, or disabled)"
                               : "check 'lspci -d 10de:' and 'sudo dmesg | grep -i nvidia'; a GPU bound to vfio-pci or nouveau is not the driver's";
  }
}

void judge_identity(const HostFacts& facts, const knowledge::Knowledge& knowledge, const gpu::GpuDevice& d,
                    Findings& out) {
  std::string subject = gpu_subject(d);
  auto match = knowledge.gpus.match(d.name);
  auto cc = compute_capability(d, knowledge);
  {
    auto& f = out.add(Layer::gpu, Severity::info, "gpu.identity", d.name.empty() ? "GPU" : d.name);
    f.subject = subject;
    std::string line = d.pci_bus_id.empty() ? std::string() : "bus " + d.pci_bus_id;
    if (d.memory.has_value()) line += (line.empty() ? "" : ", ") + format_bytes(static_cast<double>(d.memory.value->total_bytes));
    if (!line.empty()) f.evidence.push_back(line);
    if (cc) {
      std::string arch = match ? match->model->architecture : std::string();
      f.evidence.push_back("compute capability " + cc->str() + (arch.empty() ? "" : " (" + arch + ")") +
                           (d.cc_major.has_value() ? "" : ", from gpuhost's GPU table"));
    }
    if (!d.uuid.empty()) f.evidence.push_back(d.uuid);
    if (!d.vbios_version.empty()) f.evidence.push_back("VBIOS " + d.vbios_version);
    if (match && d.cc_major.has_value() && match->model->compute_capability != *cc)
      f.evidence.push_back("note: gpuhost's table lists " + match->model->compute_capability.str() + " for this name");
  }
  auto driver = driver_version(facts);
  if (cc && driver) {
    if (auto needed = knowledge::min_driver_for_compute_capability(knowledge, *cc, knowledge_os(facts));
        needed && *driver < *needed) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.driver.too_old_for_gpu", "Driver too old for this GPU's architecture");
      f.subject = subject;
      f.evidence.push_back("driver " + driver->str() + "; compute capability " + cc->str() + " needs at least " + needed->str());
      f.fix = "install driver " + needed->str() + " or newer: " + driver_install_fix(facts);
      f.reference = "https://docs.nvidia.com/datacenter/tesla/drivers/cuda-toolkit-driver-and-architecture-matrix.html";
    }
  }
}

void judge_ecc_and_memory(const HostFacts& facts, const gpu::GpuDevice& d, Findings& out) {
  std::string subject = gpu_subject(d);
  if (d.remapped_rows.has_value()) {
    const auto& rr = *d.remapped_rows;
    if (rr.failure) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.row_remap.failure", "Row remapping failed: memory cannot be repaired");
      f.subject = subject;
      f.evidence.push_back("remapping failure flag set; " + std::to_string(rr.uncorrectable) + " uncorrectable rows remapped");
      f.fix = "retire this GPU: on a cloud VM stop/start the instance to move to other hardware and report it to the "
              "provider; on your own hardware open an RMA with the vendor";
    } else if (rr.pending) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.row_remap.pending", "Row remapping pending: GPU needs a reset");
      f.subject = subject;
      f.evidence.push_back("pending remap; " + std::to_string(rr.correctable) + " correctable and " +
                           std::to_string(rr.uncorrectable) + " uncorrectable rows remapped so far");
      f.fix = reset_gpu_fix(facts, d.index);
      f.reference = "https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/";
    } else if (rr.uncorrectable >= k_max_row_remap_uncorrectable) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.row_remap.limit", "Too many uncorrectable rows remapped");
      f.subject = subject;
      f.evidence.push_back(std::to_string(rr.uncorrectable) + " uncorrectable (DCGM limit " +
                           std::to_string(k_max_row_remap_uncorrectable) + ")");
      f.fix = "retire this GPU (cloud: stop/start to other hardware; own hardware: RMA)";
    } else {
      auto& f = out.add(Layer::gpu, Severity::ok, "gpu.row_remap", "Row remapping healthy");
      f.subject = subject;
      f.evidence.push_back(std::to_string(rr.correctable) + " correctable, " + std::to_string(rr.uncorrectable) +
                           " uncorrectable rows remapped; none pending");
    }
  }
  if (d.retired_pages.has_value()) {
    const auto& rp = *d.retired_pages;
    unsigned total = rp.single_bit + rp.double_bit;
    std::string counts = std::to_string(rp.single_bit) + " single-bit and " + std::to_string(rp.double_bit) +
                         " double-bit pages retired";
    if (rp.pending) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.retired_pages.pending", "Page retirement pending: GPU needs a reset");
      f.subject = subject;
      f.evidence.push_back(counts);
      f.fix = reset_gpu_fix(facts, d.index);
      f.reference = "https://docs.nvidia.com/deploy/dynamic-page-retirement/";
    } else if (total >= k_max_retired_pages) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.retired_pages.limit", "Retired-page limit reached");
      f.subject = subject;
      f.evidence.push_back(counts + " (DCGM limit " + std::to_string(k_max_retired_pages) + ")");
      f.fix = "retire this GPU (cloud: stop/start to other hardware; own hardware: RMA)";
    } else if (total >= k_soft_retired_pages) {
      auto& f = out.add(Layer::gpu, Severity::warn, "gpu.retired_pages.many", "Many retired pages");
      f.subject = subject;
      f.evidence.push_back(counts + " (DCGM soft limit " + std::to_string(k_soft_retired_pages) + ")");
      f.fix = "watch the count (nvidia-smi -q -d PAGE_RETIREMENT); plan to replace the GPU";
    }
  }
  if (d.ecc.has_value()) {
    const auto& e = *d.ecc;
    if (e.volatile_uncorrected > 0) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.ecc.uncorrected", "Uncorrectable ECC errors since the driver loaded");
      f.subject = subject;
      f.evidence.push_back(std::to_string(e.volatile_uncorrected) + " volatile uncorrected (double-bit) errors");
      f.fix = reset_gpu_fix(facts, d.index) + "; if errors return, retire the GPU";
    }
    if (e.enabled_current != e.enabled_pending) {
      auto& f = out.add(Layer::gpu, Severity::warn, "gpu.ecc.pending", "ECC mode change waits for a reboot");
      f.subject = subject;
      f.evidence.push_back(std::string("current ") + (e.enabled_current ? "on" : "off") + ", pending " +
                           (e.enabled_pending ? "on" : "off"));
      f.fix = facts.is_windows() ? "restart Windows" : "reboot (or reset the GPU: sudo nvidia-smi -i " + std::to_string(d.index) + " -r)";
    } else if (!e.enabled_current && !(d.virtualization.has_value() && *d.virtualization == gpu::VirtualizationMode::vgpu)) {
      // (A vGPU guest cannot change ECC; the host's administrator sets it for the physical GPU.)
      auto& f = out.add(Layer::gpu, Severity::warn, "gpu.ecc.off", "ECC is off on a GPU that supports it");
      f.subject = subject;
      f.evidence.push_back("ECC mode disabled; memory errors go undetected");
      f.fix = (facts.is_windows() ? std::string("nvidia-smi -i ") : std::string("sudo nvidia-smi -i ")) +
              std::to_string(d.index) + " -e 1, then reboot";
    } else if (e.volatile_uncorrected == 0) {
      auto& f = out.add(Layer::gpu, Severity::ok, "gpu.ecc", "ECC on, no uncorrectable errors");
      f.subject = subject;
      f.evidence.push_back(std::to_string(e.volatile_corrected) + " corrected since driver load, " +
                           std::to_string(e.aggregate_uncorrected) + " uncorrected in the GPU's lifetime");
    }
  }
  if (d.inforom_valid.has_value() && !*d.inforom_valid) {
    auto& f = out.add(Layer::gpu, Severity::fail, "gpu.inforom.corrupt", "InfoROM is corrupt");
    f.subject = subject;
    f.evidence.push_back("nvmlDeviceValidateInforom failed");
    f.fix = "the GPU's configuration memory is damaged: cloud: stop/start to other hardware; own hardware: RMA";
  }
}

void judge_pcie(const gpu::GpuDevice& d, Findings& out) {
  if (!d.pcie.has_value()) return;
  const auto& p = *d.pcie;
  std::string subject = gpu_subject(d);
  std::string link = "Gen" + std::to_string(p.current_generation) + " x" + std::to_string(p.current_width) +
                     " of Gen" + std::to_string(p.max_generation) + " x" + std::to_string(p.max_width);
  bool width_down = p.current_width < p.max_width;
  bool gen_down = p.current_generation < p.max_generation;
  // Idle GPUs lower their link speed to save power (nvidia-smi --help-query-gpu: "may be reduced
  // when the GPU is not in use"), so a slow link only proves a fault while the GPU is busy.
  bool idle = d.clocks_event_reasons.has_value() ? (*d.clocks_event_reasons & gpu::clocks_event::gpu_idle) != 0
                                                 : d.utilization.has_value() && d.utilization.value->gpu_percent < 10;
  bool busy = d.utilization.has_value() && d.utilization.value->gpu_percent >= 50 && !idle;
  if (width_down || gen_down) {
    if (busy) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.pcie.downtrained", "PCIe link trained down under load");
      f.subject = subject;
      f.evidence.push_back(link);
      f.evidence.push_back("GPU " + std::to_string(d.utilization.value->gpu_percent) + "% busy, so this is not idle power saving");
      f.fix = width_down ? "reseat the card or riser / use a x16 slot; on a cloud VM stop/start the instance to move to other hardware"
                         : "check the BIOS PCIe speed setting and the riser; on a cloud VM stop/start to move to other hardware";
      f.reference = "https://github.com/NVIDIA/NVSentinel/issues/890";
    } else {
      auto& f = out.add(Layer::gpu, width_down ? Severity::warn : Severity::ok, "gpu.pcie.idle_link",
                        width_down ? "PCIe link narrower than the slot while idle" : "PCIe link at reduced speed while idle (normal)");
      f.subject = subject;
      f.evidence.push_back(link);
      f.evidence.push_back("idle GPUs lower link speed; run 'gpuhost bench gpu' or any load and check again");
    }
  } else {
    auto& f = out.add(Layer::gpu, Severity::ok, "gpu.pcie", "PCIe link at full speed");
    f.subject = subject;
    f.evidence.push_back(link);
  }
  if (p.gpu_max_generation > p.max_generation && p.max_generation > 0) {
    auto& f = out.add(Layer::gpu, Severity::warn, "gpu.pcie.slot_limited", "The slot or platform limits the GPU's PCIe generation");
    f.subject = subject;
    f.evidence.push_back("GPU supports Gen" + std::to_string(p.gpu_max_generation) + ", the link can reach Gen" +
                         std::to_string(p.max_generation));
    f.fix = "host-device copies run at the slower generation's bandwidth; choose a host with a newer PCIe platform if copies matter";
  }
}

void judge_modes(const HostFacts& facts, const gpu::GpuDevice& d, Findings& out) {
  std::string subject = gpu_subject(d);
  bool windows = facts.is_windows();
  if (!windows && d.persistence_mode.has_value() && !*d.persistence_mode) {
    auto& f = out.add(Layer::gpu, Severity::warn, "gpu.persistence.off", "Persistence mode is off");
    f.subject = subject;
    f.evidence.push_back("without it the driver tears the GPU down whenever no process holds it; every start pays the init cost");
    f.fix = "sudo systemctl enable --now nvidia-persistenced   (or, until reboot: sudo nvidia-smi -i " +
            std::to_string(d.index) + " -pm 1)";
    f.reference = "https://docs.nvidia.com/deploy/driver-persistence/";
  }
  if (windows && d.driver_model.has_value()) {
    const auto& dm = *d.driver_model;
    if (dm.current != dm.pending) {
      auto& f = out.add(Layer::gpu, Severity::warn, "gpu.driver_model.pending", "Driver model change waits for a restart");
      f.subject = subject;
      f.evidence.push_back(std::string("current ") + gpu::driver_model_name(dm.current) + ", pending " +
                           gpu::driver_model_name(dm.pending));
      f.fix = "restart Windows";
    } else if (dm.current == gpu::DriverModel::wddm) {
      auto& f = out.add(Layer::gpu, Severity::warn, "gpu.driver_model.wddm", "GPU runs under WDDM (display driver model)");
      f.subject = subject;
      f.evidence.push_back("driver model WDDM: the Windows TDR watchdog kills kernels that run longer than TdrDelay, "
                           "and per-process GPU memory is not reported");
      f.fix = "if no display is attached to this GPU, switch it to MCDM (preferred) or TCC from an elevated prompt: "
              "nvidia-smi -i " + std::to_string(d.index) + " -dm 2   (TCC: -dm 1), then restart";
      f.reference = "https://docs.nvidia.com/deploy/nvml-api/ (nvmlDeviceSetDriverModel)";
    } else {
      auto& f = out.add(Layer::gpu, Severity::ok, "gpu.driver_model", std::string("Driver model ") + gpu::driver_model_name(dm.current));
      f.subject = subject;
      f.evidence.push_back("compute driver model: no display watchdog on long kernels");
    }
  }
  if (d.mig.has_value()) {
    const auto& m = *d.mig;
    if (m.current != m.pending) {
      auto& f = out.add(Layer::gpu, Severity::warn, "gpu.mig.pending", "MIG mode change waits for a GPU reset");
      f.subject = subject;
      f.evidence.push_back(std::string("MIG current ") + (m.current ? "enabled" : "disabled") + ", pending " +
                           (m.pending ? "enabled" : "disabled"));
      f.fix = reset_gpu_fix(facts, d.index);
    } else if (m.current) {
      auto& f = out.add(Layer::gpu, Severity::info, "gpu.mig.enabled", "MIG is enabled");
      f.subject = subject;
      f.evidence.push_back("CUDA sees MIG instances, not the whole GPU; GPU utilisation is not reported under MIG");
    }
  }
  if (d.compute_mode.has_value()) {
    int mode = *d.compute_mode;  // nvmlComputeMode_t: 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process
    if (mode == 2) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.compute_mode.prohibited", "Compute mode is PROHIBITED: no CUDA context can start");
      f.subject = subject;
      f.fix = "sudo nvidia-smi -i " + std::to_string(d.index) + " -c DEFAULT";
    } else if (mode == 3) {
      auto& f = out.add(Layer::gpu, Severity::warn, "gpu.compute_mode.exclusive", "Compute mode is EXCLUSIVE_PROCESS");
      f.subject = subject;
      f.evidence.push_back("only one process can use the GPU; DataLoader workers or a second job will fail to get it");
      f.fix = "sudo nvidia-smi -i " + std::to_string(d.index) + " -c DEFAULT   (unless exclusivity is intended)";
    }
  }
  if (d.virtualization.has_value() && *d.virtualization == gpu::VirtualizationMode::vgpu) {
    bool licensed = d.vgpu_license.has_value() && d.vgpu_license.value->licensed;
    auto& f = out.add(Layer::gpu, licensed ? Severity::ok : Severity::fail,
                      licensed ? "gpu.vgpu.licensed" : "gpu.vgpu.unlicensed",
                      licensed ? "vGPU licensed" : "vGPU is not licensed: CUDA will be disabled");
    f.subject = subject;
    f.evidence.push_back("virtualization mode VGPU");
    if (d.vgpu_license.has_value()) {
      const auto& l = *d.vgpu_license;
      f.evidence.push_back((l.feature.empty() ? std::string("licence") : l.feature) + ": " + (l.state.empty() ? "unknown" : l.state));
    } else if (d.vgpu_license.issue) {
      f.evidence.push_back("licence state not readable: " + issue_text(*d.vgpu_license.issue));
    }
    if (!licensed) {
      f.evidence.push_back("unlicensed vGPUs degrade: CUDA is disabled and frame rate capped");
      f.fix = windows ? "copy the client configuration token into \"%SystemDrive%\\Program Files\\NVIDIA Corporation\\vGPU Licensing\\ClientConfigToken\\\" "
                        "and restart the service: Restart-Service NVDisplay.ContainerLocalSystem"
                      : "copy the client configuration token into /etc/nvidia/ClientConfigToken/ and restart: sudo systemctl restart nvidia-gridd";
      f.reference = "https://docs.nvidia.com/vgpu/latest/grid-licensing-user-guide/";
    }
  }
}

void judge_thermal(const HostFacts& facts, const gpu::GpuDevice& d, Findings& out) {
  std::string subject = gpu_subject(d);
  (void)facts;
  std::uint64_t reasons = d.clocks_event_reasons.value_or(0);
  bool thermal = reasons & (gpu::clocks_event::sw_thermal_slowdown | gpu::clocks_event::hw_thermal_slowdown);
  bool brake = reasons & (gpu::clocks_event::hw_slowdown | gpu::clocks_event::hw_power_brake_slowdown);
  std::string temp;
  if (d.temperature.has_value()) {
    const auto& t = *d.temperature;
    temp = std::to_string(t.current_c) + " C";
    if (t.slowdown_c) temp += ", slowdown at " + std::to_string(*t.slowdown_c) + " C";
    if (t.shutdown_c) temp += ", shutdown at " + std::to_string(*t.shutdown_c) + " C";
  }
  if (thermal) {
    auto& f = out.add(Layer::gpu, Severity::fail, "gpu.clocks.thermal", "GPU is slowing down because it is too hot");
    f.subject = subject;
    f.evidence.push_back("clocks event reasons: " + join(gpu::clocks_event_reason_names(reasons), ", "));
    if (!temp.empty()) f.evidence.push_back(temp);
    f.fix = "improve cooling: check fans (nvidia-smi -q -d TEMPERATURE,PERFORMANCE), airflow and inlet temperature; "
            "on a cloud VM stop/start the instance to move to other hardware";
  } else if (brake) {
    auto& f = out.add(Layer::gpu, Severity::fail, "gpu.clocks.hw_slowdown", "Hardware slowdown active (power brake or board limit)");
    f.subject = subject;
    f.evidence.push_back("clocks event reasons: " + join(gpu::clocks_event_reason_names(reasons), ", "));
    f.fix = "check the power supply and cabling (external power brake signal); on a cloud VM stop/start to move to other hardware";
  } else if (d.temperature.has_value() && d.temperature.value->slowdown_c &&
             d.temperature.value->current_c + 5 >= *d.temperature.value->slowdown_c) {
    auto& f = out.add(Layer::gpu, Severity::warn, "gpu.temperature.near_slowdown", "GPU temperature is close to its slowdown point");
    f.subject = subject;
    f.evidence.push_back(temp);
    f.fix = "improve cooling before long runs; the GPU will lower its clocks at the slowdown temperature";
  } else if (reasons & gpu::clocks_event::sw_power_cap) {
    auto& f = out.add(Layer::gpu, Severity::info, "gpu.clocks.power_cap", "Clocks limited by the power cap");
    f.subject = subject;
    f.evidence.push_back("clocks event reasons: " + join(gpu::clocks_event_reason_names(reasons), ", "));
    if (d.power.has_value())
      f.evidence.push_back("drawing " + std::to_string(d.power.value->usage_mw / 1000) + " W of an enforced " +
                           std::to_string(d.power.value->enforced_limit_mw / 1000) + " W limit");
  } else if (d.clocks_event_reasons.has_value()) {
    auto& f = out.add(Layer::gpu, Severity::ok, "gpu.clocks", "No thermal or power slowdown");
    f.subject = subject;
    auto names = gpu::clocks_event_reason_names(reasons);
    f.evidence.push_back("clocks event reasons: " + (names.empty() ? std::string("none") : join(names, ", ")));
    if (!temp.empty()) f.evidence.push_back(temp);
  }
}

// "NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus." -> 79
int xid_number(const std::string& line) {
  auto pos = line.find("NVRM: Xid");
  if (pos == std::string::npos) return -1;
  auto colon = line.find("):", pos);
  if (colon == std::string::npos) return -1;
  std::size_t i = colon + 2;
  while (i < line.size() && line[i] == ' ') ++i;
  std::size_t j = i;
  while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j]))) ++j;
  auto n = parse_int(std::string_view(line).substr(i, j - i));
  return n ? static_cast<int>(*n) : -1;
}

void judge_linux_kernel(const HostFacts& facts, Findings& out) {
  for (const auto& d : facts.linux.pci_display_devices) {
    if (d.driver == "nouveau") {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.nouveau", "The open-source nouveau driver holds the GPU");
      f.subject = d.address;
      f.evidence.push_back(d.address + " is bound to nouveau");
      f.fix = "printf 'blacklist nouveau\\noptions nouveau modeset=0\\n' | sudo tee /etc/modprobe.d/blacklist-nouveau.conf && "
              "sudo update-initramfs -u (RHEL: sudo dracut --force) && sudo reboot; then install the NVIDIA driver";
      f.reference = "research: DCGM Denylist check (nvvs/src/Software.cpp)";
    }
  }
  if (!facts.linux.kernel_log_read) {
    if (!facts.linux.kernel_log_error.empty()) {
      auto& f = out.add(Layer::gpu, Severity::info, "gpu.xid.unreadable", "Kernel log not readable: Xid errors not checked");
      f.evidence.push_back(facts.linux.kernel_log_error);
      f.fix = "run gpuhost doctor as root (or sudo sysctl kernel.dmesg_restrict=0) to check for Xid errors";
    }
    return;
  }
  std::map<int, std::vector<std::string>> by_xid;
  for (const auto& line : facts.linux.xid_lines) by_xid[xid_number(line)].push_back(line);
  if (by_xid.empty()) {
    if (!facts.gpu.devices.empty() || host_has_nvidia_gpu(facts)) {
      auto& f = out.add(Layer::gpu, Severity::ok, "gpu.xid", "No NVIDIA Xid errors in the kernel log");
      f.evidence.push_back("kernel log read; no 'NVRM: Xid' lines");
    }
    return;
  }
  for (const auto& [xid, lines] : by_xid) {
    bool devastating = k_devastating_xids.count(xid) > 0;
    auto& f = out.add(Layer::gpu, devastating ? Severity::fail : Severity::warn, "gpu.xid." + std::to_string(xid),
                      "NVIDIA Xid " + std::to_string(xid) + " in the kernel log" + (xid == 79 ? " (GPU fell off the bus)" : ""));
    f.evidence.push_back(std::to_string(lines.size()) + " line(s); last: " + lines.back());
    f.fix = devastating ? "drain the node: stop jobs, reset the GPU or reboot; if it recurs, replace the hardware "
                          "(cloud: stop/start to other hardware)"
                        : "look the Xid up in NVIDIA's catalog and follow its resolution; often an application fault";
    f.reference = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html";
  }
}

void judge_windows_devices(const HostFacts& facts, Findings& out) {
  for (const auto& d : facts.windows_devices.display_devices) {
    if (d.vendor_id != 0x10de || d.problem_code == 0) continue;
    std::string fix;
    std::string what;
    switch (d.problem_code) {
      case 43:  // CM_PROB_FAILED_POST_START
        what = "Windows stopped the GPU after it reported a problem (Code 43)";
        fix = "clean-install the NVIDIA driver (setup.exe -s -clean) and restart; in a VM check that the GPU "
              "passthrough and the driver branch support this GPU";
        break;
      case 12:  // CM_PROB_NORMAL_CONFLICT
        what = "Not enough free resources for the GPU (Code 12)";
        fix = "enable 'Above 4G decoding' / large MMIO space in the firmware or VM configuration (large-BAR GPUs need it)";
        break;
      case 35:  // CM_PROB_BIOS_TABLE
        what = "Firmware tables lack what the GPU needs (Code 35)";
        fix = "update the system firmware / hypervisor";
        break;
      case 28:  // CM_PROB_FAILED_INSTALL
        what = "No driver installed for the GPU (Code 28)";
        fix = driver_install_fix(facts);
        break;
      case 22:  // CM_PROB_DISABLED
        what = "The GPU is disabled in Device Manager (Code 22)";
        fix = "pnputil /enable-device \"" + d.address + "\"";
        break;
      default:
        what = "Device Manager reports a problem with the GPU (Code " + std::to_string(d.problem_code) + ")";
        fix = "open Device Manager, read the device status, and reinstall the NVIDIA driver";
    }
    auto& f = out.add(Layer::gpu, Severity::fail, "gpu.device_problem." + std::to_string(d.problem_code), what);
    f.subject = d.description.empty() ? d.address : d.description;
    f.evidence.push_back(d.address + ": CM problem code " + std::to_string(d.problem_code));
    f.fix = fix;
    f.reference = "https://learn.microsoft.com/windows-hardware/drivers/install/device-manager-error-messages";
  }
}

}  // namespace

bool host_has_nvidia_gpu(const HostFacts& facts) { return !facts.gpu.devices.empty() || has_nvidia_pci(facts); }

std::string driver_install_fix(const HostFacts& facts) {
  if (facts.is_windows())
    return "download the driver for this GPU from https://www.nvidia.com/Download/index.aspx (data-center GPUs: "
           "the Data Center driver; cloud vGPU: the provider's GRID driver), install it, restart";
  const std::string& os = facts.system.os.name;
  if (contains_icase(os, "ubuntu")) return "sudo ubuntu-drivers install --gpgpu && sudo reboot";
  if (contains_icase(os, "debian"))
    return "enable the contrib, non-free and non-free-firmware components in /etc/apt/sources.list, then: sudo apt-get update && "
           "sudo apt-get install -y linux-headers-$(uname -r) nvidia-driver firmware-misc-nonfree && sudo reboot";
  if (contains_icase(os, "red hat") || contains_icase(os, "rocky") || contains_icase(os, "alma") ||
      contains_icase(os, "amazon linux") || contains_icase(os, "centos"))
    return "add NVIDIA's CUDA repository for this distribution, then: sudo dnf install -y kernel-devel-$(uname -r) "
           "nvidia-driver && sudo reboot (https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/)";
  return "install the NVIDIA driver from your distribution or NVIDIA's CUDA repository "
         "(https://docs.nvidia.com/datacenter/tesla/driver-installation-guide/), then reboot";
}

void judge_gpu(const HostFacts& facts, const knowledge::Knowledge& knowledge, Findings& out) {
  judge_library(facts, out);
  for (const auto& d : facts.gpu.devices) {
    std::string subject = gpu_subject(d);
    if (d.handle_error) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.device.unreachable", "NVML cannot open this GPU");
      f.subject = subject;
      f.evidence.push_back(issue_text(*d.handle_error));
      f.fix = reset_gpu_fix(facts, d.index);
      continue;
    }
    if (d.lost) {
      auto& f = out.add(Layer::gpu, Severity::fail, "gpu.lost", "GPU has fallen off the bus (lost)");
      f.subject = subject;
      f.evidence.push_back("NVML_ERROR_GPU_IS_LOST on " + (d.pci_bus_id.empty() ? subject : d.pci_bus_id) +
                           " (the driver logs this as Xid 79)");
      f.fix = "drain the node and reboot; if it happens again the GPU, its power or its slot is failing "
              "(cloud: stop/start the instance to move to other hardware and report it)";
      f.reference = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html";
      continue;
    }
    judge_identity(facts, knowledge, d, out);
    judge_ecc_and_memory(facts, d, out);
    judge_pcie(d, out);
    judge_modes(facts, d, out);
    judge_thermal(facts, d, out);
  }
  if (facts.is_windows())
    judge_windows_devices(facts, out);
  else
    judge_linux_kernel(facts, out);
}

}  // namespace gpuhost::doctor
