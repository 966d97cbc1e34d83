#include <gtest/gtest.h>

#include "doctor/rules.h"

namespace gpuhost::doctor {
namespace {

HostFacts windows_host() {
  HostFacts f;
  f.system.os.family = platform::OsFamily::windows;
  f.system.memory.total_bytes = 64ull << 30;
  return f;
}

RegistryValue absent() { return RegistryValue{std::nullopt, "absent"}; }
RegistryValue dword(std::uint32_t v) { return RegistryValue{v, ""}; }

gpu::GpuDevice wddm_gpu() {
  gpu::GpuDevice d;
  d.name = "Tesla T4";
  d.driver_model.value = gpu::DriverModelState{gpu::DriverModel::wddm, gpu::DriverModel::wddm};
  return d;
}

TEST(WindowsRules, DefaultTdrDelayWarnsOnlyWithAWddmGpu) {
  HostFacts f = windows_host();
  f.windows.tdr_level = absent();
  f.windows.tdr_delay = absent();
  Findings without_gpu;
  judge_os(f, without_gpu);
  ASSERT_NE(without_gpu.find("os.windows.tdr"), nullptr);
  EXPECT_EQ(without_gpu.find("os.windows.tdr")->severity, Severity::ok);

  f.gpu.devices.push_back(wddm_gpu());
  Findings with_gpu;
  judge_os(f, with_gpu);
  const Finding* tdr = with_gpu.find("os.windows.tdr.short");
  ASSERT_NE(tdr, nullptr);
  EXPECT_EQ(tdr->severity, Severity::warn);
  EXPECT_EQ(tdr->evidence[1], "TdrDelay absent (default 2 s)");
  EXPECT_NE(tdr->fix.find("TdrDelay /t REG_DWORD /d 60"), std::string::npos);
}

TEST(WindowsRules, RaisedTdrDelayIsAccepted) {
  HostFacts f = windows_host();
  f.gpu.devices.push_back(wddm_gpu());
  f.windows.tdr_delay = dword(60);
  Findings out;
  judge_os(f, out);
  ASSERT_NE(out.find("os.windows.tdr"), nullptr);
  EXPECT_EQ(out.find("os.windows.tdr")->evidence[1], "TdrDelay 60");
}

TEST(WindowsRules, TdrLevelZeroWarns) {
  HostFacts f = windows_host();
  f.windows.tdr_level = dword(0);
  Findings out;
  judge_os(f, out);
  EXPECT_NE(out.find("os.windows.tdr.disabled"), nullptr);
}

TEST(WindowsRules, FastStartupLongPathsAndRdpFollowTheRegistry) {
  HostFacts f = windows_host();
  f.windows.hiberboot_enabled = absent();  // Windows default: on
  f.windows.long_paths_enabled = absent();
  f.windows.rdp_hardware_gpu = absent();
  Findings defaults;
  judge_os(f, defaults);
  EXPECT_NE(defaults.find("os.windows.fast_startup.on"), nullptr);
  EXPECT_NE(defaults.find("os.windows.long_paths.off"), nullptr);
  EXPECT_NE(defaults.find("os.windows.rdp_gpu.off"), nullptr);

  f.windows.hiberboot_enabled = dword(0);
  f.windows.long_paths_enabled = dword(1);
  f.windows.rdp_hardware_gpu = dword(1);
  Findings set;
  judge_os(f, set);
  EXPECT_EQ(set.find("os.windows.fast_startup")->severity, Severity::ok);
  EXPECT_EQ(set.find("os.windows.long_paths")->severity, Severity::ok);
  EXPECT_EQ(set.find("os.windows.rdp_gpu")->severity, Severity::ok);
}

TEST(WindowsRules, SmallPageFileWarnsAboutWinError1455) {
  HostFacts f = windows_host();
  f.windows.page_file_known = true;
  f.windows.page_file_bytes = 2ull << 30;
  Findings out;
  judge_os(f, out);
  const Finding* pf = out.find("os.windows.page_file.small");
  ASSERT_NE(pf, nullptr);
  EXPECT_NE(pf->title.find("1455"), std::string::npos);
}

TEST(LinuxRules, SmallShmInContainerSuggestsShmSize) {
  HostFacts f;
  f.linux.shm_bytes = 64ull << 20;
  f.linux.in_container = true;
  Findings out;
  judge_os(f, out);
  const Finding* shm = out.find("os.linux.shm.small");
  ASSERT_NE(shm, nullptr);
  EXPECT_NE(shm->fix.find("--shm-size"), std::string::npos);
}

TEST(LinuxRules, LowOpenFileLimitWarnsWithinTheHardLimit) {
  HostFacts f;
  f.linux.open_files_soft = 1024;
  f.linux.open_files_hard = 4096;
  Findings out;
  judge_os(f, out);
  const Finding* nofile = out.find("os.linux.nofile.low");
  ASSERT_NE(nofile, nullptr);
  EXPECT_NE(nofile->fix.find("ulimit -n 4096"), std::string::npos);
}

TEST(LinuxRules, PersistencedCheckedOnlyWithGpus) {
  HostFacts f;
  f.linux.persistenced_known = true;
  Findings none;
  judge_os(f, none);
  EXPECT_EQ(none.find("os.linux.persistenced.off"), nullptr);
  f.gpu.devices.emplace_back();
  Findings with_gpu;
  judge_os(f, with_gpu);
  EXPECT_NE(with_gpu.find("os.linux.persistenced.off"), nullptr);
}

TEST(SecurityRules, ExposedJupyterAndTensorboardWarnButLoopbackDoesNot) {
  HostFacts f;
  f.security.firewall_state = "off";
  f.security.listening = {{"0.0.0.0", 8888, 0}, {"::", 6006, 42}, {"127.0.0.1", 8265, 0}, {"0.0.0.0", 22, 0}};
  Findings out;
  judge_security(f, out);
  EXPECT_NE(out.find("security.firewall.off"), nullptr);
  ASSERT_NE(out.find("security.exposed.8888"), nullptr);
  ASSERT_NE(out.find("security.exposed.6006"), nullptr);
  EXPECT_EQ(out.find("security.exposed.8265"), nullptr);
  EXPECT_EQ(out.find("security.exposed.6006")->evidence[0], "listening on :::6006 (pid 42)");
}

TEST(SecurityRules, NothingExposedIsOk) {
  HostFacts f;
  f.security.firewall_state = "on";
  f.security.listening = {{"127.0.0.1", 8888, 0}};
  Findings out;
  judge_security(f, out);
  EXPECT_EQ(out.find("security.exposed")->severity, Severity::ok);
  EXPECT_EQ(out.find("security.firewall")->severity, Severity::ok);
}

}  // namespace
}  // namespace gpuhost::doctor
