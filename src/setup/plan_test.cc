#include "setup/plan.h"

#include <gtest/gtest.h>

#include "setup/test_hosts.h"

namespace gpuhost::setup {
namespace {

using test::embedded_knowledge;

const Step* find_step(const Plan& plan, std::string_view id) {
  for (const auto& s : plan.steps)
    if (s.id == id) return &s;
  return nullptr;
}

std::string step_ids(const Plan& plan) {
  std::string out;
  for (const auto& s : plan.steps) out += (out.empty() ? "" : ",") + s.id;
  return out;
}

using test::plan_for;

TEST(SetupPlan, NoDriverOnDebianInstallsOpenModulesFromNvidiasRepoThenVerifies) {
  auto plan = plan_for(test::debian_no_driver(0x2330 /* H100 */));
  EXPECT_EQ(step_ids(plan),
            "driver.prerequisites,driver.repository,driver.install,python.venv_support,python.env,"
            "torch.install,verify.driver,verify.frameworks");
  const Step* install = find_step(plan, "driver.install");
  ASSERT_NE(install, nullptr);
  EXPECT_EQ(install->actions.front(), "apt-get install -y nvidia-open");
  EXPECT_TRUE(install->reboot);
  EXPECT_NE(find_step(plan, "driver.repository")
                ->actions.front()
                .find("/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb"),
            std::string::npos);
  // The torch build is chosen for the production branch the plan installs: a CUDA build, not CPU.
  const Step* torch = find_step(plan, "torch.install");
  ASSERT_NE(torch, nullptr);
  EXPECT_NE(torch->actions.front().find("--index-url https://download.pytorch.org/whl/cu"), std::string::npos)
      << torch->actions.front();
  EXPECT_TRUE(plan.blockers.empty());
}

TEST(SetupPlan, NouveauAndSecureBootAreExplicitStepsBeforeTheDriver) {
  auto facts = test::debian_no_driver(0x2330);
  facts.linux.pci_display_devices.front().driver = "nouveau";
  facts.security.secure_boot = "on";
  facts.security.secure_boot_evidence = "SecureBoot = 1";
  auto plan = plan_for(facts);
  EXPECT_EQ(step_ids(plan).rfind(
                "driver.nouveau,driver.prerequisites,driver.secure_boot,driver.repository,driver.install", 0),
            0u)
      << step_ids(plan);
  const Step* sb = find_step(plan, "driver.secure_boot");
  EXPECT_TRUE(sb->attended);
  EXPECT_TRUE(sb->reboot);
  EXPECT_TRUE(find_step(plan, "driver.nouveau")->reboot);
}

TEST(SetupPlan, AWorkingDriverIsLeftAloneAndV100GetsCu126NotCu13) {
  auto facts = test::linux_with_driver("Tesla V100-SXM2-16GB", 7, 0, "595.58.03", 13020);
  auto plan = plan_for(facts);
  EXPECT_EQ(find_step(plan, "driver.install"), nullptr) << step_ids(plan);
  const Step* torch = find_step(plan, "torch.install");
  ASSERT_NE(torch, nullptr);
  // CUDA 13 wheels start at sm_75; cu126 is the last line with sm_70.
  EXPECT_NE(torch->actions.front().find("/whl/cu126"), std::string::npos) << torch->actions.front();
  // A release with its companions recorded installs all three from the one index.
  auto request = test::request();
  request.frameworks = {{Framework::torch, Version({2, 8})}};
  auto pinned = plan_for(facts, request);
  ASSERT_NE(find_step(pinned, "torch.install"), nullptr);
  EXPECT_EQ(find_step(pinned, "torch.install")->actions.front(),
            "/opt/venv/bin/python -m pip install torch==2.8.0 torchvision==0.23.0 torchaudio==2.8.0 "
            "--index-url https://download.pytorch.org/whl/cu126");
  // The lock expects what the step installs, beside the driver it was chosen for.
  const json::Value* locked = pinned.expected.find("torch");
  ASSERT_NE(locked, nullptr);
  EXPECT_EQ(json::dump(*locked),
            R"({"version":"2.8.0","cuda":"12.6","index_url":"https://download.pytorch.org/whl/cu126"})");
  EXPECT_EQ(json::dump(*pinned.expected.find("driver")), R"("595.58.03")");
}

TEST(SetupPlan, Rtx50NeedsACuda128OrNewerBuild) {
  auto facts = test::linux_with_driver("NVIDIA GeForce RTX 5090", 12, 0, "595.58.03", 13020);
  auto plan = plan_for(facts);
  const Step* torch = find_step(plan, "torch.install");
  ASSERT_NE(torch, nullptr);
  const std::string& cmd = torch->actions.front();
  auto at = cmd.find("/whl/cu");
  ASSERT_NE(at, std::string::npos) << cmd;
  int tag = std::stoi(cmd.substr(at + 7, 3));
  EXPECT_GE(tag, 128) << cmd;
}

TEST(SetupPlan, ADriverTooOldForEveryWheelIsNotReplacedWithoutTheFlag) {
  auto facts = test::linux_with_driver("NVIDIA A100-SXM4-80GB", 8, 0, "450.51.06", 11000);
  auto plan = plan_for(facts);
  ASSERT_FALSE(plan.blockers.empty());
  EXPECT_NE(plan.blockers.front().find("--upgrade-driver"), std::string::npos) << plan.blockers.front();
  EXPECT_EQ(find_step(plan, "driver.install"), nullptr);
  EXPECT_EQ(find_step(plan, "torch.install"), nullptr);

  auto request = test::request();
  request.upgrade_driver = true;
  auto upgraded = plan_for(facts, request);
  EXPECT_TRUE(upgraded.blockers.empty()) << upgraded.blockers.front();
  ASSERT_NE(find_step(upgraded, "driver.install"), nullptr) << step_ids(upgraded);
  EXPECT_NE(find_step(upgraded, "driver.install")->reason.find("too old"), std::string::npos);
  EXPECT_NE(find_step(upgraded, "torch.install")->actions.front().find("/whl/cu"), std::string::npos);
}

TEST(SetupPlan, AGridDriverOnACloudIsNeverReplacedEvenWithTheFlag) {
  auto facts = test::linux_with_driver("NVIDIA A10-24Q", 8, 6, "450.51.06", 11000);
  facts.gpu.devices.front().virtualization.value = gpu::VirtualizationMode::vgpu;
  facts.system.cloud.cloud = platform::CloudVendor::azure;
  auto request = test::request();
  request.upgrade_driver = true;
  auto plan = plan_for(facts, request);
  EXPECT_EQ(find_step(plan, "driver.install"), nullptr);
  ASSERT_FALSE(plan.blockers.empty());
  EXPECT_NE(plan.blockers.front().find("never replaces"), std::string::npos) << plan.blockers.front();
  EXPECT_NE(plan.blockers.front().find("NvidiaGpuDriverLinux"), std::string::npos) << plan.blockers.front();
}

TEST(SetupPlan, WindowsGridDriverIsKeptAndTheSettingsStepsAnswerDoctorsFindings) {
  auto facts = test::windows_grid_t4();
  auto plan = plan_for(facts, test::request("C:\\venvs\\train"));
  EXPECT_EQ(plan.shell, Shell::powershell);
  EXPECT_EQ(find_step(plan, "driver.install"), nullptr);
  const Step* lp = find_step(plan, "windows.long_paths");
  ASSERT_NE(lp, nullptr) << step_ids(plan);
  EXPECT_EQ(lp->finding, "os.windows.long_paths.off");
  ASSERT_NE(find_step(plan, "windows.fast_startup"), nullptr);
  ASSERT_NE(find_step(plan, "windows.vc_runtime"), nullptr);
  const Step* torch = find_step(plan, "torch.install");
  ASSERT_NE(torch, nullptr);
  EXPECT_NE(torch->actions.front().find("& 'C:\\venvs\\train\\Scripts\\python.exe' -m pip install torch=="),
            std::string::npos)
      << torch->actions.front();
  bool kept = false;
  for (const auto& d : plan.decisions) kept = kept || d.find("never replaced") != std::string::npos;
  EXPECT_TRUE(kept);
}

TEST(SetupPlan, WindowsTensorflowGpuNeedsCondaAndOldPythonOrWsl2) {
  auto facts = test::windows_grid_t4();
  auto request = test::request("C:\\venvs\\tf");
  request.frameworks = {{Framework::tensorflow, std::nullopt}};
  auto plan = plan_for(facts, request);  // Python 3.11: above TF 2.10's range
  ASSERT_FALSE(plan.blockers.empty());
  EXPECT_NE(plan.blockers.front().find("2.10"), std::string::npos) << plan.blockers.front();

  request.frameworks = {{Framework::tensorflow, Version({2, 15})}};
  auto newer = plan_for(facts, request);
  ASSERT_FALSE(newer.blockers.empty());
  EXPECT_NE(newer.blockers.front().find("native Windows"), std::string::npos) << newer.blockers.front();

  request = test::request();
  request.env_dir.clear();
  request.conda_name = "tf";
  request.python = Version({3, 10});
  request.frameworks = {{Framework::tensorflow, Version({2, 10})}};
  auto native = plan_for(facts, request);
  EXPECT_TRUE(native.blockers.empty()) << native.blockers.front();
  const Step* tf = find_step(native, "tensorflow.install");
  ASSERT_NE(tf, nullptr);
  EXPECT_EQ(tf->actions.front(), "conda install -y -n tf -c conda-forge cudatoolkit=11.2 cudnn=8.1.0");
}

TEST(SetupPlan, TensorflowGpuIsRefusedWithWhatReplacedIt) {
  auto r = parse_framework("tensorflow-gpu==2.12.0");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("--framework tensorflow"), std::string::npos);
  EXPECT_FALSE(parse_framework("torch==abc").has_value());
  EXPECT_FALSE(parse_framework("jax").has_value());
  ASSERT_TRUE(parse_framework("both").has_value());
  EXPECT_EQ(parse_framework("both")->size(), 2u);
}

TEST(SetupPlan, NoGpuGetsTheCpuBuildAndNoDriverSteps) {
  auto plan = plan_for(test::debian_cpu_only());
  EXPECT_EQ(step_ids(plan), "python.venv_support,python.env,torch.install,verify.frameworks");
  EXPECT_NE(find_step(plan, "torch.install")->actions.front().find("/whl/cpu"), std::string::npos);
}

TEST(SetupPlan, OfflineUsesTheSystemTorchThroughSystemSitePackagesAndSaysSo) {
  auto request = test::request();
  request.offline = true;
  auto plan = plan_for(test::debian_cpu_only(), request);
  EXPECT_EQ(step_ids(plan), "python.venv_support,python.env,torch.system,torch.install,verify.frameworks");
  EXPECT_NE(find_step(plan, "python.env")->actions.front().find("--system-site-packages"), std::string::npos);
  bool said = false;
  for (const auto& d : plan.decisions)
    said = said || d.find("not installed from a wheel index") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(SetupPlan, ForImagePlansTheDriverWithoutAGpuAndMovesChecksToFirstBoot) {
  auto request = test::request();
  request.for_image = true;
  auto plan = plan_for(test::debian_cpu_only(), request);
  ASSERT_NE(find_step(plan, "driver.install"), nullptr) << step_ids(plan);
  EXPECT_EQ(find_step(plan, "verify.frameworks"), nullptr);
  ASSERT_EQ(plan.first_boot.size(), 2u);
  EXPECT_EQ(plan.first_boot.front(), "nvidia-smi -L");
  EXPECT_EQ(plan.first_boot.back(), "gpuhost setup --apply --yes --framework torch --env /opt/venv");
}

TEST(SetupPlan, ToolkitOnlyWhenAskedAndShadowingLibrariesAreNamed) {
  auto facts = test::linux_with_driver("NVIDIA A100-SXM4-80GB", 8, 0, "595.58.03", 13020);
  facts.environment.push_back({"LD_LIBRARY_PATH", "/usr/local/cuda-11.8/lib64:/opt/lib"});
  auto plan = plan_for(facts);
  EXPECT_EQ(find_step(plan, "toolkit.install"), nullptr);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_NE(plan.warnings.front().find("/usr/local/cuda-11.8/lib64"), std::string::npos);

  auto request = test::request();
  request.toolkit = true;
  auto with = plan_for(facts, request);
  ASSERT_NE(find_step(with, "toolkit.install"), nullptr) << step_ids(with);
  EXPECT_NE(find_step(with, "toolkit.install")->actions.front().find("apt-get install -y cuda-toolkit-"),
            std::string::npos);
}

TEST(SetupPlan, APythonVersionNotOnTheHostIsABlockerOnLinuxNotAGuess) {
  auto request = test::request();
  request.python = Version({3, 9});
  auto plan = plan_for(test::debian_cpu_only(), request);
  ASSERT_FALSE(plan.blockers.empty());
  EXPECT_NE(plan.blockers.front().find("--conda"), std::string::npos) << plan.blockers.front();
}

TEST(SetupPlan, AGpuHostWithoutAFittingCudaWheelDoesNotFallBackToCpuSilently) {
  // A Kepler GPU of compute capability 3.0: no wheel in the tables carries its kernels.
  auto facts = test::linux_with_driver("Tesla K10", 3, 0, "470.256.02", 11040);
  auto plan = plan_for(facts);
  ASSERT_FALSE(plan.blockers.empty());
  bool cpu = false;
  for (const auto& b : plan.blockers) cpu = cpu || b.find("--allow-cpu") != std::string::npos;
  EXPECT_TRUE(cpu) << plan.blockers.front();
}

}  // namespace
}  // namespace gpuhost::setup
