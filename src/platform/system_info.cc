// The OS-independent part of system_info.h: names, cloud detection from DMI strings, socket helpers.
#include "platform/system_info.h"

#include <array>

#include "base/strings.h"

namespace gpuhost::platform {
namespace {

constexpr std::array k_clouds = {CloudVendor::aws,       CloudVendor::azure,   CloudVendor::gcp,
                                 CloudVendor::alibaba,   CloudVendor::tencent, CloudVendor::huawei,
                                 CloudVendor::volcengine};

enum class Match { equals, contains };

struct DmiRule {
  CloudVendor cloud;
  const char* field_name;
  std::string DmiInfo::*field;
  Match match;
  const char* text;
};

// First match wins; comparisons ignore case and surrounding blanks. Each string's source is the
// line next to it. Azure comes first: its asset tag is unique, while "Microsoft Corporation" /
// "Virtual Machine" is also any Hyper-V guest.
const DmiRule k_dmi_rules[] = {
    // cloud-init tools/ds-identify (is_azure_chassis); canonical/cloud-init
    {CloudVendor::azure, "chassis_asset_tag", &DmiInfo::chassis_asset_tag, Match::equals,
     "7783-7084-3265-9085-8269-3286-77"},

    // Nitro: systemd src/basic/virt.c (dmi_vendor_table "Amazon EC2"); bin456789/reinstall trans.sh
    // (is_dmi_contains: "Manufacturer: Amazon EC2", "Vendor: Amazon EC2", "Asset Tag: Amazon EC2");
    // KarpelesLab/cloudinfo dmi.go (sys_vendor "Amazon EC2", chassis_asset_tag "Amazon EC2").
    {CloudVendor::aws, "sys_vendor", &DmiInfo::sys_vendor, Match::equals, "Amazon EC2"},
    {CloudVendor::aws, "bios_vendor", &DmiInfo::bios_vendor, Match::equals, "Amazon EC2"},
    {CloudVendor::aws, "board_vendor", &DmiInfo::board_vendor, Match::equals, "Amazon EC2"},
    {CloudVendor::aws, "chassis_asset_tag", &DmiInfo::chassis_asset_tag, Match::equals, "Amazon EC2"},
    // Xen-era instances say sys_vendor "Xen" and version "4.2.amazon": cloudius-systems/osv issue #547
    // (BIOS Version: 4.2.amazon); DMI dump https://pastebin.com/PVb6UP99 (product_version "4.2.amazon").
    {CloudVendor::aws, "bios_version", &DmiInfo::bios_version, Match::contains, ".amazon"},
    {CloudVendor::aws, "product_version", &DmiInfo::product_version, Match::contains, ".amazon"},

    // cloud-init tools/ds-identify (dscheck_GCE) and cloudinit/sources/DataSourceGCE.py
    // (platform_reports_gce: product name "Google Compute Engine" or "Google").
    {CloudVendor::gcp, "product_name", &DmiInfo::product_name, Match::equals, "Google Compute Engine"},
    {CloudVendor::gcp, "product_name", &DmiInfo::product_name, Match::equals, "Google"},
    // KarpelesLab/cloudinfo dmi.go (sys_vendor "Google").
    {CloudVendor::gcp, "sys_vendor", &DmiInfo::sys_vendor, Match::equals, "Google"},

    // cloud-init cloudinit/sources/DataSourceAliYun.py (ALIYUN_PRODUCT) and ds-identify (dscheck_AliYun).
    {CloudVendor::alibaba, "product_name", &DmiInfo::product_name, Match::equals, "Alibaba Cloud ECS"},
    // FreeBSD-Ask/FreeBSD-Ask di-3-zhang-freebsd-install-more/di-3.11-aliyun.md (hostnamectl
    // "Hardware Vendor: Alibaba Cloud"); bin456789/reinstall trans.sh ("Manufacturer: Alibaba Cloud").
    {CloudVendor::alibaba, "sys_vendor", &DmiInfo::sys_vendor, Match::equals, "Alibaba Cloud"},

    // bin456789/reinstall trans.sh ("Manufacturer: Tencent Cloud"; dmidecode does not say which
    // structure, so the system, board and chassis manufacturers are all checked).
    {CloudVendor::tencent, "sys_vendor", &DmiInfo::sys_vendor, Match::equals, "Tencent Cloud"},
    {CloudVendor::tencent, "board_vendor", &DmiInfo::board_vendor, Match::equals, "Tencent Cloud"},
    {CloudVendor::tencent, "chassis_vendor", &DmiInfo::chassis_vendor, Match::equals, "Tencent Cloud"},

    // cloud-init tools/ds-identify (dscheck_OpenStack: chassis asset tag "HUAWEICLOUD").
    {CloudVendor::huawei, "chassis_asset_tag", &DmiInfo::chassis_asset_tag, Match::equals, "HUAWEICLOUD"},
    // bin456789/reinstall trans.sh ("Manufacturer: Huawei Cloud"; structure not stated, as above).
    // Plain "Huawei" is not enough: Huawei also sells the bare-metal servers people run themselves.
    {CloudVendor::huawei, "sys_vendor", &DmiInfo::sys_vendor, Match::equals, "Huawei Cloud"},
    {CloudVendor::huawei, "board_vendor", &DmiInfo::board_vendor, Match::equals, "Huawei Cloud"},
    {CloudVendor::huawei, "chassis_vendor", &DmiInfo::chassis_vendor, Match::equals, "Huawei Cloud"},

    // Volcengine: UNCONFIRMED. No public DMI dump, cloud-init check or detection code naming
    // Volcengine's SMBIOS strings was found; this matches the brand name and may miss real instances.
    {CloudVendor::volcengine, "sys_vendor", &DmiInfo::sys_vendor, Match::contains, "Volcengine"},
    {CloudVendor::volcengine, "product_name", &DmiInfo::product_name, Match::contains, "Volcengine"},
    {CloudVendor::volcengine, "chassis_asset_tag", &DmiInfo::chassis_asset_tag, Match::contains,
     "Volcengine"},
};

}  // namespace

const char* os_family_name(OsFamily os) {
  return os == OsFamily::windows ? "windows" : "linux";
}

const char* cloud_vendor_id(CloudVendor cloud) {
  switch (cloud) {
    case CloudVendor::none: return "none";
    case CloudVendor::aws: return "aws";
    case CloudVendor::azure: return "azure";
    case CloudVendor::gcp: return "gcp";
    case CloudVendor::alibaba: return "alibaba";
    case CloudVendor::tencent: return "tencent";
    case CloudVendor::huawei: return "huawei";
    case CloudVendor::volcengine: return "volcengine";
  }
  return "none";
}

const char* cloud_vendor_name(CloudVendor cloud) {
  switch (cloud) {
    case CloudVendor::none: return "none";
    case CloudVendor::aws: return "Amazon Web Services";
    case CloudVendor::azure: return "Microsoft Azure";
    case CloudVendor::gcp: return "Google Cloud";
    case CloudVendor::alibaba: return "Alibaba Cloud";
    case CloudVendor::tencent: return "Tencent Cloud";
    case CloudVendor::huawei: return "Huawei Cloud";
    case CloudVendor::volcengine: return "Volcengine";
  }
  return "none";
}

std::optional<CloudVendor> parse_cloud_vendor(std::string_view id) {
  if (iequals(id, "none")) return CloudVendor::none;
  for (CloudVendor cloud : k_clouds)
    if (iequals(id, cloud_vendor_id(cloud))) return cloud;
  return std::nullopt;
}

CloudDetection detect_cloud(const DmiInfo& dmi) {
  for (const DmiRule& rule : k_dmi_rules) {
    std::string_view value = trim(dmi.*rule.field);
    if (value.empty()) continue;
    bool hit = rule.match == Match::equals ? iequals(value, rule.text) : contains_icase(value, rule.text);
    if (hit) return CloudDetection{rule.cloud, std::string(rule.field_name) + "=" + std::string(value)};
  }
  return {};
}

bool ListeningSocket::loopback() const {
  return address.starts_with("127.") || address == "::1" || address.starts_with("::ffff:127.");
}

}  // namespace gpuhost::platform
