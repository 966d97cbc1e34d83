#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::platform {

enum class OsFamily { linux, windows };

// The OS this binary was built for.
[[nodiscard]] OsFamily current_os();
[[nodiscard]] const char* os_family_name(OsFamily os);  // "linux" / "windows"

struct OsInfo {
  OsFamily family = OsFamily::linux;
  std::string name;      // "Debian GNU/Linux 12 (bookworm)", "Windows Server 2022 Datacenter"
  std::string version;   // "12", "10.0.20348"
  std::string kernel;    // uname -r; Windows: build number with UBR
  std::string machine;   // "x86_64"
  bool under_wine = false;  // Windows build running on Wine (ntdll exports wine_get_version)
  std::string wine_version;
};

struct CpuInfo {
  std::string vendor;  // "GenuineIntel", "AuthenticAMD"
  std::string model;   // brand string
  int logical_cores = 0;
};

struct MemoryInfo {
  std::uint64_t total_bytes = 0;
  std::uint64_t available_bytes = 0;
  std::uint64_t swap_total_bytes = 0;  // Windows: page file size (commit limit minus RAM)
};

// The CPUID hypervisor leaf: present bit and the 12-byte vendor signature.
struct HypervisorInfo {
  bool present = false;
  std::string signature;  // "KVMKVMKVM", "Microsoft Hv", "VMwareVMware", "XenVMMXenVMM", "TCGTCGTCGTCG"
  std::string name;       // "KVM", "Hyper-V", ...
};

// SMBIOS/DMI strings (Linux /sys/class/dmi/id/*, Windows HKLM\HARDWARE\DESCRIPTION\System\BIOS).
struct DmiInfo {
  std::string sys_vendor;
  std::string product_name;
  std::string product_version;
  std::string bios_vendor;
  std::string bios_version;
  std::string board_vendor;
  std::string chassis_vendor;
  std::string chassis_asset_tag;
};

enum class CloudVendor { none, aws, azure, gcp, alibaba, tencent, huawei, volcengine };

[[nodiscard]] const char* cloud_vendor_id(CloudVendor cloud);    // "aws", "azure", ..., "none"
[[nodiscard]] const char* cloud_vendor_name(CloudVendor cloud);  // "Amazon Web Services", ...
[[nodiscard]] std::optional<CloudVendor> parse_cloud_vendor(std::string_view id);

// Which cloud the DMI strings identify, and the evidence ("sys_vendor=Amazon EC2"). Pure.
struct CloudDetection {
  CloudVendor cloud = CloudVendor::none;
  std::string evidence;
};
[[nodiscard]] CloudDetection detect_cloud(const DmiInfo& dmi);

struct SystemInfo {
  std::string hostname;
  OsInfo os;
  CpuInfo cpu;
  MemoryInfo memory;
  HypervisorInfo hypervisor;
  DmiInfo dmi;
  CloudDetection cloud;
  bool elevated = false;  // root / Administrator
};

// Collects everything above. Never fails: fields it cannot read stay empty.
[[nodiscard]] SystemInfo collect_system_info();

// The open-file limit (RLIMIT_NOFILE soft, hard). Windows: unsupported.
struct FileLimit {
  std::uint64_t soft = 0;
  std::uint64_t hard = 0;
};
[[nodiscard]] Result<FileLimit> open_file_limit();

// A TCP socket in LISTEN state (Linux: /proc/net/tcp{,6}; Windows: GetExtendedTcpTable).
struct ListeningSocket {
  std::string address;  // "0.0.0.0", "127.0.0.1", "::", "::1"
  int port = 0;
  long pid = 0;         // 0 when unknown (Linux without walking /proc/*/fd)
  [[nodiscard]] bool all_interfaces() const { return address == "0.0.0.0" || address == "::"; }
  [[nodiscard]] bool loopback() const;
};
[[nodiscard]] Result<std::vector<ListeningSocket>> listening_tcp_sockets();

// A PCI display controller or NVIDIA function as the OS sees it.
struct PciDevice {
  std::string address;       // "0000:3b:00.0" (Linux); Windows: device instance id
  std::uint16_t vendor_id = 0;
  std::uint16_t device_id = 0;
  std::uint32_t class_code = 0;  // 0x030000 VGA, 0x030200 3D controller (Linux only)
  std::string driver;        // bound kernel driver: "nvidia", "nouveau", "vfio-pci", "" (Linux)
  std::string description;   // Windows: device description
  std::uint32_t problem_code = 0;  // Windows CM_PROB_* (43 = CM_PROB_FAILED_POST_START); 0 = none
};
// NVIDIA (vendor 0x10de) and other display-class PCI devices.
[[nodiscard]] Result<std::vector<PciDevice>> list_display_devices();

// The kernel ring buffer (Linux: /dev/kmsg, falling back to `dmesg`). permission_denied when
// kernel.dmesg_restrict hides it; Windows: unsupported.
[[nodiscard]] Result<std::string> read_kernel_log();

// Console helpers.
[[nodiscard]] bool stdout_is_terminal();
[[nodiscard]] bool stderr_is_terminal();
// Windows: turns on ENABLE_VIRTUAL_TERMINAL_PROCESSING and UTF-8 output; POSIX: nothing.
void prepare_console();
// Columns of the terminal on stdout, or 0 when not a terminal.
[[nodiscard]] int terminal_width();

}  // namespace gpuhost::platform
