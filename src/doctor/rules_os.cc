#include "base/strings.h"
#include "doctor/rules.h"
#include "doctor/rules_support.h"

namespace gpuhost::doctor {

namespace {

constexpr const char* k_tdr_reference = "https://learn.microsoft.com/windows-hardware/drivers/display/tdr-registry-keys";

std::string describe(const RegistryValue& v, const char* default_text) {
  if (v.value) return std::to_string(*v.value);
  if (v.error == "absent") return std::string("absent (default ") + default_text + ")";
  return "unreadable: " + v.error;
}

bool any_wddm_gpu(const HostFacts& facts) {
  for (const auto& d : facts.gpu.devices)
    if (d.driver_model.has_value() && d.driver_model.value->current == gpu::DriverModel::wddm) return true;
  return false;
}

void judge_windows(const HostFacts& facts, Findings& out) {
  const auto& w = facts.windows;
  constexpr const char* gfx = "HKLM\\SYSTEM\\CurrentControlSet\\Control\\GraphicsDrivers";
  {
    // Defaults when absent: TdrLevel 3 (recover), TdrDelay 2 s (Microsoft's TDR registry keys page).
    std::uint32_t level = w.tdr_level.value.value_or(3);
    std::uint32_t delay = w.tdr_delay.value.value_or(2);
    bool wddm = any_wddm_gpu(facts);
    std::vector<std::string> evidence = {"TdrLevel " + describe(w.tdr_level, "3, recover"),
                                         "TdrDelay " + describe(w.tdr_delay, "2 s"),
                                         "TdrDdiDelay " + describe(w.tdr_ddi_delay, "5 s")};
    if (level == 0) {
      auto& f = out.add(Layer::os, Severity::warn, "os.windows.tdr.disabled", "GPU timeout detection (TDR) is turned off");
      f.evidence = evidence;
      f.evidence.push_back("a hung kernel now freezes the display instead of being reset");
      f.fix = std::string("reg delete \"") + gfx + "\" /v TdrLevel /f   (back to the default: recover), then restart";
      f.reference = k_tdr_reference;
    } else if (wddm && delay <= 2) {
      auto& f = out.add(Layer::os, Severity::warn, "os.windows.tdr.short",
                        "Kernels longer than " + std::to_string(delay) + " s will be killed on WDDM GPUs");
      f.evidence = evidence;
      f.evidence.push_back("a killed kernel surfaces as cudaErrorLaunchTimeout (702) / 'the launch timed out'");
      f.fix = std::string("best: move the GPU to MCDM/TCC if it drives no display (nvidia-smi -i 0 -dm 2). Otherwise, from an "
                          "elevated prompt: reg add \"") + gfx + "\" /v TdrDelay /t REG_DWORD /d 60 /f, then restart "
              "(Microsoft intends these keys for driver testing; raise them knowingly)";
      f.reference = k_tdr_reference;
    } else {
      auto& f = out.add(Layer::os, Severity::ok, "os.windows.tdr", "GPU timeout detection (TDR) settings");
      f.evidence = evidence;
      if (!wddm) f.evidence.push_back("no GPU under WDDM, so TDR does not limit CUDA kernels");
    }
  }
  {
    bool on = w.hiberboot_enabled.value.value_or(1) != 0;  // Windows enables Fast Startup by default
    auto& f = out.add(Layer::os, on ? Severity::warn : Severity::ok, on ? "os.windows.fast_startup.on" : "os.windows.fast_startup",
                      on ? "Fast Startup is on: 'Shut down' does not restart the driver" : "Fast Startup is off");
    f.evidence.push_back("HiberbootEnabled " + describe(w.hiberboot_enabled, "1, on"));
    if (on)
      f.fix = "powercfg /h off   (or reg add \"HKLM\\SYSTEM\\CurrentControlSet\\Control\\Session Manager\\Power\" "
              "/v HiberbootEnabled /t REG_DWORD /d 0 /f); always use Restart after a driver install";
  }
  {
    bool on = w.rdp_hardware_gpu.value.value_or(0) == 1;
    auto& f = out.add(Layer::os, on ? Severity::ok : Severity::warn, on ? "os.windows.rdp_gpu" : "os.windows.rdp_gpu.off",
                      on ? "Remote Desktop sessions use the hardware GPU" : "Remote Desktop sessions may not use the GPU");
    f.evidence.push_back("policy bEnumerateHWBeforeSW " + describe(w.rdp_hardware_gpu, "not configured"));
    if (!on) {
      f.evidence.push_back("without the policy, RD Session Host sessions render with the Microsoft Basic Render Driver");
      f.fix = "reg add \"HKLM\\SOFTWARE\\Policies\\Microsoft\\Windows NT\\Terminal Services\" /v bEnumerateHWBeforeSW "
              "/t REG_DWORD /d 1 /f, then sign out and back in";
      f.reference = "https://admx.help/?Category=Windows_11_2022&Policy=Microsoft.Policies.TerminalServer::TS_DX_USE_FULL_HWGPU";
    }
  }
  {
    bool on = w.long_paths_enabled.value.value_or(0) == 1;
    auto& f = out.add(Layer::os, on ? Severity::ok : Severity::warn, on ? "os.windows.long_paths" : "os.windows.long_paths.off",
                      on ? "Long paths enabled" : "Long paths are off: deep pip installs fail at 260 characters");
    f.evidence.push_back("LongPathsEnabled " + describe(w.long_paths_enabled, "0, off"));
    if (!on) {
      f.fix = "reg add \"HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem\" /v LongPathsEnabled /t REG_DWORD /d 1 /f";
      f.reference = "https://github.com/NVIDIA/cuda-python/issues/1820";
    }
  }
  if (w.page_file_known) {
    // Each DataLoader worker re-imports torch and commits its CUDA DLLs; with a small page file
    // Windows refuses the commit: "OSError: [WinError 1455] The paging file is too small".
    std::uint64_t ram = facts.system.memory.total_bytes;
    bool small = w.page_file_bytes < 16 * k_gib && w.page_file_bytes < ram;
    auto& f = out.add(Layer::os, small ? Severity::warn : Severity::ok, small ? "os.windows.page_file.small" : "os.windows.page_file",
                      small ? "Small page file: DataLoader workers may fail with WinError 1455" : "Page file size");
    f.evidence.push_back("page file " + format_bytes(static_cast<double>(w.page_file_bytes)) + ", RAM " +
                         format_bytes(static_cast<double>(ram)));
    if (small)
      f.fix = "let Windows manage the page file (PowerShell, elevated: Get-CimInstance Win32_ComputerSystem | "
              "Set-CimInstance -Property @{AutomaticManagedPagefile=$true}) or set it to at least the RAM size; restart";
  }
}

void judge_linux(const HostFacts& facts, Findings& out) {
  const auto& l = facts.linux;
  bool gpu = !facts.gpu.devices.empty();
  if (gpu && l.persistenced_known) {
    auto& f = out.add(Layer::os, l.persistenced_running ? Severity::ok : Severity::warn,
                      l.persistenced_running ? "os.linux.persistenced" : "os.linux.persistenced.off",
                      l.persistenced_running ? "nvidia-persistenced is running" : "nvidia-persistenced is not running");
    if (!l.persistenced_running) {
      f.evidence.push_back("no nvidia-persistenced process; GPU state is torn down between jobs");
      f.fix = "sudo systemctl enable --now nvidia-persistenced";
      f.reference = "https://docs.nvidia.com/deploy/driver-persistence/persistence-daemon.html";
    }
  }
  if (l.shm_bytes) {
    // PyTorch DataLoader workers pass batches through /dev/shm; Docker's default 64 MiB gives
    // "bus error" / "insufficient shared memory" as soon as workers > 0.
    bool small = *l.shm_bytes < 1 * k_gib;
    auto& f = out.add(Layer::os, small ? Severity::warn : Severity::ok, small ? "os.linux.shm.small" : "os.linux.shm",
                      small ? "/dev/shm is small: DataLoader workers will crash" : "/dev/shm size");
    f.evidence.push_back("/dev/shm " + format_bytes(static_cast<double>(*l.shm_bytes)));
    if (small)
      f.fix = l.in_container ? "restart the container with --shm-size=16g (or --ipc=host)"
                             : "sudo mount -o remount,size=16G /dev/shm   (persist it in /etc/fstab)";
  }
  if (l.open_files_soft) {
    bool low = *l.open_files_soft < 4096;
    auto& f = out.add(Layer::os, low ? Severity::warn : Severity::ok, low ? "os.linux.nofile.low" : "os.linux.nofile",
                      low ? "Low open-file limit: DataLoader workers can hit 'Too many open files'" : "Open-file limit");
    f.evidence.push_back("soft " + std::to_string(*l.open_files_soft) + ", hard " + std::to_string(l.open_files_hard.value_or(0)));
    if (low)
      f.fix = "ulimit -n " + std::to_string(std::min<std::uint64_t>(l.open_files_hard.value_or(65536), 65536)) +
              " in the job's shell; to persist, add '* soft nofile 65536' to /etc/security/limits.conf";
  }
}

}  // namespace

void judge_os(const HostFacts& facts, Findings& out) {
  if (facts.is_windows())
    judge_windows(facts, out);
  else
    judge_linux(facts, out);
}

}  // namespace gpuhost::doctor
