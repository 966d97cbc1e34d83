#include <algorithm>
#include <cstring>

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "base/strings.h"
#include "platform/cpu_id.h"
#include "platform/files.h"
#include "platform/posix_util.h"
#include "platform/process.h"
#include "platform/system_info.h"

namespace gpuhost::platform {
namespace {

// "KEY=value" or KEY="value" lines (os-release(5)).
std::string os_release_value(std::string_view text, std::string_view key) {
  for (const std::string& line : split_lines(text)) {
    std::string_view view = trim(line);
    if (!view.starts_with(key) || view.size() <= key.size() || view[key.size()] != '=') continue;
    std::string_view value = trim(view.substr(key.size() + 1));
    if (value.size() >= 2 && (value.front() == '"' || value.front() == '\'') && value.back() == value.front())
      value = value.substr(1, value.size() - 2);
    return std::string(value);
  }
  return {};
}

// "Key<spaces>: value" lines of /proc/cpuinfo and /proc/meminfo.
std::string colon_value(std::string_view text, std::string_view key) {
  for (const std::string& line : split_lines(text)) {
    std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    if (trim(std::string_view(line).substr(0, colon)) == key)
      return std::string(trim(std::string_view(line).substr(colon + 1)));
  }
  return {};
}

std::uint64_t meminfo_bytes(std::string_view text, std::string_view key) {
  std::vector<std::string> fields = split_whitespace(colon_value(text, key));
  if (fields.empty()) return 0;
  auto value = parse_int(fields[0]);
  if (!value || *value < 0) return 0;
  std::uint64_t scale = fields.size() > 1 && fields[1] == "kB" ? 1024 : 1;
  return static_cast<std::uint64_t>(*value) * scale;
}

std::string dmi_file(const char* name) {
  std::string path = std::string("/sys/class/dmi/id/") + name;
  return std::string(trim(read_text_file_or_empty(path.c_str())));
}

OsInfo collect_os() {
  OsInfo os;
  os.family = OsFamily::linux;
  std::string release = read_text_file_or_empty("/etc/os-release");
  if (release.empty()) release = read_text_file_or_empty("/usr/lib/os-release");
  os.name = os_release_value(release, "PRETTY_NAME");
  if (os.name.empty()) os.name = os_release_value(release, "NAME");
  if (os.name.empty()) os.name = "Linux";
  os.version = os_release_value(release, "VERSION_ID");
  struct utsname uts;
  if (::uname(&uts) == 0) {
    os.kernel = uts.release;
    os.machine = uts.machine;
  }
  return os;
}

std::string text_address(int family, std::string_view hex) {
  char text[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET && hex.size() == 8) {
    // The kernel prints the address as one host-order word of the network-order bytes.
    auto word = parse_int(hex, 16);
    if (!word) return {};
    struct in_addr addr;
    addr.s_addr = static_cast<std::uint32_t>(*word);
    ::inet_ntop(AF_INET, &addr, text, sizeof text);
  } else if (family == AF_INET6 && hex.size() == 32) {
    struct in6_addr addr;
    for (int i = 0; i < 4; ++i) {
      auto word = parse_int(hex.substr(static_cast<std::size_t>(i) * 8, 8), 16);
      if (!word) return {};
      auto value = static_cast<std::uint32_t>(*word);
      std::memcpy(reinterpret_cast<unsigned char*>(&addr) + i * 4, &value, 4);
    }
    ::inet_ntop(AF_INET6, &addr, text, sizeof text);
  }
  return text;
}

// /proc/net/tcp{,6}: "sl local_address rem_address st ...", addresses as HEXADDR:HEXPORT, state 0A = LISTEN.
void parse_proc_net_tcp(std::string_view text, int family, std::vector<ListeningSocket>& out) {
  bool header = true;
  for (const std::string& line : split_lines(text)) {
    if (header) {
      header = false;
      continue;
    }
    std::vector<std::string> fields = split_whitespace(line);
    if (fields.size() < 4 || fields[3] != "0A") continue;
    std::size_t colon = fields[1].find(':');
    if (colon == std::string::npos) continue;
    auto port = parse_int(std::string_view(fields[1]).substr(colon + 1), 16);
    std::string address = text_address(family, std::string_view(fields[1]).substr(0, colon));
    if (!port || address.empty()) continue;
    out.push_back(ListeningSocket{address, static_cast<int>(*port), 0});
  }
}

std::optional<long long> hex_file(const std::string& path) {
  std::string text(trim(read_text_file_or_empty(path.c_str())));
  if (text.starts_with("0x")) text.erase(0, 2);
  if (text.empty()) return std::nullopt;
  return parse_int(text, 16);
}

// One /dev/kmsg record is "pri,seq,ts_usec,flags[,...];message\n" followed by optional " KEY=value"
// lines (Documentation/ABI/testing/dev-kmsg).
std::string_view kmsg_message(std::string_view record) {
  std::size_t semicolon = record.find(';');
  if (semicolon == std::string_view::npos) return {};
  std::string_view message = record.substr(semicolon + 1);
  std::size_t newline = message.find('\n');
  return newline == std::string_view::npos ? message : message.substr(0, newline);
}

}  // namespace

OsFamily current_os() {
  return OsFamily::linux;
}

SystemInfo collect_system_info() {
  SystemInfo info;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) info.hostname = host;
  info.os = collect_os();

  CpuIdInfo cpuid = read_cpuid();
  std::string cpuinfo = read_text_file_or_empty("/proc/cpuinfo");
  info.cpu.vendor = colon_value(cpuinfo, "vendor_id");
  if (info.cpu.vendor.empty()) info.cpu.vendor = cpuid.vendor;
  info.cpu.model = colon_value(cpuinfo, "model name");
  if (info.cpu.model.empty()) info.cpu.model = cpuid.brand;
  if (info.cpu.model.empty()) info.cpu.model = colon_value(cpuinfo, "Model");  // some Arm kernels
  info.cpu.logical_cores = static_cast<int>(std::max(0L, ::sysconf(_SC_NPROCESSORS_ONLN)));

  std::string meminfo = read_text_file_or_empty("/proc/meminfo");
  info.memory.total_bytes = meminfo_bytes(meminfo, "MemTotal");
  info.memory.available_bytes = meminfo_bytes(meminfo, "MemAvailable");
  info.memory.swap_total_bytes = meminfo_bytes(meminfo, "SwapTotal");

  info.hypervisor = cpuid.hypervisor;

  info.dmi.sys_vendor = dmi_file("sys_vendor");
  info.dmi.product_name = dmi_file("product_name");
  info.dmi.product_version = dmi_file("product_version");
  info.dmi.bios_vendor = dmi_file("bios_vendor");
  info.dmi.bios_version = dmi_file("bios_version");
  info.dmi.board_vendor = dmi_file("board_vendor");
  info.dmi.chassis_vendor = dmi_file("chassis_vendor");
  info.dmi.chassis_asset_tag = dmi_file("chassis_asset_tag");
  info.cloud = detect_cloud(info.dmi);

  info.elevated = ::geteuid() == 0;
  return info;
}

Result<FileLimit> open_file_limit() {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return std::unexpected(posix_error("reading RLIMIT_NOFILE", errno));
  auto value = [](rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<std::uint64_t>(v); };
  return FileLimit{value(limit.rlim_cur), value(limit.rlim_max)};
}

Result<std::vector<ListeningSocket>> listening_tcp_sockets() {
  std::vector<ListeningSocket> sockets;
  auto ipv4 = read_file("/proc/net/tcp");
  if (!ipv4) return std::unexpected(ipv4.error());
  parse_proc_net_tcp(*ipv4, AF_INET, sockets);
  // Absent when IPv6 is disabled.
  parse_proc_net_tcp(read_text_file_or_empty("/proc/net/tcp6"), AF_INET6, sockets);
  return sockets;
}

Result<std::vector<PciDevice>> list_display_devices() {
  const std::string root = "/sys/bus/pci/devices";
  std::vector<PciDevice> devices;
  DirStream dir(::opendir(root.c_str()));
  if (!dir.get()) {
    if (errno == ENOENT) return devices;  // no PCI bus (some containers and microVMs)
    return std::unexpected(posix_error("listing " + root, errno));
  }
  while (struct dirent* ent = ::readdir(dir.get())) {
    std::string name = ent->d_name;
    if (name == "." || name == "..") continue;
    std::string base = root + "/" + name;
    auto vendor = hex_file(base + "/vendor");
    auto device = hex_file(base + "/device");
    auto class_code = hex_file(base + "/class");
    if (!vendor || !class_code) continue;
    bool display_class = ((*class_code >> 16) & 0xff) == 0x03;
    if (*vendor != 0x10de && !display_class) continue;
    PciDevice pci;
    pci.address = name;
    pci.vendor_id = static_cast<std::uint16_t>(*vendor);
    pci.device_id = static_cast<std::uint16_t>(device.value_or(0));
    pci.class_code = static_cast<std::uint32_t>(*class_code);
    char target[4096];
    ssize_t n = ::readlink((base + "/driver").c_str(), target, sizeof target - 1);
    if (n > 0) {
      std::string_view link(target, static_cast<std::size_t>(n));
      std::size_t slash = link.rfind('/');
      pci.driver = std::string(slash == std::string_view::npos ? link : link.substr(slash + 1));
    }
    devices.push_back(std::move(pci));
  }
  std::sort(devices.begin(), devices.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.address < b.address; });
  return devices;
}

Result<std::string> read_kernel_log() {
  UniqueFd fd(::open("/dev/kmsg", O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.valid()) {
    std::vector<std::string> lines;
    char record[8192];
    for (;;) {
      ssize_t n = ::read(fd.get(), record, sizeof record);
      if (n < 0 && (errno == EINTR || errno == EPIPE)) continue;  // EPIPE: records overwritten while reading
      if (n < 0 && errno == EAGAIN) break;
      if (n < 0) return std::unexpected(posix_error("reading /dev/kmsg", errno));
      if (n == 0) break;
      lines.emplace_back(kmsg_message(std::string_view(record, static_cast<std::size_t>(n))));
    }
    return join(lines, "\n");
  }
  Error kmsg_error = posix_error("reading /dev/kmsg", errno);

  ProcessOptions options;
  options.argv = {"dmesg"};
  options.timeout = std::chrono::seconds(10);
  auto dmesg = run_process(options);
  if (dmesg && dmesg->succeeded()) return std::move(dmesg->stdout_text);
  if (kmsg_error.code == ErrorCode::permission_denied)
    kmsg_error.message += " (kernel.dmesg_restrict hides the kernel log from unprivileged users)";
  return std::unexpected(kmsg_error);
}

bool stdout_is_terminal() {
  return ::isatty(STDOUT_FILENO) == 1;
}
bool stderr_is_terminal() {
  return ::isatty(STDERR_FILENO) == 1;
}

void prepare_console() {}

int terminal_width() {
  struct winsize size {};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

}  // namespace gpuhost::platform
