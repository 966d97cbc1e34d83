#include <filesystem>

#include "base/strings.h"
#include "doctor/collect.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/registry.h"
#include "platform/system_info.h"

namespace gpuhost::doctor {

namespace fs = std::filesystem;

namespace {

std::optional<platform::ProcessResult> run_quiet(std::vector<std::string> argv) {
  platform::ProcessOptions run;
  run.argv = std::move(argv);
  run.timeout = std::chrono::seconds(10);
  auto r = platform::run_process(run);
  if (!r || r->timed_out) return std::nullopt;
  return *r;
}

void linux_firewall(SecurityFacts& s, bool root) {
  s.firewall_state = "unknown";
  if (platform::find_executable("ufw")) {
    if (auto r = run_quiet({"ufw", "status"}); r && r->succeeded()) {
      std::string out(trim(r->stdout_text));
      s.firewall_evidence.push_back("ufw status: " + out.substr(0, out.find('\n')));
      if (out.find("Status: active") != std::string::npos) {
        s.firewall_state = "on";
        return;
      }
    }
  }
  if (platform::find_executable("firewall-cmd")) {
    if (auto r = run_quiet({"firewall-cmd", "--state"})) {
      std::string out(trim(r->stdout_text + r->stderr_text));
      s.firewall_evidence.push_back("firewall-cmd --state: " + out);
      if (out == "running") {
        s.firewall_state = "on";
        return;
      }
    }
  }
  if (platform::find_executable("nft")) {
    if (!root) {
      s.firewall_evidence.push_back("nft list ruleset needs root; run doctor as root to read the rules");
    } else if (auto r = run_quiet({"nft", "list", "ruleset"}); r && r->succeeded()) {
      bool filters_input = r->stdout_text.find("hook input") != std::string::npos &&
                           (r->stdout_text.find("drop") != std::string::npos ||
                            r->stdout_text.find("reject") != std::string::npos);
      s.firewall_evidence.push_back(filters_input ? "nftables: an input hook with drop/reject rules"
                                                  : "nftables: no input filtering rules");
      s.firewall_state = filters_input ? "on" : "off";
      if (filters_input) return;
    }
  }
  if (platform::find_executable("iptables") && root) {
    if (auto r = run_quiet({"iptables", "-S", "INPUT"}); r && r->succeeded()) {
      bool filtering = r->stdout_text.find("-P INPUT DROP") != std::string::npos ||
                       r->stdout_text.find("-j DROP") != std::string::npos ||
                       r->stdout_text.find("-j REJECT") != std::string::npos;
      s.firewall_evidence.push_back(filtering ? "iptables INPUT: drop/reject rules present"
                                              : "iptables INPUT: policy ACCEPT, no drop rules");
      s.firewall_state = filtering ? "on" : "off";
      return;
    }
  }
  if (s.firewall_evidence.empty()) {
    s.firewall_evidence.push_back("no ufw, firewalld, nft or iptables found on PATH");
    s.firewall_state = "off";
  }
}

void windows_firewall(SecurityFacts& s) {
  // EnableFirewall per profile; a Group Policy value overrides the local one.
  const char* profiles[] = {"DomainProfile", "StandardProfile", "PublicProfile"};
  int on = 0, off = 0;
  for (const char* profile : profiles) {
    std::string policy = std::string("SOFTWARE\\Policies\\Microsoft\\WindowsFirewall\\") + profile;
    std::string local =
        std::string("SYSTEM\\CurrentControlSet\\Services\\SharedAccess\\Parameters\\FirewallPolicy\\") + profile;
    auto value = platform::registry_read_dword(platform::RegistryRoot::local_machine, policy, "EnableFirewall");
    std::string where = "policy";
    if (!value) {
      value = platform::registry_read_dword(platform::RegistryRoot::local_machine, local, "EnableFirewall");
      where = "local";
    }
    if (!value) {
      s.firewall_evidence.push_back(std::string(profile) + ": EnableFirewall not readable (" + value.error().message + ")");
      continue;
    }
    s.firewall_evidence.push_back(std::string(profile) + ": EnableFirewall=" + std::to_string(*value) + " (" + where + ")");
    (*value ? on : off)++;
  }
  s.firewall_state = off > 0 ? "off" : on > 0 ? "on" : "unknown";
}

// The block device a path lives on, from /proc/self/mounts (longest matching mount point).
std::string mount_source(const fs::path& path, std::string& fstype) {
  auto mounts = platform::read_file("/proc/self/mounts", 4 << 20);
  if (!mounts) return {};
  std::string best, best_mount;
  std::string p = path.string();
  for (const auto& line : split_lines(*mounts)) {
    auto fields = split_whitespace(line);
    if (fields.size() < 3) continue;
    const std::string& mount_point = fields[1];
    bool prefix = p == mount_point || mount_point == "/" ||
                  (p.rfind(mount_point, 0) == 0 && p.size() > mount_point.size() && p[mount_point.size()] == '/');
    if (prefix && mount_point.size() >= best_mount.size()) {
      best_mount = mount_point;
      best = fields[0];
      fstype = fields[2];
    }
  }
  return best;
}

// True when the device-mapper device or anything under it is a dm-crypt target.
bool dm_is_crypt(const std::string& dm_name, int depth = 0) {
  if (depth > 8) return false;
  fs::path block = fs::path("/sys/block") / dm_name;
  if (auto uuid = platform::read_file(block / "dm" / "uuid", 4096); uuid && uuid->rfind("CRYPT-", 0) == 0) return true;
  if (auto slaves = platform::list_directory(block / "slaves"))
    for (const auto& s : *slaves)
      if (s.name.rfind("dm-", 0) == 0 && dm_is_crypt(s.name, depth + 1)) return true;
  return false;
}

void linux_encryption(SecurityFacts& s, const std::string& working_directory) {
  std::string fstype;
  std::string source = mount_source(working_directory, fstype);
  s.encryption_state = "unknown";
  if (source.empty()) {
    s.encryption_evidence.push_back("could not find the mount of " + working_directory);
    return;
  }
  s.encryption_evidence.push_back(working_directory + " is on " + source + " (" + fstype + ")");
  if (source.rfind("/dev/", 0) != 0) {
    s.encryption_evidence.push_back("not a block device (container overlay or network filesystem)");
    return;
  }
  std::error_code ec;
  fs::path real = fs::canonical(source, ec);
  std::string name = ec ? fs::path(source).filename().string() : real.filename().string();
  if (name.rfind("dm-", 0) == 0) {
    bool crypt = dm_is_crypt(name);
    s.encryption_state = crypt ? "encrypted" : "not encrypted";
    s.encryption_evidence.push_back(crypt ? name + " is a dm-crypt (LUKS) device" : name + " is device-mapper without dm-crypt");
  } else {
    s.encryption_state = "not encrypted";
    s.encryption_evidence.push_back(name + " is a plain block device, not dm-crypt/LUKS");
  }
}

void windows_encryption(SecurityFacts& s) {
  s.encryption_state = "unknown";
  auto tool = platform::find_executable("manage-bde");
  if (!tool) {
    s.encryption_evidence.push_back("manage-bde.exe not found (BitLocker tools not installed)");
    return;
  }
  auto r = run_quiet({*tool, "-status", "C:"});
  if (!r) {
    s.encryption_evidence.push_back("manage-bde -status C: did not answer");
    return;
  }
  std::string out = r->stdout_text;
  if (out.find("Protection On") != std::string::npos || out.find("Fully Encrypted") != std::string::npos) {
    s.encryption_state = "encrypted";
    s.encryption_evidence.push_back("manage-bde: C: protection on");
  } else if (out.find("Protection Off") != std::string::npos || out.find("Fully Decrypted") != std::string::npos) {
    s.encryption_state = "not encrypted";
    s.encryption_evidence.push_back("manage-bde: C: protection off");
  } else {
    s.encryption_evidence.push_back("manage-bde -status C: needs an elevated prompt (exit code " +
                                    std::to_string(r->exit_code) + ")");
  }
}

}  // namespace

namespace {

// UEFI Secure Boot. Linux: the SecureBoot EFI variable (4 attribute bytes, then the value; no
// efivars directory means a BIOS boot). Windows: SecureBoot\State\UEFISecureBootEnabled.
void secure_boot(SecurityFacts& s, bool windows) {
  if (windows) {
    auto value = platform::registry_read_dword(platform::RegistryRoot::local_machine,
                                               "SYSTEM\\CurrentControlSet\\Control\\SecureBoot\\State",
                                               "UEFISecureBootEnabled");
    if (value) {
      s.secure_boot = *value ? "on" : "off";
      s.secure_boot_evidence = "UEFISecureBootEnabled = " + std::to_string(*value);
    } else if (value.error().code == ErrorCode::not_found) {
      s.secure_boot = "off";
      s.secure_boot_evidence = "no UEFISecureBootEnabled value (legacy BIOS boot)";
    } else {
      s.secure_boot_evidence = value.error().message;
    }
    return;
  }
  const fs::path efivar = "/sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-e98c7a1a3c0c";
  std::error_code ec;
  if (!fs::exists("/sys/firmware/efi", ec)) {
    s.secure_boot = "off";
    s.secure_boot_evidence = "no /sys/firmware/efi (BIOS boot, or not visible in this container)";
    return;
  }
  auto bytes = platform::read_file(efivar, 64);
  if (!bytes || bytes->size() < 5) {
    s.secure_boot_evidence = bytes ? efivar.string() + " is too short" : bytes.error().message;
    return;
  }
  s.secure_boot = (*bytes)[4] == 1 ? "on" : "off";
  s.secure_boot_evidence = efivar.string() + " = " + std::to_string(static_cast<unsigned char>((*bytes)[4]));
}

}  // namespace

void collect_security(HostFacts& facts) {
  SecurityFacts& s = facts.security;
  bool windows = platform::current_os() == platform::OsFamily::windows;
  if (windows)
    windows_firewall(s);
  else
    linux_firewall(s, facts.system.elevated);
  std::error_code ec;
  std::string cwd = facts.disks.empty() ? fs::current_path(ec).string() : facts.disks.front().path;
  if (windows)
    windows_encryption(s);
  else
    linux_encryption(s, cwd);
  secure_boot(s, windows);
  auto sockets = platform::listening_tcp_sockets();
  if (sockets)
    s.listening = std::move(*sockets);
  else
    s.listening_error = sockets.error().message;
}

}  // namespace gpuhost::doctor
