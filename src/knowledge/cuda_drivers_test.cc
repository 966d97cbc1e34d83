#include "knowledge/cuda_drivers.h"

#include <gtest/gtest.h>

#include "knowledge/test_support.h"

namespace gpuhost::knowledge {
namespace {

using testing::embedded;
using testing::v;

const CudaDriverTable& drivers() {
  return embedded().cuda_drivers;
}

TEST(CudaDrivers, NewestFullySupportedForDriver535_104_05OnLinuxIs12_2) {
  const auto* row = drivers().newest_fully_supported(v("535.104.05"), Os::linux);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(major_minor(row->cuda), v("12.2"));
  EXPECT_EQ(row->release, "12.2 Update 2");
}

TEST(CudaDrivers, NewestFullySupportedFollowsUpdateRows) {
  EXPECT_EQ(drivers().newest_fully_supported(v("535.54.03"), Os::linux)->cuda, v("12.2.0"));
  EXPECT_EQ(drivers().newest_fully_supported(v("537.13"), Os::windows)->cuda, v("12.2.2"));
  EXPECT_EQ(drivers().newest_fully_supported(v("470.82.01"), Os::linux)->cuda, v("11.4.4"));
  EXPECT_EQ(drivers().newest_fully_supported(v("595.71.05"), Os::linux)->cuda, v("13.2.2"));
  EXPECT_EQ(drivers().newest_fully_supported(v("400.0"), Os::linux), nullptr);
}

TEST(CudaDrivers, WindowsSkipsThirteenRowsWithoutAMinimum) {
  const auto* row = drivers().newest_fully_supported(v("581.57"), Os::windows);
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->cuda, v("12.9.1"));
}

TEST(CudaDrivers, MinDriverUsesTheGaRowForMajorMinor) {
  EXPECT_EQ(drivers().min_driver(v("12.4"), Os::linux), v("550.54.14"));
  EXPECT_EQ(drivers().min_driver(v("12.4.0"), Os::linux), v("550.54.14"));
  EXPECT_EQ(drivers().min_driver(v("12.4.1"), Os::linux), v("550.54.15"));
  EXPECT_EQ(drivers().min_driver(v("12.4"), Os::windows), v("551.61"));
  EXPECT_EQ(drivers().min_driver(v("11.0"), Os::linux), v("450.51.05"));
  EXPECT_EQ(drivers().min_driver(v("10.1.243"), Os::linux), v("418.39"));
  EXPECT_EQ(drivers().min_driver(v("12.7"), Os::linux), std::nullopt);  // no 12.7 release exists
  EXPECT_EQ(drivers().min_driver(v("13.0"), Os::windows), std::nullopt);
  EXPECT_EQ(drivers().min_driver(v("13.0"), Os::linux), v("580.65.06"));
}

TEST(CudaDrivers, MinorVersionFloorsPerFamily) {
  ASSERT_NE(drivers().minor_version_floor(12), nullptr);
  EXPECT_EQ(drivers().minor_version_floor(12)->min_driver(Os::linux), v("525"));
  EXPECT_EQ(drivers().minor_version_floor(12)->upper_driver_exclusive, v("580"));
  EXPECT_EQ(drivers().minor_version_floor(11)->min_driver(Os::linux), v("450.80.02"));
  EXPECT_EQ(drivers().minor_version_floor(11)->min_driver(Os::windows), v("452.39"));
  EXPECT_EQ(drivers().minor_version_floor(13)->min_driver(Os::windows), v("580"));
  EXPECT_EQ(drivers().minor_version_floor(10), nullptr);
}

TEST(CudaDrivers, Cuda12_1OnDriver530_30_02IsSupported) {
  auto verdict = drivers().verdict({v("12.1"), v("530.30.02"), Os::linux, std::nullopt});
  EXPECT_EQ(verdict.kind, DriverVerdictKind::supported) << verdict.explanation;
  EXPECT_EQ(verdict.required_driver, v("530.30.02"));
}

TEST(CudaDrivers, Cuda12_4OnDriver535IsMinorVersionCompatible) {
  auto verdict = drivers().verdict({v("12.4"), v("535.104.05"), Os::linux, std::nullopt});
  EXPECT_EQ(verdict.kind, DriverVerdictKind::supported_via_minor_version_compat);
  EXPECT_EQ(verdict.required_driver, v("550.54.14"));
  EXPECT_EQ(verdict.minor_version_floor, v("525"));
  EXPECT_NE(verdict.explanation.find("cudaErrorUnsupportedPtxVersion"), std::string::npos)
      << verdict.explanation;
}

TEST(CudaDrivers, Cuda12_4OnDriver470IsUnsupportedAndNamesTheMinimum) {
  auto verdict = drivers().verdict({v("12.4"), v("470.82.01"), Os::linux, std::nullopt});
  EXPECT_EQ(verdict.kind, DriverVerdictKind::unsupported);
  EXPECT_EQ(verdict.required_driver, v("550.54.14"));
  EXPECT_NE(verdict.explanation.find(">= 550.54.14"), std::string::npos) << verdict.explanation;
}

TEST(CudaDrivers, WindowsThirteenWithoutNvmlFallsBackToTheFamilyFloor) {
  auto verdict = drivers().verdict({v("13.0"), v("581.57"), Os::windows, std::nullopt});
  EXPECT_EQ(verdict.kind, DriverVerdictKind::supported_via_minor_version_compat);
  EXPECT_NE(verdict.explanation.find("no longer bundles"), std::string::npos) << verdict.explanation;

  auto old = drivers().verdict({v("13.0"), v("572.61"), Os::windows, std::nullopt});
  EXPECT_EQ(old.kind, DriverVerdictKind::unsupported);
  EXPECT_EQ(old.required_driver, v("580"));
}

TEST(CudaDrivers, NvmlCudaVersionSettlesWhatTheTableCannot) {
  auto verdict = drivers().verdict({v("13.0"), v("581.57"), Os::windows, v("13.0")});
  EXPECT_EQ(verdict.kind, DriverVerdictKind::supported) << verdict.explanation;
}

TEST(CudaDrivers, ReleasesNewerThanTheTableUseTheFamilyFloor) {
  auto newer = drivers().verdict({v("13.5"), v("600.10"), Os::linux, std::nullopt});
  EXPECT_EQ(newer.kind, DriverVerdictKind::supported_via_minor_version_compat);
  EXPECT_EQ(newer.release, nullptr);
  auto future = drivers().verdict({v("14.0"), v("700.1"), Os::linux, std::nullopt});
  EXPECT_EQ(future.kind, DriverVerdictKind::unknown);
}

TEST(CudaDrivers, PreElevenHasNoMinorVersionCompatibility) {
  auto verdict = drivers().verdict({v("10.2"), v("418.39"), Os::linux, std::nullopt});
  EXPECT_EQ(verdict.kind, DriverVerdictKind::unsupported);
  EXPECT_EQ(verdict.required_driver, v("440.33"));
  EXPECT_EQ(verdict.minor_version_floor, std::nullopt);
}

TEST(CudaDrivers, DriverBranchOfA535Driver) {
  const auto* branch = drivers().driver_branch(v("535.104.05"));
  ASSERT_NE(branch, nullptr);
  EXPECT_EQ(branch->kind, "LTSB");
  EXPECT_EQ(branch->end_of_life, "2026-06");
  EXPECT_EQ(drivers().driver_branch(v("550.54.14")), nullptr);
}

TEST(CudaDrivers, EveryRowCarriesItsSource) {
  for (const auto& row : drivers().releases) {
    EXPECT_FALSE(row.provenance.source.empty()) << row.release;
    EXPECT_FALSE(row.provenance.as_of.empty()) << row.release;
  }
  EXPECT_NE(find_fact(drivers().facts, "windows_driver_not_bundled"), nullptr);
}

}  // namespace
}  // namespace gpuhost::knowledge
