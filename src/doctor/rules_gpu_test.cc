#include <gtest/gtest.h>

#include "doctor/rules.h"
#include "doctor/test_rules.h"
#include "knowledge/knowledge.h"
#include "knowledge/test_knowledge.h"

namespace gpuhost::doctor {
namespace {

using knowledge::testing::embedded_knowledge;

using testing::gpu_findings;

HostFacts one_gpu(gpu::PcieLink link, unsigned utilization, std::uint64_t reasons) {
  HostFacts f;
  f.gpu.available = true;
  f.gpu.driver_version = "550.54.15";
  gpu::GpuDevice d;
  d.name = "NVIDIA L4";
  d.pcie.value = link;
  d.utilization.value = gpu::Utilization{utilization, 0};
  d.clocks_event_reasons.value = reasons;
  f.gpu.devices.push_back(d);
  return f;
}

TEST(GpuRules, SlowLinkOnAnIdleGpuGetsTheIdleCaveatNotAFailure) {
  auto out = gpu_findings(one_gpu({1, 4, 4, 16, 16}, 0, gpu::clocks_event::gpu_idle));
  const Finding* idle = out.find("gpu.pcie.idle_link");
  ASSERT_NE(idle, nullptr);
  EXPECT_EQ(idle->severity, Severity::ok);
  EXPECT_NE(idle->evidence[1].find("idle GPUs lower link speed"), std::string::npos);
  EXPECT_EQ(out.find("gpu.pcie.downtrained"), nullptr);
}

TEST(GpuRules, NarrowLinkWhileIdleWarnsAndUnderLoadFails) {
  auto idle = gpu_findings(one_gpu({4, 4, 4, 8, 16}, 0, gpu::clocks_event::gpu_idle));
  EXPECT_EQ(idle.find("gpu.pcie.idle_link")->severity, Severity::warn);
  auto busy = gpu_findings(one_gpu({4, 4, 4, 8, 16}, 95, 0));
  EXPECT_EQ(busy.find("gpu.pcie.downtrained")->severity, Severity::fail);
}

TEST(GpuRules, SlotLimitingTheCardsGenerationWarns) {
  auto out = gpu_findings(one_gpu({3, 3, 4, 16, 16}, 90, 0));
  EXPECT_NE(out.find("gpu.pcie.slot_limited"), nullptr);
  EXPECT_NE(out.find("gpu.pcie"), nullptr);
}

TEST(GpuRules, NouveauBoundAndXidsFromTheKernelLog) {
  HostFacts f;
  f.linux.pci_display_devices.push_back({"0000:00:05.0", 0x10de, 0x1eb8, 0x030200, "nouveau", "", 0});
  f.linux.kernel_log_read = true;
  f.linux.xid_lines = {"NVRM: Xid (PCI:0000:00:05): 13, Graphics Exception",
                       "NVRM: Xid (PCI:0000:00:05): 48, An uncorrectable double bit error"};
  auto out = gpu_findings(f);
  EXPECT_EQ(out.find("gpu.nouveau")->severity, Severity::fail);
  EXPECT_NE(out.find("gpu.nouveau")->fix.find("blacklist nouveau"), std::string::npos);
  EXPECT_EQ(out.find("gpu.xid.13")->severity, Severity::warn);
  EXPECT_EQ(out.find("gpu.xid.48")->severity, Severity::fail);
  // The driver is missing but an NVIDIA device is there: the finding says so.
  EXPECT_EQ(out.find("gpu.driver.missing")->title, "NVIDIA GPU present but no NVIDIA driver installed");
}

TEST(GpuRules, UnreadableKernelLogIsExplained) {
  HostFacts f;
  f.linux.kernel_log_error = "reading /dev/kmsg: Operation not permitted";
  auto out = gpu_findings(f);
  const Finding* unreadable = out.find("gpu.xid.unreadable");
  ASSERT_NE(unreadable, nullptr);
  EXPECT_EQ(unreadable->severity, Severity::info);
}

TEST(GpuRules, WindowsDeviceProblemCodes) {
  HostFacts f;
  f.system.os.family = platform::OsFamily::windows;
  f.windows_devices.display_devices.push_back(
      {"PCI\\VEN_10DE&DEV_1EB8&SUBSYS_12A210DE\\3&2411E6FE&0&28", 0x10de, 0x1eb8, 0, "", "NVIDIA Tesla T4", 43});
  f.windows_devices.display_devices.push_back({"PCI\\VEN_10DE&DEV_20B5\\4&1", 0x10de, 0x20b5, 0, "", "NVIDIA A100", 12});
  f.windows_devices.display_devices.push_back({"PCI\\VEN_1234&DEV_1111\\3&1", 0x1234, 0x1111, 0, "", "Basic Display", 43});
  auto out = gpu_findings(f);
  ASSERT_NE(out.find("gpu.device_problem.43"), nullptr);
  EXPECT_EQ(out.find("gpu.device_problem.43")->subject, "NVIDIA Tesla T4");
  EXPECT_NE(out.find("gpu.device_problem.12")->fix.find("Above 4G decoding"), std::string::npos);
  EXPECT_EQ(out.find_all("gpu.device_problem.43").size(), 1u);  // the non-NVIDIA adapter is not ours to judge
}

TEST(GpuRules, DriverTooOldForTheGpuArchitecture) {
  HostFacts f = one_gpu({4, 4, 4, 16, 16}, 90, 0);
  f.gpu.driver_version = "470.82.01";
  f.gpu.devices[0].name = "NVIDIA H100 80GB HBM3";
  f.gpu.devices[0].cc_major.value = 9;
  f.gpu.devices[0].cc_minor.value = 0;
  auto out = gpu_findings(f);
  const Finding* old = out.find("gpu.driver.too_old_for_gpu");
  ASSERT_NE(old, nullptr);
  EXPECT_NE(old->evidence[0].find("needs at least 520.61.05"), std::string::npos) << old->evidence[0];
}

}  // namespace
}  // namespace gpuhost::doctor
