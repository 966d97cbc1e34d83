#include <gtest/gtest.h>

#include "doctor/report.h"
#include "doctor/rules.h"
#include "knowledge/knowledge.h"
#include "knowledge/test_knowledge.h"

namespace gpuhost::doctor {
namespace {

using knowledge::testing::embedded_knowledge;

// A Linux host with one A100 on driver 535.104.05 (CUDA 12.2).
HostFacts a100_host() {
  HostFacts f;
  f.gpu.available = true;
  f.gpu.driver_version = "535.104.05";
  f.gpu.cuda_driver_version = 12020;
  gpu::GpuDevice d;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.cc_major.value = 8;
  d.cc_minor.value = 0;
  f.gpu.devices.push_back(d);
  return f;
}

PythonFacts python_with_torch(std::string version, std::string cuda) {
  PythonFacts p;
  p.interpreter = "/opt/venv/bin/python3";
  p.version = "3.11.9";
  p.probed = true;
  p.torch.installed = true;
  p.torch.imported = true;
  p.torch.version = std::move(version);
  p.torch.cuda_build = std::move(cuda);
  return p;
}

Findings frameworks(const HostFacts& f) {
  Findings out;
  judge_frameworks(f, embedded_knowledge(), out);
  return out;
}

TEST(FrameworkRules, CpuOnlyTorchOnAGpuHostFailsWithTheRightCudaBuild) {
  HostFacts f = a100_host();
  f.pythons.push_back(python_with_torch("2.2.2+cpu", ""));
  auto out = frameworks(f);
  const Finding* cpu = out.find("frameworks.torch.cpu_only");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->severity, Severity::fail);
  // Driver 535 runs CUDA 12.x wheels (minor-version compatibility); CC 8.0 is in every 12.x list.
  EXPECT_NE(cpu->fix.find("/opt/venv/bin/python3 -m pip install torch=="), std::string::npos) << cpu->fix;
  EXPECT_NE(cpu->fix.find("--index-url https://download.pytorch.org/whl/cu12"), std::string::npos) << cpu->fix;
}

TEST(FrameworkRules, AnExternallyManagedPythonIsNeverToldToPipInstall) {
  // Debian 12's /usr/bin/python3 refuses pip installs (PEP 668): the fix is a venv from setup.
  HostFacts f = a100_host();
  PythonFacts p = python_with_torch("2.2.2+cpu", "");
  p.interpreter = "/usr/bin/python3";
  p.externally_managed = true;
  f.pythons.push_back(p);
  auto out = frameworks(f);
  const Finding* cpu = out.find("frameworks.torch.cpu_only");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->fix.find("/usr/bin/python3 -m pip"), std::string::npos) << cpu->fix;
  EXPECT_EQ(cpu->fix.rfind("gpuhost setup --framework torch==", 0), 0u) << cpu->fix;
  EXPECT_NE(cpu->fix.find("PEP 668"), std::string::npos) << cpu->fix;
}

TEST(FrameworkRules, TorchBuiltForANewerCudaThanTheDriverFails) {
  HostFacts f = a100_host();
  f.gpu.driver_version = "470.82.01";
  f.gpu.cuda_driver_version = 11040;
  f.pythons.push_back(python_with_torch("2.4.0+cu124", "12.4"));
  auto out = frameworks(f);
  const Finding* old = out.find("frameworks.torch.driver_too_old");
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->severity, Severity::fail);
  EXPECT_NE(old->fix.find("install driver"), std::string::npos) << old->fix;
}

TEST(FrameworkRules, ArchListWithoutThisGpuFails) {
  HostFacts f = a100_host();
  f.gpu.driver_version = "570.124.06";
  f.gpu.cuda_driver_version = 12080;
  f.gpu.devices[0].name = "NVIDIA GeForce GTX 1080";
  f.gpu.devices[0].cc_major.value = 6;
  f.gpu.devices[0].cc_minor.value = 1;
  PythonFacts p = python_with_torch("2.8.0+cu128", "12.8");
  p.torch.arch_list = {"sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"};
  f.pythons.push_back(p);
  auto out = frameworks(f);
  const Finding* arch = out.find("frameworks.torch.arch_mismatch");
  ASSERT_NE(arch, nullptr);
  EXPECT_EQ(arch->severity, Severity::fail);
  EXPECT_NE(arch->title.find("compute capability 6.1"), std::string::npos);
}

TEST(FrameworkRules, CudaUnavailableOnAGpuHostFailsWithTorchsReason) {
  HostFacts f = a100_host();
  PythonFacts p = python_with_torch("2.1.2+cu121", "12.1");
  p.torch.arch_list = {"sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"};
  p.torch.cuda_unavailable_reason = "CUDA initialization: CUDA driver initialization failed";
  f.pythons.push_back(p);
  auto out = frameworks(f);
  const Finding* unavailable = out.find("frameworks.torch.cuda_unavailable");
  ASSERT_NE(unavailable, nullptr);
  EXPECT_EQ(unavailable->evidence[0], "CUDA initialization: CUDA driver initialization failed");
}

TEST(FrameworkRules, WorkingCudaTorchIsOk) {
  HostFacts f = a100_host();
  PythonFacts p = python_with_torch("2.1.2+cu121", "12.1");
  p.torch.cuda_available = true;
  p.torch.arch_list = {"sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"};
  p.torch.devices = {"NVIDIA A100-SXM4-80GB (8.0)"};
  f.pythons.push_back(p);
  auto out = frameworks(f);
  ASSERT_NE(out.find("frameworks.torch"), nullptr);
  EXPECT_EQ(out.count(Severity::fail), 0u);
}

TEST(FrameworkRules, TensorflowAfter2_10OnNativeWindowsCannotUseTheGpu) {
  HostFacts f = a100_host();
  f.system.os.family = platform::OsFamily::windows;
  f.system.os.version = "10.0.20348";
  f.gpu.driver_version = "537.13";
  PythonFacts p;
  p.interpreter = "C:\\Python311\\python.exe";
  p.version = "3.11.9";
  p.tensorflow.installed = true;
  p.tensorflow.version = "2.15.0";
  p.tensorflow_gpu_version = "2.10.0";
  f.pythons.push_back(p);
  auto out = frameworks(f);
  const Finding* tf = out.find("frameworks.tensorflow.no_gpu_support");
  ASSERT_NE(tf, nullptr);
  EXPECT_EQ(tf->severity, Severity::fail);
  EXPECT_NE(tf->evidence[0].find("2.10"), std::string::npos) << tf->evidence[0];
  EXPECT_FALSE(tf->fix.empty());
  const Finding* obsolete = out.find("frameworks.tensorflow_gpu.obsolete");
  ASSERT_NE(obsolete, nullptr);
  EXPECT_NE(obsolete->fix.find("uninstall -y tensorflow-gpu"), std::string::npos);
}

TEST(FrameworkRules, NoPythonsAndSkippedProbesAreReported) {
  HostFacts f = a100_host();
  EXPECT_NE(frameworks(f).find("frameworks.python.none"), nullptr);
  f.python_skipped = true;
  EXPECT_NE(frameworks(f).find("frameworks.skipped"), nullptr);
}

TEST(CudaRules, ToolkitNewerThanTheDriverFailsAndNamesTheMinimum) {
  HostFacts f = a100_host();
  f.gpu.driver_version = "470.82.01";
  f.gpu.cuda_driver_version = 11040;
  f.cuda.toolkits.push_back({"/usr/local/cuda-12.4", "12.4.131", "/usr/local/cuda-12.4"});
  Findings out;
  judge_cuda(f, embedded_knowledge(), out);
  const Finding* old = out.find("cuda.toolkit.driver_too_old");
  ASSERT_NE(old, nullptr);
  EXPECT_NE(old->fix.find("550.54.15"), std::string::npos) << old->fix;  // 12.4 U1 Linux minimum
}

TEST(CudaRules, MinorVersionCompatibilityIsAWarning) {
  HostFacts f = a100_host();
  f.cuda.toolkits.push_back({"/usr/local/cuda-12.4", "12.4.131", "/usr/local/cuda-12.4"});
  Findings out;
  judge_cuda(f, embedded_knowledge(), out);
  ASSERT_NE(out.find("cuda.toolkit.minor_version_compat"), nullptr);
  EXPECT_EQ(out.find("cuda.toolkit.minor_version_compat")->severity, Severity::warn);
}

TEST(CudaRules, RiskyVariablesAreFlagged) {
  HostFacts f = a100_host();
  f.cuda.risky_environment = {{"CUDA_VISIBLE_DEVICES", ""}, {"CUDA_INJECTION64_PATH", "/opt/tool.so"}};
  Findings out;
  judge_cuda(f, embedded_knowledge(), out);
  EXPECT_NE(out.find("cuda.env.visible_devices.none"), nullptr);
  EXPECT_NE(out.find("cuda.env.cuda_injection64_path"), nullptr);
  EXPECT_NE(out.find("cuda.env.cuda_injection64_path")->fix.find("unset CUDA_INJECTION64_PATH"), std::string::npos);
}

TEST(Preflight, RecommendsACudaWheelForTheDriverAndAPythonEach) {
  HostFacts f = a100_host();
  PythonFacts a = python_with_torch("2.1.2+cu121", "12.1");
  PythonFacts b = a;
  b.version = "3.10.12";
  f.pythons = {a, b};
  Findings out;
  judge_preflight(f, embedded_knowledge(), out);
  auto torch = out.find_all("preflight.torch");
  ASSERT_EQ(torch.size(), 2u);
  EXPECT_NE(torch[0]->fix.find("download.pytorch.org/whl/cu12"), std::string::npos) << torch[0]->fix;
  ASSERT_NE(out.find("preflight.tensorflow"), nullptr);
  EXPECT_NE(out.find("preflight.tensorflow")->fix.find("tensorflow[and-cuda]"), std::string::npos);
}

TEST(Report, FactsSurviveAJsonRoundTripAndJudgeTheSame) {
  HostFacts f = a100_host();
  f.system.hostname = "train-01";
  f.pythons.push_back(python_with_torch("2.2.2+cpu", ""));
  f.windows.tdr_delay = {60u, ""};
  f.linux.xid_lines = {"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."};
  f.linux.kernel_log_read = true;
  f.security.listening = {{"0.0.0.0", 8888, 12}};
  Report report;
  report.facts = f;
  report.findings = evaluate(f, embedded_knowledge());
  report.judged_from = "this host";
  std::string text = json::dump(report_to_json(report));
  auto back = facts_from_report(text);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(json::dump(to_json(*back)), json::dump(to_json(f)));
  auto again = evaluate(*back, embedded_knowledge());
  ASSERT_EQ(again.all().size(), report.findings.all().size());
  for (std::size_t i = 0; i < again.all().size(); ++i) EXPECT_EQ(again.all()[i].id, report.findings.all()[i].id);
}

TEST(Report, RejectsDocumentsThatAreNotReports) {
  EXPECT_NE(facts_from_report("[1,2]").error().message.find("not a gpuhost doctor report"), std::string::npos);
  EXPECT_NE(facts_from_report(R"({"schema": "other/1"})").error().message.find("not a gpuhost doctor report"), std::string::npos);
  EXPECT_NE(facts_from_report(R"({"schema": "gpuhost.doctor/9", "facts": {}})").error().message.find("update gpuhost"),
            std::string::npos);
  auto wrong = facts_from_report(R"({"schema": "gpuhost.doctor/1", "facts": {"pythons": [{"torch": {"arch_list": "sm_80"}}]}})");
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().message, "facts.pythons[0].torch.arch_list: expected an array, found string");
}

}  // namespace
}  // namespace gpuhost::doctor
