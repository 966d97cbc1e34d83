#pragma once
// Recorded hosts for the setup tests: doctor's facts as they read on each kind of machine.

#include <string>

#include <gtest/gtest.h>

#include "doctor/facts.h"
#include "knowledge/knowledge.h"
#include "knowledge/test_knowledge.h"
#include "setup/plan.h"

namespace gpuhost::setup::test {

using knowledge::testing::embedded_knowledge;

inline SetupRequest request(std::string env = "/opt/venv") {
  SetupRequest r;
  r.env_dir = std::move(env);
  return r;
}

inline doctor::PythonFacts debian_python() {
  doctor::PythonFacts p;
  p.interpreter = "/usr/bin/python3";
  p.executable = "/usr/bin/python3.11";
  p.version = "3.11.2";
  p.found_by = "PATH";
  p.probed = true;
  p.externally_managed = true;
  return p;
}

// Debian 12 on a cloud-like VM, no NVIDIA GPU.
inline doctor::HostFacts debian_cpu_only() {
  doctor::HostFacts f;
  f.system.os.family = platform::OsFamily::linux;
  f.system.os.name = "Debian GNU/Linux 12 (bookworm)";
  f.system.os.version = "12";
  f.system.os.kernel = "6.1.0-27-cloud-amd64";
  f.system.elevated = true;
  f.security.secure_boot = "off";
  f.pythons.push_back(debian_python());
  return f;
}

// Debian 12 with an NVIDIA GPU on the PCI bus and no driver (NVML does not load).
inline doctor::HostFacts debian_no_driver(std::uint16_t device_id) {
  doctor::HostFacts f = debian_cpu_only();
  f.gpu.available = false;
  f.linux.pci_display_devices.push_back({"0000:00:04.0", 0x10de, device_id, 0x030200, "", "", 0});
  return f;
}

// Linux with a working driver and one GPU as NVML names it.
inline doctor::HostFacts linux_with_driver(std::string name, int cc_major, int cc_minor, std::string driver,
                                           int cuda_driver) {
  doctor::HostFacts f = debian_cpu_only();
  f.gpu.available = true;
  f.gpu.driver_version = std::move(driver);
  f.gpu.cuda_driver_version = cuda_driver;
  gpu::GpuDevice d;
  d.name = std::move(name);
  d.cc_major.value = cc_major;
  d.cc_minor.value = cc_minor;
  f.gpu.devices.push_back(d);
  f.linux.pci_display_devices.push_back({"0000:00:04.0", 0x10de, 0x1eb8, 0x030200, "nvidia", "", 0});
  return f;
}

// Windows Server 2022 on AWS (g4dn) with the licensed GRID driver AWS ships, Python 3.11 from
// python.org, long paths off and Fast Startup at its default (on).
inline doctor::HostFacts windows_grid_t4() {
  doctor::HostFacts f;
  f.system.os.family = platform::OsFamily::windows;
  f.system.os.name = "Windows Server 2022 Datacenter";
  f.system.os.version = "10.0.20348";
  f.system.elevated = true;
  f.system.cloud.cloud = platform::CloudVendor::aws;
  f.gpu.available = true;
  f.gpu.driver_version = "553.62";
  f.gpu.cuda_driver_version = 12040;
  gpu::GpuDevice d;
  d.name = "Tesla T4";
  d.cc_major.value = 7;
  d.cc_minor.value = 5;
  gpu::VgpuLicense licence;
  licence.licensing_supported = true;
  licence.licensed = true;
  licence.feature = "NVIDIA RTX Virtual Workstation";
  licence.state = "licensed";
  d.vgpu_license.value = licence;
  f.gpu.devices.push_back(d);
  f.windows.long_paths_enabled.error = "absent";
  f.windows.hiberboot_enabled.error = "absent";
  doctor::PythonFacts p;
  p.interpreter = "C:\\Program Files\\Python311\\python.exe";
  p.version = "3.11.9";
  p.found_by = "PATH";
  p.probed = true;
  f.pythons.push_back(p);
  return f;
}

// The plan for FACTS, failing the test (with the reason) when there is none.
inline Plan plan_for(const doctor::HostFacts& facts, SetupRequest request = test::request()) {
  auto plan = build_plan(facts, embedded_knowledge(), request);
  EXPECT_TRUE(plan.has_value()) << (plan ? "" : plan.error().message);
  return plan ? *plan : Plan{};
}

}  // namespace gpuhost::setup::test
