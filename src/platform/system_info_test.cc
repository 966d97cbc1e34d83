#include "platform/system_info.h"

#include <algorithm>
#include <iostream>

#include <gtest/gtest.h>

#include "platform/cpu_id.h"
#include "platform/smbios.h"
#include "platform/test_support.h"

namespace gpuhost::platform {
namespace {

using test_support::on_windows;

TEST(SystemInfo, CollectsTheBasics) {
  SystemInfo info = collect_system_info();
  EXPECT_EQ(info.os.family, current_os());
  EXPECT_FALSE(info.hostname.empty());
  EXPECT_FALSE(info.os.name.empty());
  EXPECT_FALSE(info.os.machine.empty());
  EXPECT_GT(info.cpu.logical_cores, 0);
  EXPECT_GT(info.memory.total_bytes, 0u);
  EXPECT_LE(info.memory.available_bytes, info.memory.total_bytes);
  if (info.os.under_wine) {
    EXPECT_FALSE(info.os.wine_version.empty());
  }
  if (info.hypervisor.present) {
    EXPECT_FALSE(info.hypervisor.name.empty());
  }
  // What this host looks like, for the person reading the test log.
  std::cout << "os=" << info.os.name << " version=" << info.os.version << " kernel=" << info.os.kernel
            << " machine=" << info.os.machine << " wine=" << info.os.wine_version
            << "\ncpu=" << info.cpu.vendor << " / " << info.cpu.model << " x" << info.cpu.logical_cores
            << " hypervisor=" << info.hypervisor.signature << "\ndmi: sys_vendor=" << info.dmi.sys_vendor
            << " product_name=" << info.dmi.product_name << " bios_vendor=" << info.dmi.bios_vendor
            << " chassis_asset_tag=" << info.dmi.chassis_asset_tag
            << "\ncloud=" << cloud_vendor_id(info.cloud.cloud) << " elevated=" << info.elevated << "\n";
}

TEST(SystemInfo, NamesOsFamilies) {
  EXPECT_STREQ(os_family_name(OsFamily::linux), "linux");
  EXPECT_STREQ(os_family_name(OsFamily::windows), "windows");
}

TEST(Hypervisor, NamesKnownSignatures) {
  EXPECT_EQ(hypervisor_name("KVMKVMKVM"), "KVM");
  EXPECT_EQ(hypervisor_name("Microsoft Hv"), "Hyper-V");
  EXPECT_EQ(hypervisor_name("XenVMMXenVMM"), "Xen");
  EXPECT_EQ(hypervisor_name("SomethingNew"), "SomethingNew");
}

DmiInfo dmi_with(std::string DmiInfo::*field, std::string value) {
  DmiInfo dmi;
  dmi.*field = std::move(value);
  return dmi;
}

TEST(CloudDetection, FindsAwsNitro) {
  DmiInfo dmi;
  dmi.sys_vendor = "Amazon EC2";
  dmi.product_name = "p4d.24xlarge";
  dmi.bios_vendor = "Amazon EC2";
  dmi.chassis_asset_tag = "Amazon EC2";
  auto found = detect_cloud(dmi);
  EXPECT_EQ(found.cloud, CloudVendor::aws);
  EXPECT_EQ(found.evidence, "sys_vendor=Amazon EC2");
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::bios_vendor, "Amazon EC2")).cloud, CloudVendor::aws);
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::chassis_asset_tag, "Amazon EC2")).cloud, CloudVendor::aws);
}

TEST(CloudDetection, FindsAwsXen) {
  DmiInfo dmi;
  dmi.sys_vendor = "Xen";
  dmi.product_name = "HVM domU";
  dmi.product_version = "4.2.amazon";
  dmi.bios_vendor = "Xen";
  dmi.bios_version = "4.2.amazon";
  auto found = detect_cloud(dmi);
  EXPECT_EQ(found.cloud, CloudVendor::aws);
  EXPECT_EQ(found.evidence, "bios_version=4.2.amazon");
  dmi.bios_version.clear();
  EXPECT_EQ(detect_cloud(dmi).cloud, CloudVendor::aws);
}

TEST(CloudDetection, FindsAzureByChassisAssetTag) {
  DmiInfo dmi;
  dmi.sys_vendor = "Microsoft Corporation";
  dmi.product_name = "Virtual Machine";
  dmi.chassis_asset_tag = "7783-7084-3265-9085-8269-3286-77";
  auto found = detect_cloud(dmi);
  EXPECT_EQ(found.cloud, CloudVendor::azure);
  EXPECT_EQ(found.evidence, "chassis_asset_tag=7783-7084-3265-9085-8269-3286-77");
}

TEST(CloudDetection, PlainHyperVGuestIsNotAzure) {
  DmiInfo dmi;
  dmi.sys_vendor = "Microsoft Corporation";
  dmi.product_name = "Virtual Machine";
  dmi.chassis_asset_tag = "1234-5678-9012-3456-7890-1234-56";
  EXPECT_EQ(detect_cloud(dmi).cloud, CloudVendor::none);
}

TEST(CloudDetection, FindsGcp) {
  DmiInfo dmi;
  dmi.sys_vendor = "Google";
  dmi.product_name = "Google Compute Engine";
  dmi.bios_vendor = "Google";
  auto found = detect_cloud(dmi);
  EXPECT_EQ(found.cloud, CloudVendor::gcp);
  EXPECT_EQ(found.evidence, "product_name=Google Compute Engine");
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::sys_vendor, "Google")).cloud, CloudVendor::gcp);
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::product_name, "Google")).cloud, CloudVendor::gcp);
}

TEST(CloudDetection, FindsAlibaba) {
  DmiInfo dmi;
  dmi.sys_vendor = "Alibaba Cloud";
  dmi.product_name = "Alibaba Cloud ECS";
  EXPECT_EQ(detect_cloud(dmi).cloud, CloudVendor::alibaba);
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::sys_vendor, "Alibaba Cloud")).cloud, CloudVendor::alibaba);
}

TEST(CloudDetection, FindsTencent) {
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::sys_vendor, "Tencent Cloud")).cloud, CloudVendor::tencent);
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::chassis_vendor, "Tencent Cloud")).cloud, CloudVendor::tencent);
}

TEST(CloudDetection, FindsHuawei) {
  DmiInfo dmi;
  dmi.sys_vendor = "OpenStack Foundation";
  dmi.product_name = "OpenStack Nova";
  dmi.chassis_asset_tag = "HUAWEICLOUD";
  auto found = detect_cloud(dmi);
  EXPECT_EQ(found.cloud, CloudVendor::huawei);
  EXPECT_EQ(found.evidence, "chassis_asset_tag=HUAWEICLOUD");
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::sys_vendor, "Huawei Cloud")).cloud, CloudVendor::huawei);
}

TEST(CloudDetection, BareMetalHuaweiServerIsNotHuaweiCloud) {
  DmiInfo dmi;
  dmi.sys_vendor = "Huawei";
  dmi.product_name = "2288H V5";
  EXPECT_EQ(detect_cloud(dmi).cloud, CloudVendor::none);
}

TEST(CloudDetection, FindsVolcengineByBrandName) {
  EXPECT_EQ(detect_cloud(dmi_with(&DmiInfo::sys_vendor, "Volcengine")).cloud, CloudVendor::volcengine);
}

TEST(CloudDetection, IgnoresCaseAndSurroundingBlanks) {
  auto found = detect_cloud(dmi_with(&DmiInfo::sys_vendor, "  amazon ec2\n"));
  EXPECT_EQ(found.cloud, CloudVendor::aws);
  EXPECT_EQ(found.evidence, "sys_vendor=amazon ec2");
}

TEST(CloudDetection, FindsNothingOnOrdinaryHardware) {
  EXPECT_EQ(detect_cloud(DmiInfo{}).cloud, CloudVendor::none);
  DmiInfo dmi;
  dmi.sys_vendor = "QEMU";
  dmi.product_name = "Standard PC (Q35 + ICH9, 2009)";
  dmi.bios_vendor = "SeaBIOS";
  auto found = detect_cloud(dmi);
  EXPECT_EQ(found.cloud, CloudVendor::none);
  EXPECT_TRUE(found.evidence.empty());
}

TEST(CloudVendorIds, RoundTrip) {
  for (CloudVendor cloud :
       {CloudVendor::none, CloudVendor::aws, CloudVendor::azure, CloudVendor::gcp, CloudVendor::alibaba,
        CloudVendor::tencent, CloudVendor::huawei, CloudVendor::volcengine}) {
    EXPECT_EQ(parse_cloud_vendor(cloud_vendor_id(cloud)), cloud) << cloud_vendor_id(cloud);
    EXPECT_STRNE(cloud_vendor_name(cloud), "");
  }
  EXPECT_EQ(parse_cloud_vendor("AWS"), CloudVendor::aws);
  EXPECT_FALSE(parse_cloud_vendor("oracle"));
}

// One SMBIOS structure: formatted area (type, length, handle, then `body`) and its strings.
std::string smbios_structure(std::uint8_t type, std::string body, std::vector<std::string> strings) {
  std::string out;
  out += static_cast<char>(type);
  out += static_cast<char>(4 + body.size());
  out += std::string("\x00\x00", 2);
  out += body;
  if (strings.empty()) return out + std::string(2, '\0');
  for (const auto& s : strings) out += s + '\0';
  return out + '\0';
}

TEST(Smbios, ParsesBiosSystemBoardAndChassisStrings) {
  std::string table;
  table += smbios_structure(0, std::string("\x01\x02\x00\x00", 4), {"Amazon EC2", "1.0"});
  table += smbios_structure(1, std::string("\x01\x02\x03\x00", 4), {"Amazon EC2", "g5.xlarge", " "});
  table += smbios_structure(2, std::string("\x01\x00", 2), {"Amazon EC2"});
  table += smbios_structure(4, std::string("\x00\x00", 2), {});
  table += smbios_structure(3, std::string("\x01\x01\x00\x00\x02", 5), {"Amazon EC2", "7783-7084"});
  table += smbios_structure(1, std::string("\x01\x00\x00\x00", 4), {"Second system ignored"});
  table += smbios_structure(127, "", {});
  DmiInfo dmi = parse_smbios_table(table);
  EXPECT_EQ(dmi.bios_vendor, "Amazon EC2");
  EXPECT_EQ(dmi.bios_version, "1.0");
  EXPECT_EQ(dmi.sys_vendor, "Amazon EC2");
  EXPECT_EQ(dmi.product_name, "g5.xlarge");
  EXPECT_EQ(dmi.product_version, "");
  EXPECT_EQ(dmi.board_vendor, "Amazon EC2");
  EXPECT_EQ(dmi.chassis_vendor, "Amazon EC2");
  EXPECT_EQ(dmi.chassis_asset_tag, "7783-7084");
}

TEST(Smbios, StopsAtTruncatedStructure) {
  std::string table = smbios_structure(1, std::string("\x01\x02\x00\x00", 4), {"Vendor", "Product"});
  table += smbios_structure(3, std::string("\x01\x00\x00\x00\x01", 5), {"Chassis"});
  DmiInfo whole = parse_smbios_table(table);
  EXPECT_EQ(whole.chassis_asset_tag, "Chassis");
  DmiInfo cut = parse_smbios_table(table.substr(0, table.size() - 4));
  EXPECT_EQ(cut.sys_vendor, "Vendor");
  EXPECT_EQ(cut.chassis_asset_tag, "");
  EXPECT_EQ(parse_smbios_table("").sys_vendor, "");
  EXPECT_EQ(parse_smbios_table(std::string("\x01\x02", 2)).sys_vendor, "");
}

TEST(ListeningSocket, ClassifiesAddresses) {
  EXPECT_TRUE((ListeningSocket{"127.0.0.1", 80, 0}).loopback());
  EXPECT_TRUE((ListeningSocket{"::1", 80, 0}).loopback());
  EXPECT_TRUE((ListeningSocket{"::ffff:127.0.0.1", 80, 0}).loopback());
  EXPECT_FALSE((ListeningSocket{"10.0.0.1", 80, 0}).loopback());
  EXPECT_TRUE((ListeningSocket{"0.0.0.0", 80, 0}).all_interfaces());
  EXPECT_TRUE((ListeningSocket{"::", 80, 0}).all_interfaces());
  EXPECT_FALSE((ListeningSocket{"127.0.0.1", 80, 0}).all_interfaces());
}

TEST(ListeningSocket, FindsSocketThisTestOpened) {
  test_support::LoopbackListener listener;
  ASSERT_GT(listener.port(), 0);
  auto sockets = listening_tcp_sockets();
  ASSERT_TRUE(sockets) << sockets.error().message;
  auto it = std::find_if(sockets->begin(), sockets->end(), [&](const ListeningSocket& s) {
    return s.port == listener.port() && s.address == "127.0.0.1";
  });
  ASSERT_NE(it, sockets->end()) << "port " << listener.port() << " not among " << sockets->size()
                                << " sockets";
  EXPECT_TRUE(it->loopback());
  // Wine 8 reports no owning pid in GetExtendedTcpTable.
  if (on_windows() && !collect_system_info().os.under_wine) {
    EXPECT_GT(it->pid, 0);
  }
}

TEST(OpenFileLimit, ReadsRlimitOrIsUnsupported) {
  auto limit = open_file_limit();
  if (on_windows()) {
    ASSERT_FALSE(limit);
    EXPECT_EQ(limit.error().code, ErrorCode::unsupported);
    return;
  }
  ASSERT_TRUE(limit) << limit.error().message;
  EXPECT_GT(limit->soft, 0u);
  EXPECT_LE(limit->soft, limit->hard);
}

TEST(DisplayDevices, ListsDisplayClassOrNvidiaDevices) {
  auto devices = list_display_devices();
  ASSERT_TRUE(devices) << devices.error().message;
  for (const PciDevice& device : *devices) {
    EXPECT_FALSE(device.address.empty());
    if (!on_windows()) {
      EXPECT_TRUE(device.vendor_id == 0x10de || ((device.class_code >> 16) & 0xff) == 0x03);
    }
  }
}

TEST(KernelLog, ReadsOrExplainsWhyNot) {
  auto log = read_kernel_log();
  if (on_windows()) {
    ASSERT_FALSE(log);
    EXPECT_EQ(log.error().code, ErrorCode::unsupported);
    return;
  }
  if (!log) {
    EXPECT_TRUE(log.error().code == ErrorCode::permission_denied || log.error().code == ErrorCode::not_found)
        << log.error().message;
    EXPECT_NE(log.error().message.find("/dev/kmsg"), std::string::npos);
  }
}

TEST(Console, ReportsTerminalState) {
  prepare_console();
  EXPECT_GE(terminal_width(), 0);
  // Under CTest stdout is a pipe, never a terminal.
  if (!stdout_is_terminal()) {
    EXPECT_EQ(terminal_width(), 0);
  }
}

TEST(CpuId, ReportsVendorOnX86) {
  CpuIdInfo cpuid = read_cpuid();
  SystemInfo info = collect_system_info();
  if (!cpuid.vendor.empty()) {
    EXPECT_EQ(info.hypervisor.present, cpuid.hypervisor.present);
    EXPECT_FALSE(cpuid.brand.empty());
  }
}

}  // namespace
}  // namespace gpuhost::platform
