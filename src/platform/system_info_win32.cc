// Order matters: winsock2.h before windows.h (from win32_util.h), iphlpapi.h after both;
// initguid.h before devguid.h so GUID_DEVCLASS_DISPLAY is defined here.
// clang-format off
#include <winsock2.h>
#include <ws2tcpip.h>
#include <iphlpapi.h>
#include "platform/win32_util.h"
#include <cfgmgr32.h>
#include <initguid.h>
#include <devguid.h>
#include <setupapi.h>
// clang-format on

#include <algorithm>
#include <cstring>

#include "base/strings.h"
#include "platform/cpu_id.h"
#include "platform/registry.h"
#include "platform/smbios.h"
#include "platform/system_info.h"

namespace gpuhost::platform {
namespace {

constexpr const char* k_current_version = "SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion";

// GetProcAddress through void(*)(), the one cast GCC's -Wcast-function-type accepts.
template <typename Fn>
Fn ntdll_function(const char* name) {
  HMODULE ntdll = GetModuleHandleW(L"ntdll.dll");
  FARPROC proc = ntdll ? GetProcAddress(ntdll, name) : nullptr;
  return reinterpret_cast<Fn>(reinterpret_cast<void (*)()>(proc));
}

std::string registry_string_or_empty(const char* key, const char* value) {
  return registry_read_string(RegistryRoot::local_machine, key, value).value_or("");
}

OsInfo collect_os() {
  OsInfo os;
  os.family = OsFamily::windows;
  // GetVersionEx reports what the application manifest claims to support; RtlGetVersion does not.
  using RtlGetVersionFn = LONG(WINAPI*)(OSVERSIONINFOW*);
  OSVERSIONINFOW version{};
  version.dwOSVersionInfoSize = sizeof version;
  if (auto rtl_get_version = ntdll_function<RtlGetVersionFn>("RtlGetVersion");
      rtl_get_version && rtl_get_version(&version) == 0)
    os.version = std::to_string(version.dwMajorVersion) + "." + std::to_string(version.dwMinorVersion) + "." +
                 std::to_string(version.dwBuildNumber);

  os.name = registry_string_or_empty(k_current_version, "ProductName");
  std::string build = registry_string_or_empty(k_current_version, "CurrentBuild");
  if (build.empty() && version.dwBuildNumber) build = std::to_string(version.dwBuildNumber);
  // Windows 11 (build 22000 and later) still says "Windows 10" in ProductName.
  if (os.name.starts_with("Windows 10") && parse_int(build).value_or(0) >= 22000) os.name.replace(8, 2, "11");
  std::string display_version = registry_string_or_empty(k_current_version, "DisplayVersion");
  if (!display_version.empty() && !os.name.empty()) os.name += " " + display_version;
  if (os.name.empty()) os.name = "Windows";
  os.kernel = build;
  if (auto ubr = registry_read_dword(RegistryRoot::local_machine, k_current_version, "UBR");
      ubr && !build.empty())
    os.kernel += "." + std::to_string(*ubr);

  SYSTEM_INFO system{};
  GetNativeSystemInfo(&system);
  switch (system.wProcessorArchitecture) {
    case PROCESSOR_ARCHITECTURE_AMD64: os.machine = "x86_64"; break;
    case PROCESSOR_ARCHITECTURE_ARM64: os.machine = "arm64"; break;
    case PROCESSOR_ARCHITECTURE_INTEL: os.machine = "x86"; break;
    default: os.machine = "unknown"; break;
  }

  using WineGetVersionFn = const char*(CDECL*)();
  if (auto wine_get_version = ntdll_function<WineGetVersionFn>("wine_get_version")) {
    os.under_wine = true;
    const char* wine_version = wine_get_version();
    os.wine_version = wine_version ? wine_version : "";
  }
  return os;
}

// SMBIOS from the firmware table ('RSMB'), behind its 8-byte RawSMBIOSData header
// (Used20CallingMethod, Major, Minor, DmiRevision, DWORD Length).
DmiInfo smbios_dmi() {
  constexpr DWORD k_rsmb = 'R' << 24 | 'S' << 16 | 'M' << 8 | 'B';
  UINT size = GetSystemFirmwareTable(k_rsmb, 0, nullptr, 0);
  if (size < 8) return {};
  std::string raw(size, '\0');
  if (GetSystemFirmwareTable(k_rsmb, 0, raw.data(), size) != size) return {};
  DWORD length = 0;
  std::memcpy(&length, raw.data() + 4, sizeof length);
  return parse_smbios_table(std::string_view(raw).substr(8, std::min<std::size_t>(length, size - 8)));
}

DmiInfo collect_dmi() {
  DmiInfo dmi = smbios_dmi();
  // HKLM\HARDWARE\DESCRIPTION\System\BIOS holds the same strings (minus the chassis) where the
  // firmware table cannot be read.
  const char* bios_key = "HARDWARE\\DESCRIPTION\\System\\BIOS";
  auto fill = [&](std::string& field, const char* value) {
    if (field.empty()) field = std::string(trim(registry_string_or_empty(bios_key, value)));
  };
  fill(dmi.sys_vendor, "SystemManufacturer");
  fill(dmi.product_name, "SystemProductName");
  fill(dmi.product_version, "SystemVersion");
  fill(dmi.bios_vendor, "BIOSVendor");
  fill(dmi.bios_version, "BIOSVersion");
  fill(dmi.board_vendor, "BaseBoardManufacturer");
  return dmi;
}

bool is_elevated() {
  SID_IDENTIFIER_AUTHORITY nt_authority = SECURITY_NT_AUTHORITY;
  PSID administrators = nullptr;
  if (!AllocateAndInitializeSid(&nt_authority, 2, SECURITY_BUILTIN_DOMAIN_RID, DOMAIN_ALIAS_RID_ADMINS, 0, 0,
                                0, 0, 0, 0, &administrators))
    return false;
  BOOL member = FALSE;
  // With UAC, the Administrators SID is deny-only in a filtered token, so this is false until elevated.
  if (!CheckTokenMembership(nullptr, administrators, &member)) member = FALSE;
  FreeSid(administrators);
  return member != FALSE;
}

std::string hostname() {
  wchar_t name[256];
  DWORD size = static_cast<DWORD>(std::size(name));
  if (!GetComputerNameExW(ComputerNameDnsHostname, name, &size)) return {};
  return to_utf8(std::wstring_view(name, size));
}

template <typename Table>
Result<std::vector<char>> tcp_table(ULONG family) {
  std::vector<char> buffer(sizeof(Table) + 64 * 1024);
  for (int attempt = 0; attempt < 5; ++attempt) {
    DWORD size = static_cast<DWORD>(buffer.size());
    DWORD status = GetExtendedTcpTable(buffer.data(), &size, FALSE, family, TCP_TABLE_OWNER_PID_LISTENER, 0);
    if (status == NO_ERROR) return buffer;
    if (status != ERROR_INSUFFICIENT_BUFFER)
      return std::unexpected(win32_error("listing TCP listeners", status));
    buffer.resize(size + 4096);
  }
  return make_error(ErrorCode::io_error, "listing TCP listeners: the table kept growing");
}

std::string address_text(int family, const void* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (!inet_ntop(family, address, text, sizeof text)) return {};
  return text;
}

// "PCI\VEN_10DE&DEV_20B2&SUBSYS_..." -> the hex after `key`.
std::uint16_t hardware_id_field(std::string_view id, std::string_view key) {
  std::string upper(id);
  std::transform(upper.begin(), upper.end(), upper.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  std::size_t at = upper.find(key);
  if (at == std::string::npos) return 0;
  return static_cast<std::uint16_t>(
      parse_int(std::string_view(upper).substr(at + key.size(), 4), 16).value_or(0));
}

class DeviceInfoSet {
 public:
  explicit DeviceInfoSet(HDEVINFO set) : m_set(set) {}
  DeviceInfoSet(const DeviceInfoSet&) = delete;
  DeviceInfoSet& operator=(const DeviceInfoSet&) = delete;
  ~DeviceInfoSet() {
    if (m_set != INVALID_HANDLE_VALUE) SetupDiDestroyDeviceInfoList(m_set);
  }
  [[nodiscard]] HDEVINFO get() const { return m_set; }

 private:
  HDEVINFO m_set;
};

std::wstring device_property(HDEVINFO set, SP_DEVINFO_DATA& device, DWORD property) {
  std::wstring value(256, L'\0');
  DWORD needed = 0;
  if (!SetupDiGetDeviceRegistryPropertyW(set, &device, property, nullptr,
                                         reinterpret_cast<BYTE*>(value.data()),
                                         static_cast<DWORD>(value.size() * sizeof(wchar_t)), &needed)) {
    if (GetLastError() != ERROR_INSUFFICIENT_BUFFER) return {};
    value.assign(needed / sizeof(wchar_t) + 1, L'\0');
    if (!SetupDiGetDeviceRegistryPropertyW(set, &device, property, nullptr,
                                           reinterpret_cast<BYTE*>(value.data()),
                                           static_cast<DWORD>(value.size() * sizeof(wchar_t)), &needed))
      return {};
  }
  // REG_SZ, or the first string of a REG_MULTI_SZ.
  value.resize(wcsnlen(value.c_str(), value.size()));
  return value;
}

}  // namespace

OsFamily current_os() {
  return OsFamily::windows;
}

SystemInfo collect_system_info() {
  SystemInfo info;
  info.hostname = hostname();
  info.os = collect_os();

  CpuIdInfo cpuid = read_cpuid();
  info.cpu.vendor = cpuid.vendor;
  info.cpu.model = cpuid.brand;
  if (info.cpu.model.empty())
    info.cpu.model =
        registry_string_or_empty("HARDWARE\\DESCRIPTION\\System\\CentralProcessor\\0", "ProcessorNameString");
  info.cpu.logical_cores = static_cast<int>(GetActiveProcessorCount(ALL_PROCESSOR_GROUPS));
  if (info.cpu.logical_cores <= 0) {
    SYSTEM_INFO system{};
    GetSystemInfo(&system);
    info.cpu.logical_cores = static_cast<int>(system.dwNumberOfProcessors);
  }

  MEMORYSTATUSEX memory{};
  memory.dwLength = sizeof memory;
  if (GlobalMemoryStatusEx(&memory)) {
    info.memory.total_bytes = memory.ullTotalPhys;
    info.memory.available_bytes = memory.ullAvailPhys;
    // The commit limit is RAM plus page files.
    info.memory.swap_total_bytes =
        memory.ullTotalPageFile > memory.ullTotalPhys ? memory.ullTotalPageFile - memory.ullTotalPhys : 0;
  }

  info.hypervisor = cpuid.hypervisor;
  info.dmi = collect_dmi();
  info.cloud = detect_cloud(info.dmi);
  info.elevated = is_elevated();
  return info;
}

Result<FileLimit> open_file_limit() {
  return make_error(ErrorCode::unsupported, "reading the open-file limit: Windows has no RLIMIT_NOFILE");
}

Result<std::vector<ListeningSocket>> listening_tcp_sockets() {
  std::vector<ListeningSocket> sockets;
  auto v4 = tcp_table<MIB_TCPTABLE_OWNER_PID>(AF_INET);
  if (!v4) return std::unexpected(v4.error());
  const auto* table4 = reinterpret_cast<const MIB_TCPTABLE_OWNER_PID*>(v4->data());
  for (DWORD i = 0; i < table4->dwNumEntries; ++i) {
    const MIB_TCPROW_OWNER_PID& row = table4->table[i];
    IN_ADDR address{};
    address.S_un.S_addr = row.dwLocalAddr;
    sockets.push_back(ListeningSocket{address_text(AF_INET, &address),
                                      ntohs(static_cast<u_short>(row.dwLocalPort)),
                                      static_cast<long>(row.dwOwningPid)});
  }
  // Absent when IPv6 is off.
  if (auto v6 = tcp_table<MIB_TCP6TABLE_OWNER_PID>(AF_INET6)) {
    const auto* table6 = reinterpret_cast<const MIB_TCP6TABLE_OWNER_PID*>(v6->data());
    for (DWORD i = 0; i < table6->dwNumEntries; ++i) {
      const MIB_TCP6ROW_OWNER_PID& row = table6->table[i];
      sockets.push_back(ListeningSocket{address_text(AF_INET6, row.ucLocalAddr),
                                        ntohs(static_cast<u_short>(row.dwLocalPort)),
                                        static_cast<long>(row.dwOwningPid)});
    }
  }
  return sockets;
}

Result<std::vector<PciDevice>> list_display_devices() {
  std::vector<PciDevice> devices;
  DeviceInfoSet set(SetupDiGetClassDevsW(nullptr, L"PCI", nullptr, DIGCF_ALLCLASSES | DIGCF_PRESENT));
  if (set.get() == INVALID_HANDLE_VALUE) {
    DWORD error = GetLastError();
    // No PCI enumerator at all (Wine without PCI passthrough): nothing to list.
    if (error == ERROR_INVALID_DATA || error == ERROR_INVALID_PARAMETER) return devices;
    return std::unexpected(win32_error("listing PCI devices", error));
  }
  for (DWORD index = 0;; ++index) {
    SP_DEVINFO_DATA device{};
    device.cbSize = sizeof device;
    if (!SetupDiEnumDeviceInfo(set.get(), index, &device)) break;
    std::string hardware_id = to_utf8(device_property(set.get(), device, SPDRP_HARDWAREID));
    std::uint16_t vendor = hardware_id_field(hardware_id, "VEN_");
    bool display = IsEqualGUID(device.ClassGuid, GUID_DEVCLASS_DISPLAY);
    if (vendor != 0x10de && !display) continue;
    PciDevice pci;
    wchar_t instance[MAX_DEVICE_ID_LEN];
    if (SetupDiGetDeviceInstanceIdW(set.get(), &device, instance, MAX_DEVICE_ID_LEN, nullptr))
      pci.address = to_utf8(instance);
    pci.vendor_id = vendor;
    pci.device_id = hardware_id_field(hardware_id, "DEV_");
    pci.description = to_utf8(device_property(set.get(), device, SPDRP_DEVICEDESC));
    pci.driver = to_utf8(device_property(set.get(), device, SPDRP_SERVICE));
    ULONG status = 0, problem = 0;
    if (CM_Get_DevNode_Status(&status, &problem, device.DevInst, 0) == CR_SUCCESS &&
        (status & DN_HAS_PROBLEM))
      pci.problem_code = problem;
    devices.push_back(std::move(pci));
  }
  std::sort(devices.begin(), devices.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
  return devices;
}

Result<std::string> read_kernel_log() {
  return make_error(ErrorCode::unsupported,
                    "reading the kernel log: Windows has none (see the System event log)");
}

bool stdout_is_terminal() {
  DWORD mode = 0;
  return GetConsoleMode(GetStdHandle(STD_OUTPUT_HANDLE), &mode) != 0;
}

bool stderr_is_terminal() {
  DWORD mode = 0;
  return GetConsoleMode(GetStdHandle(STD_ERROR_HANDLE), &mode) != 0;
}

void prepare_console() {
  for (DWORD which : {STD_OUTPUT_HANDLE, STD_ERROR_HANDLE}) {
    HANDLE console = GetStdHandle(which);
    DWORD mode = 0;
    if (GetConsoleMode(console, &mode)) SetConsoleMode(console, mode | ENABLE_VIRTUAL_TERMINAL_PROCESSING);
  }
  SetConsoleOutputCP(CP_UTF8);
}

int terminal_width() {
  CONSOLE_SCREEN_BUFFER_INFO buffer{};
  if (!GetConsoleScreenBufferInfo(GetStdHandle(STD_OUTPUT_HANDLE), &buffer)) return 0;
  return buffer.srWindow.Right - buffer.srWindow.Left + 1;
}

}  // namespace gpuhost::platform
