// Every fake-NVML scenario, loaded through the real NVML loader (tests/fake_nvml), judged by the
// GPU rules: the exact set of GPU-layer findings is pinned per scenario.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "doctor/rules.h"
#include "doctor/test_rules.h"
#include "gpu/fake_nvml_test_support.h"
#include "knowledge/knowledge.h"
#include "knowledge/test_knowledge.h"

namespace gpuhost::doctor {
namespace {

using IdSeverity = std::multiset<std::pair<std::string, std::string>>;

using knowledge::testing::embedded_knowledge;

HostFacts facts_for(const std::string& scenario, platform::OsFamily os) {
  HostFacts f;
  f.system.os.family = os;
  f.gpu = gpu::testing::snapshot_of(scenario);
  return f;
}

using testing::gpu_findings;

IdSeverity problems(const Findings& findings) {
  IdSeverity out;
  for (const auto& f : findings.all())
    if (f.severity == Severity::warn || f.severity == Severity::fail) out.emplace(f.id, severity_name(f.severity));
  return out;
}

std::string dump(const Findings& findings) {
  std::string s;
  for (const auto& f : findings.all()) s += std::string(severity_name(f.severity)) + " " + f.id + " [" + f.subject + "] " + f.title + "\n";
  return s;
}

TEST(GpuScenarios, NoDriverLoadedSaysModprobe) {
  auto f = facts_for("no_driver", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.driver.not_loaded", "fail"}})) << dump(out);
  EXPECT_NE(out.find("gpu.driver.not_loaded")->fix.find("sudo modprobe nvidia"), std::string::npos);
}

TEST(GpuScenarios, MissingLibraryWithoutNvidiaPciDevice) {
  HostFacts f;
  f.gpu = gpu::testing::snapshot_of("a100_sxm4_80gb_x8", "/nonexistent/libnvidia-ml.so.1");
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.driver.missing", "fail"}})) << dump(out);
  EXPECT_EQ(out.find("gpu.driver.missing")->title, "No NVIDIA driver (and no NVIDIA GPU visible)");
  // With an NVIDIA PCI function present the same failure names the missing driver instead.
  f.linux.pci_display_devices.push_back({"0000:3b:00.0", 0x10de, 0x20b2, 0x030200, "", "", 0});
  auto with_pci = gpu_findings(f);
  EXPECT_EQ(with_pci.find("gpu.driver.missing")->title, "NVIDIA GPU present but no NVIDIA driver installed");
}

TEST(GpuScenarios, HealthyEightA100sHaveNoProblems) {
  auto f = facts_for("a100_sxm4_80gb_x8", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), IdSeverity{}) << dump(out);
  EXPECT_EQ(out.find_all("gpu.identity").size(), 8u);
  EXPECT_EQ(out.find_all("gpu.pcie").size(), 8u);
  EXPECT_EQ(out.find_all("gpu.row_remap").size(), 8u);
  EXPECT_EQ(out.find_all("gpu.ecc").size(), 8u);
  EXPECT_EQ(out.find("gpu.driver")->title, "NVIDIA driver 535.104.05");
  EXPECT_NE(out.find("gpu.identity")->evidence[1].find("compute capability 8.0 (Ampere)"), std::string::npos) << dump(out);
}

TEST(GpuScenarios, T4UnderWddmOnWindows) {
  auto f = facts_for("t4_windows_wddm", platform::OsFamily::windows);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.driver_model.wddm", "warn"}})) << dump(out);
  const Finding* wddm = out.find("gpu.driver_model.wddm");
  EXPECT_NE(wddm->fix.find("nvidia-smi -i 0 -dm 2"), std::string::npos);
  // Persistence mode is a Linux concept: not reported on Windows even though NVML says N/A.
  EXPECT_EQ(out.find("gpu.persistence.off"), nullptr);
}

TEST(GpuScenarios, H100WithPendingRowRemapNeedsAReset) {
  auto f = facts_for("h100_pending_row_remap", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.row_remap.pending", "fail"}, {"gpu.ecc.uncorrected", "fail"}})) << dump(out);
  const Finding* remap = out.find("gpu.row_remap.pending");
  EXPECT_EQ(remap->subject, "GPU 1 (NVIDIA H100 80GB HBM3)");
  EXPECT_NE(remap->fix.find("sudo nvidia-smi -i 1 -r"), std::string::npos);
}

TEST(GpuScenarios, PcieX8Gen3UnderLoadIsAFailure) {
  auto f = facts_for("pcie_x8_gen3", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.pcie.downtrained", "fail"}})) << dump(out);
  EXPECT_EQ(out.find("gpu.pcie.downtrained")->evidence[0], "Gen3 x8 of Gen4 x16");
}

TEST(GpuScenarios, DriverLibraryMismatchSaysReboot) {
  auto f = facts_for("driver_mismatch", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.driver.version_mismatch", "fail"}})) << dump(out);
  EXPECT_NE(out.find("gpu.driver.version_mismatch")->evidence[0].find("NVML_ERROR_LIB_RM_VERSION_MISMATCH"), std::string::npos);
}

TEST(GpuScenarios, UnlicensedVgpuFails) {
  auto f = facts_for("vgpu_unlicensed", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.vgpu.unlicensed", "fail"}})) << dump(out);
  EXPECT_NE(out.find("gpu.vgpu.unlicensed")->fix.find("nvidia-gridd"), std::string::npos);
  auto licensed = gpu_findings(facts_for("vgpu_licensed", platform::OsFamily::linux));
  EXPECT_EQ(problems(licensed), IdSeverity{}) << dump(licensed);
  EXPECT_NE(licensed.find("gpu.vgpu.licensed"), nullptr);
}

TEST(GpuScenarios, MigPendingAResetWarns) {
  auto f = facts_for("mig_pending_reset", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.mig.pending", "warn"}})) << dump(out);
  EXPECT_EQ(out.find("gpu.mig.pending")->evidence[0], "MIG current disabled, pending enabled");
}

TEST(GpuScenarios, LostGpuIsReportedAsXid79) {
  auto f = facts_for("gpu_lost", platform::OsFamily::linux);
  f.linux.kernel_log_read = true;
  f.linux.xid_lines = {"[ 812.331] NVRM: Xid (PCI:0000:3b:00): 79, pid=2211, name=python, GPU has fallen off the bus."};
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.device.unreachable", "fail"}, {"gpu.lost", "fail"}, {"gpu.xid.79", "fail"}})) << dump(out);
  EXPECT_NE(out.find("gpu.lost")->evidence[0].find("Xid 79"), std::string::npos);
}

TEST(GpuScenarios, ThermalSlowdownFails) {
  auto f = facts_for("thermal_slowdown", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.clocks.thermal", "fail"}})) << dump(out);
  const Finding* thermal = out.find("gpu.clocks.thermal");
  EXPECT_NE(thermal->evidence[0].find("sw_thermal_slowdown"), std::string::npos) << thermal->evidence[0];
  EXPECT_NE(thermal->evidence[1].find("90 C"), std::string::npos);
}

TEST(GpuScenarios, MinimalLibraryReportsMissingFunctions) {
  HostFacts f;
  f.gpu = gpu::testing::snapshot_of("a100_sxm4_80gb_x8", gpu::testing::k_fake_nvml_minimal);
  auto out = gpu_findings(f);
  ASSERT_NE(out.find("gpu.nvml.missing_functions"), nullptr) << dump(out);
  EXPECT_NE(out.find("gpu.nvml.missing_functions")->evidence[0].find("nvmlDeviceGetMemoryInfo"), std::string::npos);
}

TEST(GpuScenarios, DriverWithoutGpmIsNotReportedAsMissingFunctions) {
  HostFacts f;
  f.gpu = gpu::testing::snapshot_of("a100_sxm4_80gb_x8");
  f.gpu.missing_symbols = {"nvmlGpmMetricsGet", "nvmlGpmSampleGet"};  // a pre-R520 driver
  auto out = gpu_findings(f);
  EXPECT_EQ(out.find("gpu.nvml.missing_functions"), nullptr) << dump(out);
  f.gpu.missing_symbols.push_back("nvmlDeviceGetMemoryInfo");
  auto with_real_gap = gpu_findings(f);
  ASSERT_NE(with_real_gap.find("gpu.nvml.missing_functions"), nullptr) << dump(with_real_gap);
  EXPECT_EQ(with_real_gap.find("gpu.nvml.missing_functions")->evidence[0], "nvmlDeviceGetMemoryInfo");
}

TEST(GpuScenarios, MalformedScenarioIsAnInitFailureNotACrash) {
  auto f = facts_for("malformed", platform::OsFamily::linux);
  auto out = gpu_findings(f);
  EXPECT_EQ(problems(out), (IdSeverity{{"gpu.driver.init_failed", "fail"}})) << dump(out);
}

}  // namespace
}  // namespace gpuhost::doctor
