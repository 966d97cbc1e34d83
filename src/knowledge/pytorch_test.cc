#include "knowledge/pytorch.h"

#include <gtest/gtest.h>

#include "knowledge/test_support.h"
#include "knowledge/torch_advice.h"

namespace gpuhost::knowledge {
namespace {

using testing::cc;
using testing::embedded;
using testing::v;

const PytorchTable& pytorch() {
  return embedded().pytorch;
}

const TorchRelease& release(std::string_view version) {
  const TorchRelease* found = pytorch().find_release(v(version));
  EXPECT_NE(found, nullptr) << version;
  return *found;
}

TEST(Pytorch, CudaTagsRoundTrip) {
  EXPECT_EQ(cuda_from_tag("cu121"), v("12.1"));
  EXPECT_EQ(cuda_from_tag("cu118"), v("11.8"));
  EXPECT_EQ(cuda_from_tag("cu102"), v("10.2"));
  EXPECT_EQ(cuda_from_tag("cu130"), v("13.0"));
  EXPECT_EQ(cuda_from_tag("cpu"), std::nullopt);
  EXPECT_EQ(cuda_tag(v("12.6")), "cu126");
}

TEST(Pytorch, ParsesTorchVersionStrings) {
  auto parsed = parse_torch_version("2.1.0+cu121");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->version, v("2.1.0"));
  EXPECT_EQ(parsed->local, "cu121");
  EXPECT_EQ(parsed->cuda, v("12.1"));
  EXPECT_EQ(parse_torch_version("2.2.2")->local, "");
  EXPECT_FALSE(parse_torch_version("torch"));
}

TEST(Pytorch, Torch2_1Cu121IsTheExperimentalBuildWithCudnn8_9) {
  auto installed = identify_torch(pytorch(), "2.1.0+cu121", Os::linux);
  ASSERT_NE(installed.release, nullptr);
  EXPECT_EQ(installed.release->version, v("2.1"));
  ASSERT_NE(installed.build, nullptr);
  EXPECT_EQ(installed.build->channel, TorchChannel::experimental);
  EXPECT_EQ(installed.build->cudnn, v("8.9.2.26"));
  ASSERT_EQ(installed.release->builds.size(), 2u);
  EXPECT_EQ(installed.release->builds[1].cuda, v("11.8"));
}

TEST(Pytorch, PlainPypiTorchOnWindowsIsCpuOnly) {
  auto installed = identify_torch(pytorch(), "2.2.2", Os::windows);
  EXPECT_TRUE(installed.cpu_only);
  EXPECT_EQ(installed.build, nullptr);
  EXPECT_NE(installed.explanation.find("CPU-only on Windows"), std::string::npos) << installed.explanation;
}

TEST(Pytorch, CpuAndRocmLocalVersions) {
  EXPECT_TRUE(identify_torch(pytorch(), "2.2.2+cpu", Os::linux).cpu_only);
  auto rocm = identify_torch(pytorch(), "2.3.0+rocm5.7", Os::linux);
  EXPECT_TRUE(rocm.rocm);
  EXPECT_FALSE(rocm.cpu_only);
}

TEST(Pytorch, PlainPypiTorchOnLinuxUsesTheRecordedPypiCuda) {
  auto installed = identify_torch(pytorch(), "2.0.1", Os::linux);
  ASSERT_NE(installed.build, nullptr);
  EXPECT_EQ(installed.build->cuda, v("11.7"));
  auto unknown = identify_torch(pytorch(), "2.5.1", Os::linux);
  EXPECT_EQ(unknown.build, nullptr);
  EXPECT_FALSE(unknown.cpu_only);
}

TEST(Pytorch, InstallCommandForms) {
  EXPECT_EQ(pytorch().install_command(release("2.1"), release("2.1").find_build(v("12.1"))),
            "pip install torch==2.1.2 --index-url https://download.pytorch.org/whl/cu121");
  EXPECT_EQ(pytorch().install_command(release("1.13"), release("1.13").find_build(v("11.6"))),
            "pip install torch==1.13.1+cu116 --extra-index-url https://download.pytorch.org/whl/cu116");
  EXPECT_EQ(pytorch().install_command(release("2.3"), nullptr),
            "pip install torch==2.3.0 --index-url https://download.pytorch.org/whl/cpu");
  EXPECT_EQ(pytorch().index_url("cu128"), "https://download.pytorch.org/whl/cu128");
}

TEST(Pytorch, PublishedArchLists) {
  const TorchBuild* cu126 = release("2.8").find_build(v("12.6"));
  ASSERT_NE(cu126, nullptr);
  EXPECT_EQ(cu126->arch_list(Os::linux).front(), "sm_50");
  const TorchBuild* cu130 = release("2.12").find_build(v("13.0"));
  ASSERT_NE(cu130, nullptr);
  EXPECT_EQ(cu130->arch_list(Os::linux).back(), "compute_120");
  EXPECT_EQ(cu130->arch_list(Os::windows).back(), "sm_120");
  EXPECT_TRUE(release("2.10").find_build(v("12.8"))->archs.empty());
}

TEST(Pytorch, FutureDatedRowsAreMarked) {
  EXPECT_EQ(release("2.14").provenance.confidence, Confidence::unconfirmed);
  EXPECT_EQ(release("2.13").provenance.confidence, Confidence::secondary);
  EXPECT_EQ(release("2.12").provenance.confidence, Confidence::secondary);
  EXPECT_EQ(release("2.11").provenance.confidence, Confidence::confirmed);
  EXPECT_EQ(pytorch().releases.front().version, v("2.14"));
  EXPECT_EQ(pytorch().releases.back().version, v("1.13"));
}

TEST(TorchAdvice, Torch2_1Cu121RunsOnDriver530_30_02) {
  TorchHost host{Os::linux, v("530.30.02"), std::nullopt, cc("8.0"), v("3.10")};
  auto check = check_torch_build(embedded(), release("2.1"), *release("2.1").find_build(v("12.1")), host);
  EXPECT_TRUE(check.usable);
  ASSERT_TRUE(check.driver);
  EXPECT_EQ(check.driver->kind, DriverVerdictKind::supported);
}

TEST(TorchAdvice, Cu128WheelsDoNotRunOnPascal) {
  TorchHost host{Os::linux, v("570.124.06"), std::nullopt, cc("6.1"), std::nullopt};
  auto check = check_torch_build(embedded(), release("2.8"), *release("2.8").find_build(v("12.8")), host);
  EXPECT_FALSE(check.usable);
  ASSERT_TRUE(check.arch);
  EXPECT_EQ(check.arch->match, ArchMatch::none);
}

TEST(TorchAdvice, Cu130NeedsAnR580Driver) {
  TorchHost host{Os::linux, v("535.104.05"), std::nullopt, cc("8.0"), std::nullopt};
  auto check = check_torch_build(embedded(), release("2.12"), *release("2.12").find_build(v("13.0")), host);
  EXPECT_FALSE(check.usable);
  EXPECT_EQ(check.driver->kind, DriverVerdictKind::unsupported);
}

TEST(TorchAdvice, PythonOutsideTheReleaseRangeIsAProblem) {
  TorchHost host{Os::linux, v("550.54.14"), std::nullopt, cc("8.0"), v("3.12.1")};
  auto check = check_torch_build(embedded(), release("2.3"), *release("2.3").find_build(v("11.8")), host);
  EXPECT_FALSE(check.usable);
  host.python = v("3.11.9");
  EXPECT_TRUE(
      check_torch_build(embedded(), release("2.3"), *release("2.3").find_build(v("11.8")), host).usable);
}

TEST(TorchAdvice, NewestForDriver535OnA100LinuxIsACu12Build) {
  TorchHost host{Os::linux, v("535.104.05"), std::nullopt, cc("8.0"), v("3.11")};
  auto rec = recommend_torch(embedded(), host);
  ASSERT_TRUE(rec);
  ASSERT_NE(rec->build, nullptr);
  EXPECT_EQ(rec->release->version, v("2.13"));
  EXPECT_EQ(rec->build->cuda.major(), 12);
  EXPECT_EQ(rec->build->cuda,
            v("12.6"));  // SASS known beats the cu129 build whose arch list is not published
  EXPECT_EQ(rec->index_url, "https://download.pytorch.org/whl/cu126");
  EXPECT_EQ(rec->install_command,
            "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126");
  EXPECT_EQ(rec->check->driver->kind, DriverVerdictKind::supported_via_minor_version_compat);
  EXPECT_FALSE(rec->cpu_fallback);
}

TEST(TorchAdvice, RequiringFullDriverSupportPicksAnOlderToolkit) {
  TorchHost host{Os::linux, v("535.104.05"), std::nullopt, cc("8.0"), v("3.11")};
  auto rec = recommend_torch(embedded(), host, {DriverPolicy::require_full_support, false, std::nullopt});
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->install_command,
            "pip install torch==2.7.0 --index-url https://download.pytorch.org/whl/cu118");
}

TEST(TorchAdvice, UnconfirmedReleasesOnlyWhenAskedFor) {
  TorchHost host{Os::linux, v("535.104.05"), std::nullopt, cc("8.0"), v("3.11")};
  auto rec =
      recommend_torch(embedded(), host, {DriverPolicy::allow_minor_version_compat, true, std::nullopt});
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->release->version, v("2.14"));
  EXPECT_EQ(rec->build->cuda, v("12.6"));
}

TEST(TorchAdvice, NoDriverGetsTheCpuWheel) {
  TorchHost host{Os::windows, std::nullopt, std::nullopt, std::nullopt, v("3.12")};
  auto rec = recommend_torch(embedded(), host);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->build, nullptr);
  EXPECT_FALSE(rec->cpu_fallback);
  EXPECT_EQ(rec->install_command,
            "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu");
}

TEST(TorchAdvice, OldPythonGetsTheExtraIndexForm) {
  TorchHost host{Os::linux, v("535.104.05"), std::nullopt, cc("8.0"), v("3.7")};
  auto rec = recommend_torch(embedded(), host);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->install_command,
            "pip install torch==1.13.1+cu117 --extra-index-url https://download.pytorch.org/whl/cu117");
}

TEST(TorchAdvice, BlackwellOnAWindows572DriverGetsCu128) {
  TorchHost host{Os::windows, v("572.61"), std::nullopt, cc("12.0"), v("3.12")};
  auto rec = recommend_torch(embedded(), host);
  ASSERT_TRUE(rec);
  ASSERT_NE(rec->build, nullptr);
  EXPECT_EQ(rec->release->version, v("2.11"));
  EXPECT_EQ(rec->build->cuda, v("12.8"));
}

TEST(TorchAdvice, PascalOnR580GetsTheCu126BuildWithSm60) {
  TorchHost host{Os::linux, v("580.65.06"), std::nullopt, cc("6.1"), v("3.11")};
  auto rec = recommend_torch(embedded(), host);
  ASSERT_TRUE(rec);
  ASSERT_NE(rec->build, nullptr);
  EXPECT_EQ(rec->build->cuda, v("12.6"));
  EXPECT_EQ(rec->check->arch->target->text, "sm_60");
  EXPECT_EQ(rec->check->driver->kind, DriverVerdictKind::supported);
}

TEST(TorchAdvice, AGpuNoWheelSupportsFallsBackToCpu) {
  TorchHost host{Os::linux, v("470.82.01"), std::nullopt, cc("3.0"), v("3.10")};
  auto rec = recommend_torch(embedded(), host);
  ASSERT_TRUE(rec);
  EXPECT_EQ(rec->build, nullptr);
  EXPECT_TRUE(rec->cpu_fallback);
  EXPECT_NE(rec->explanation.find("no known CUDA wheel"), std::string::npos) << rec->explanation;
  EXPECT_EQ(rec->index_url, "https://download.pytorch.org/whl/cpu");
}

TEST(TorchAdvice, UnsupportedPythonGivesNothing) {
  TorchHost host{Os::linux, v("535.104.05"), std::nullopt, cc("8.0"), v("3.6")};
  EXPECT_FALSE(recommend_torch(embedded(), host));
}

}  // namespace
}  // namespace gpuhost::knowledge
