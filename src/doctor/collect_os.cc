#include <filesystem>

#include "base/strings.h"
#include "doctor/collect.h"
#include "platform/files.h"
#include "platform/registry.h"
#include "platform/system_info.h"

namespace gpuhost::doctor {

namespace fs = std::filesystem;

namespace {

RegistryValue read_dword(std::string_view key, std::string_view value) {
  RegistryValue out;
  auto r = platform::registry_read_dword(platform::RegistryRoot::local_machine, key, value);
  if (r) {
    out.value = *r;
  } else {
    out.error = r.error().code == ErrorCode::not_found ? "absent" : r.error().message;
  }
  return out;
}

void collect_windows(HostFacts& facts) {
  // Keys and meanings: research/01 §6 (TDR: learn.microsoft.com/windows-hardware/drivers/display/
  // tdr-registry-keys; Fast Startup; RDP GPU policy: admx.help TS_DX_USE_FULL_HWGPU; long paths).
  constexpr std::string_view graphics = "SYSTEM\\CurrentControlSet\\Control\\GraphicsDrivers";
  facts.windows.tdr_level = read_dword(graphics, "TdrLevel");
  facts.windows.tdr_delay = read_dword(graphics, "TdrDelay");
  facts.windows.tdr_ddi_delay = read_dword(graphics, "TdrDdiDelay");
  facts.windows.hiberboot_enabled =
      read_dword("SYSTEM\\CurrentControlSet\\Control\\Session Manager\\Power", "HiberbootEnabled");
  facts.windows.rdp_hardware_gpu =
      read_dword("SOFTWARE\\Policies\\Microsoft\\Windows NT\\Terminal Services", "bEnumerateHWBeforeSW");
  facts.windows.long_paths_enabled = read_dword("SYSTEM\\CurrentControlSet\\Control\\FileSystem", "LongPathsEnabled");
  facts.windows.page_file_bytes = facts.system.memory.swap_total_bytes;
  facts.windows.page_file_known = facts.system.memory.total_bytes > 0;

  auto devices = platform::list_display_devices();
  if (devices)
    facts.windows_devices.display_devices = std::move(*devices);
  else
    facts.windows_devices.error = devices.error().message;
}

void collect_linux(HostFacts& facts) {
  LinuxSettings& l = facts.linux;
  if (auto shm = platform::disk_space("/dev/shm")) l.shm_bytes = shm->capacity_bytes;
  if (auto limit = platform::open_file_limit()) {
    l.open_files_soft = limit->soft;
    l.open_files_hard = limit->hard;
  }
  // nvidia-persistenced: look for the process by name in /proc (no need for systemd).
  if (auto procs = platform::list_directory("/proc")) {
    l.persistenced_known = true;
    for (const auto& e : *procs) {
      if (!e.is_directory || e.name.empty() || !std::isdigit(static_cast<unsigned char>(e.name[0]))) continue;
      if (auto comm = platform::read_file(fs::path("/proc") / e.name / "comm", 4096)) {
        if (trim(*comm) == "nvidia-persiste" || trim(*comm) == "nvidia-persistenced") {
          l.persistenced_running = true;
          break;
        }
      }
    }
  }
  std::error_code ec;
  l.in_container = fs::exists("/.dockerenv", ec) || fs::exists("/run/.containerenv", ec);

  auto devices = platform::list_display_devices();
  if (devices)
    l.pci_display_devices = std::move(*devices);
  else
    l.pci_error = devices.error().message;

  auto log = platform::read_kernel_log();
  if (log) {
    l.kernel_log_read = true;
    l.xid_lines = xid_lines(*log);
    if (l.xid_lines.size() > 50) l.xid_lines.erase(l.xid_lines.begin(), l.xid_lines.end() - 50);
  } else {
    l.kernel_log_error = log.error().message;
  }
}

}  // namespace

void collect_os_settings(HostFacts& facts) {
  if (platform::current_os() == platform::OsFamily::windows)
    collect_windows(facts);
  else
    collect_linux(facts);
}

}  // namespace gpuhost::doctor
