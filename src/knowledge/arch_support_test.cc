#include "knowledge/arch_support.h"

#include <gtest/gtest.h>

#include "knowledge/test_support.h"

namespace gpuhost::knowledge {
namespace {

using testing::cc;
using testing::embedded;
using testing::v;

const ArchSupportTable& arch_table() {
  return embedded().arch_support;
}

const std::vector<std::string> k_torch_21_archs = {"sm_50", "sm_60", "sm_70", "sm_75",
                                                   "sm_80", "sm_86", "sm_90"};

TEST(ComputeCapability, ParsesMajorDotMinor) {
  EXPECT_EQ(ComputeCapability::parse("8.6"), (ComputeCapability{8, 6}));
  EXPECT_EQ(ComputeCapability::parse("12.0"), (ComputeCapability{12, 0}));
  EXPECT_FALSE(ComputeCapability::parse("8"));
  EXPECT_FALSE(ComputeCapability::parse("8.10"));
  EXPECT_FALSE(ComputeCapability::parse("x.y"));
  EXPECT_LT(cc("9.0"), cc("10.0"));
  EXPECT_EQ(cc("10.3").str(), "10.3");
}

TEST(ArchTarget, ParsesSassPtxAndSuffixes) {
  auto sm80 = ArchTarget::parse("sm_80");
  ASSERT_TRUE(sm80);
  EXPECT_EQ(sm80->kind, ArchTarget::Kind::sass);
  EXPECT_EQ(sm80->cc, cc("8.0"));
  auto ptx = ArchTarget::parse("compute_120");
  ASSERT_TRUE(ptx);
  EXPECT_EQ(ptx->kind, ArchTarget::Kind::ptx);
  EXPECT_EQ(ptx->cc, cc("12.0"));
  EXPECT_EQ(ArchTarget::parse("sm_90a")->suffix, 'a');
  EXPECT_EQ(ArchTarget::parse("sm_103")->cc, cc("10.3"));
  EXPECT_FALSE(ArchTarget::parse("sm_8"));
  EXPECT_FALSE(ArchTarget::parse("gfx90a"));
}

TEST(ArchListFit, SassRunsOnTheSameMajorWithEqualOrHigherMinor) {
  auto a100 = fit_arch_list(k_torch_21_archs, cc("8.0"));
  EXPECT_EQ(a100.match, ArchMatch::sass);
  EXPECT_EQ(a100.target->text, "sm_80");
  auto l4 = fit_arch_list(k_torch_21_archs, cc("8.9"));
  EXPECT_EQ(l4.match, ArchMatch::sass);
  EXPECT_EQ(l4.target->text, "sm_86");
  auto p40 = fit_arch_list(k_torch_21_archs, cc("6.1"));
  EXPECT_EQ(p40.target->text, "sm_60");
}

TEST(ArchListFit, NothingRunsOnANewerMajorWithoutPtx) {
  auto rtx5090 = fit_arch_list(k_torch_21_archs, cc("12.0"));
  EXPECT_EQ(rtx5090.match, ArchMatch::none);
  EXPECT_NE(rtx5090.explanation.find("no kernel image"), std::string::npos);
  EXPECT_EQ(fit_arch_list(k_torch_21_archs, cc("3.7")).match, ArchMatch::none);
}

TEST(ArchListFit, PtxIsJitCompiledForNewerDevices) {
  std::vector<std::string> archs = {"sm_80", "compute_90"};
  auto fit = fit_arch_list(archs, cc("12.0"));
  EXPECT_EQ(fit.match, ArchMatch::ptx_jit);
  EXPECT_EQ(fit.target->text, "compute_90");
  EXPECT_EQ(fit_arch_list(archs, cc("8.6")).match, ArchMatch::sass);  // SASS beats PTX
  EXPECT_EQ(fit_arch_list(archs, cc("7.5")).match, ArchMatch::none);  // PTX never runs below its version
}

TEST(ArchListFit, ArchSpecificTargetsRunOnlyOnThatExactDevice) {
  std::vector<std::string> archs = {"sm_90a"};
  EXPECT_EQ(fit_arch_list(archs, cc("9.0")).match, ArchMatch::sass);
  EXPECT_EQ(fit_arch_list(archs, cc("9.1")).match, ArchMatch::none);
  std::vector<std::string> family = {"sm_100f"};
  EXPECT_EQ(fit_arch_list(family, cc("10.3")).match, ArchMatch::sass);
}

TEST(ArchSupport, Cuda13DropsVolta) {
  auto support = arch_table().cuda_supports(v("13.0"), cc("7.0"));
  EXPECT_EQ(support.status, CudaCcStatus::dropped);
  ASSERT_NE(support.event, nullptr);
  EXPECT_EQ(support.event->cuda, v("13.0"));
  EXPECT_EQ(arch_table().cuda_supports(v("12.9"), cc("7.0")).status, CudaCcStatus::supported);
  EXPECT_EQ(arch_table().cuda_supports(v("13.0"), cc("7.5")).status, CudaCcStatus::supported);
}

TEST(ArchSupport, KeplerDropsAtCuda11And12) {
  EXPECT_EQ(arch_table().cuda_supports(v("11.0"), cc("3.0")).status, CudaCcStatus::dropped);
  EXPECT_EQ(arch_table().cuda_supports(v("10.2"), cc("3.0")).status, CudaCcStatus::supported);
  auto k80 = arch_table().cuda_supports(v("12.0"), cc("3.7"));
  EXPECT_EQ(k80.status, CudaCcStatus::dropped);
  ASSERT_NE(k80.event, nullptr);
  EXPECT_EQ(k80.event->cuda, v("12.0"));
  EXPECT_EQ(arch_table().cuda_supports(v("11.8"), cc("3.7")).status, CudaCcStatus::supported);
}

TEST(ArchSupport, NewArchitecturesNeedTheirFirstToolkit) {
  EXPECT_EQ(arch_table().cuda_supports(v("11.7"), cc("9.0")).status, CudaCcStatus::not_yet_supported);
  EXPECT_EQ(arch_table().cuda_supports(v("11.8"), cc("9.0")).status, CudaCcStatus::supported);
  EXPECT_EQ(arch_table().cuda_supports(v("12.6"), cc("12.0")).status, CudaCcStatus::not_yet_supported);
  EXPECT_EQ(arch_table().cuda_supports(v("12.8"), cc("12.0")).status, CudaCcStatus::supported);
  EXPECT_EQ(arch_table().cuda_supports(v("12.8"), cc("12.1")).status, CudaCcStatus::not_yet_supported);
  EXPECT_EQ(arch_table().cuda_supports(v("12.9"), cc("10.3")).status, CudaCcStatus::supported);
  EXPECT_EQ(arch_table().cuda_supports(v("11.0"), cc("8.6")).status, CudaCcStatus::not_yet_supported);
}

TEST(ArchSupport, UnknownComputeCapability) {
  EXPECT_EQ(arch_table().cuda_supports(v("12.4"), cc("1.3")).status, CudaCcStatus::unknown);
}

TEST(ArchSupport, RemovalEventsAgreeWithTheLastSupportedMajor) {
  for (const auto& event : arch_table().events) {
    if (event.kind != "removed") continue;
    for (const auto& c : event.compute_capabilities) {
      const auto* arch = arch_table().find(c);
      ASSERT_NE(arch, nullptr) << c.str();
      ASSERT_TRUE(arch->last_cuda_major) << c.str();
      EXPECT_EQ(*arch->last_cuda_major + 1, event.cuda.major()) << c.str();
    }
  }
}

TEST(ArchSupport, MinDriverForAGpuFollowsItsFirstToolkit) {
  EXPECT_EQ(min_driver_for_compute_capability(embedded(), cc("9.0"), Os::linux), v("520.61.05"));
  EXPECT_EQ(min_driver_for_compute_capability(embedded(), cc("8.0"), Os::linux), v("450.51.05"));
  EXPECT_EQ(min_driver_for_compute_capability(embedded(), cc("12.0"), Os::windows), v("570.65"));
  EXPECT_EQ(min_driver_for_compute_capability(embedded(), cc("1.3"), Os::linux), std::nullopt);
}

}  // namespace
}  // namespace gpuhost::knowledge
