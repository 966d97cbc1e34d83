// NvmlSession against the fake NVML: the readings that need an earlier sample (GPM, the NVLink
// rate) or a listener (Xid events), and NVML opened again after it was unusable.

#include "gpu/nvml_session.h"

#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "gpu/fake_nvml_test_support.h"
#include "gpu/nvml_hold.h"

namespace gpuhost::gpu {
namespace {

using testing::expect_issue;
using testing::k_fake_nvml;
using testing::scenario_path;
using testing::ScopedEnv;

// Generous: the fake delivers queued events at once; this only bounds a broken listener.
constexpr std::chrono::seconds k_event_limit{20};

struct FakeNvml {
  explicit FakeNvml(const std::string& scenario, const std::string& library = k_fake_nvml)
      : scenario_env(testing::k_scenario_env, scenario_path(scenario)),
        library_env(k_nvml_library_env, library) {}
  ScopedEnv scenario_env;
  ScopedEnv library_env;
};

TEST(NvmlSession, GpmMetricsAndNvlinkRateStartWithTheSecondCollection) {
  FakeNvml fake("eight_h100");
  NvmlSession session;
  GpuSnapshot first = session.collect();
  ASSERT_TRUE(first.available);
  ASSERT_EQ(first.devices.size(), 8u);
  expect_issue(first.devices[0].gpm, 21, "GPM needs a baseline sample");
  expect_issue(first.devices[0].nvlink_bandwidth, 21, "the rate needs the previous counters");

  GpuSnapshot second = session.collect();
  for (const GpuDevice& d : second.devices) {
    SCOPED_TRACE(d.index);
    ASSERT_TRUE(d.gpm.has_value()) << (d.gpm.issue ? d.gpm.issue->message : "");
    const GpmActivity& gpm = *d.gpm.value;
    EXPECT_GE(gpm.interval_s, 0.0);
    EXPECT_EQ(gpm.graphics_util_percent.value, 98.5);
    EXPECT_EQ(gpm.tensor_util_percent.value, 61.25);
    EXPECT_EQ(gpm.dram_bw_util_percent.value, 72.0);
    EXPECT_EQ(gpm.pcie_tx_mib_per_s.value, 1850.5);
    EXPECT_EQ(gpm.pcie_rx_mib_per_s.value, 2100.25);
    // The fake adds 200,000,000 KiB per direction per read and 1 s to its clock: DCGM's value is
    // 400,000,000 KiB / 1 s / 1000.
    EXPECT_EQ(d.nvlink_bandwidth.value, 400000.0);
  }
  // The baseline moves: a third collection still has values.
  GpuSnapshot third = session.collect();
  EXPECT_TRUE(third.devices[3].gpm.has_value());
  EXPECT_EQ(third.devices[3].nvlink_bandwidth.value, 400000.0);
}

// MIG mode on a Hopper GPU: each GPU instance sampled on its parent (nvmlGpmMigSampleGet); the
// compute instances of one GPU instance share its reading; a metric NVML does not give per
// instance (PCIe here) is that metric's issue, not the instance's.
TEST(NvmlSession, GpmPerMigGpuInstance) {
  FakeNvml fake("h100_mig_instances_busy");
  NvmlSession session;
  GpuSnapshot first = session.collect();
  ASSERT_TRUE(first.available);
  ASSERT_TRUE(first.devices.at(0).mig_devices.value);
  for (const MigDevice& m : *first.devices[0].mig_devices.value)
    expect_issue(m.gpm, 21, "the first sample is the baseline");

  GpuSnapshot second = session.collect();
  const GpuDevice& d = second.devices.at(0);
  ASSERT_TRUE(d.gpm.value);
  EXPECT_EQ(d.gpm.value->tensor_util_percent.value, 30.0);  // the whole GPU
  ASSERT_TRUE(d.mig_devices.value);
  const auto& list = *d.mig_devices.value;
  ASSERT_EQ(list.size(), 4u);
  for (const MigDevice& m : list) {
    SCOPED_TRACE(m.profile);
    ASSERT_TRUE(m.gpm.value) << (m.gpm.issue ? m.gpm.issue->message : "unattempted");
    expect_issue(m.gpm.value->pcie_tx_mib_per_s, 3, "no PCIe metric per instance in this scenario");
  }
  EXPECT_EQ(list[0].gpm.value->tensor_util_percent.value, 55.5);
  EXPECT_EQ(list[0].gpm.value->graphics_util_percent.value, 92.0);
  EXPECT_EQ(list[1].gpm.value->tensor_util_percent.value, 12.0);
  EXPECT_EQ(list[1].gpm, list[2].gpm);  // two compute instances of GPU instance 5
  EXPECT_EQ(list[3].gpm.value->dram_bw_util_percent.value, 0.0);
  EXPECT_TRUE(session.collect().devices.at(0).mig_devices.value->at(3).gpm.value);  // the baseline moves
}

// A MIG GPU without GPM (Ampere): its instances carry the GPU's reason.
TEST(NvmlSession, MigInstancesOfAnAmpereGpuHaveNoGpm) {
  FakeNvml fake("a100_80gb_mig_all_balanced");
  NvmlSession session;
  (void)session.collect();
  GpuSnapshot s = session.collect();
  ASSERT_TRUE(s.devices.at(0).mig_devices.value);
  for (const MigDevice& m : *s.devices[0].mig_devices.value) {
    expect_issue(m.gpm, 3, "GPM is Hopper and later");
    EXPECT_NE(m.gpm.issue->message.find("Hopper"), std::string::npos);
  }
}

TEST(NvmlSession, AmpereHasNoGpmAndAnIdleNvlinkRateIsZero) {
  FakeNvml fake("a100_sxm4_80gb_x8");
  NvmlSession session;
  (void)session.collect();
  GpuSnapshot s = session.collect();
  ASSERT_EQ(s.devices.size(), 8u);
  expect_issue(s.devices[0].gpm, 3, "GPM is Hopper and later");
  EXPECT_NE(s.devices[0].gpm.issue->message.find("Hopper"), std::string::npos);
  EXPECT_EQ(s.devices[0].nvlink_bandwidth.value, 0.0);
  // No Xid since the listener started.
  EXPECT_EQ(s.devices[0].xid.value, (XidState{0, 0, 0}));
}

TEST(NvmlSession, XidEventsReachTheGpuTheyHappenedOn) {
  FakeNvml fake("h100_pending_row_remap");
  NvmlSession session;
  GpuSnapshot first = session.collect();
  ASSERT_TRUE(first.available);
  ASSERT_TRUE(session.wait_for_xid_events(2, k_event_limit));
  GpuSnapshot s = session.collect();
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].xid.value, (XidState{0, 0, 0}));
  ASSERT_TRUE(s.devices[1].xid.has_value()) << s.devices[1].xid.issue->message;
  EXPECT_EQ(s.devices[1].xid.value->last_xid, 63u);  // 48 came first
  EXPECT_EQ(s.devices[1].xid.value->count, 2u);
  EXPECT_GT(s.devices[1].xid.value->last_unix, 0);
}

TEST(NvmlSession, LegacyDriverWatchesXidsWithThePlainWait) {
  FakeNvml fake("h100_pending_row_remap", testing::k_fake_nvml_legacy);
  NvmlSession session;
  (void)session.collect();
  ASSERT_TRUE(session.wait_for_xid_events(2, k_event_limit));
  GpuSnapshot s = session.collect();
  EXPECT_EQ(s.devices.at(1).xid.value->last_xid, 63u);
  expect_issue(s.devices[1].gpm, 13, "the legacy driver has no GPM functions");
}

TEST(NvmlSession, MinimalLibraryExplainsEverySessionReading) {
  FakeNvml fake("eight_h100", testing::k_fake_nvml_minimal);
  NvmlSession session;
  (void)session.collect();
  GpuSnapshot s = session.collect();
  ASSERT_TRUE(s.available);
  EXPECT_FALSE(session.wait_for_xid_events(1, std::chrono::milliseconds(0)));
  const GpuDevice& d = s.devices.at(0);
  expect_issue(d.xid, 13, "no event functions");
  expect_issue(d.gpm, 13, "no GPM functions");
  expect_issue(d.nvlink_bandwidth, 13, "no field values");
}

TEST(NvmlSession, LostAndUnopenedGpus) {
  FakeNvml fake("gpu_lost");
  NvmlSession session;
  (void)session.collect();
  GpuSnapshot s = session.collect();
  ASSERT_EQ(s.devices.size(), 3u);
  EXPECT_TRUE(s.devices[0].xid.has_value());
  // No handle: nothing is read, the session readings included.
  EXPECT_FALSE(s.devices[1].xid.has_value() || s.devices[1].xid.issue);
  EXPECT_FALSE(s.devices[1].gpm.has_value() || s.devices[1].gpm.issue);
  // Lost at the memory query: the rate and GPM carry the loss.
  expect_issue(s.devices[2].gpm, 15, "gpm");
  expect_issue(s.devices[2].nvlink_bandwidth, 15, "nvlink rate");
}

TEST(NvmlSession, OpensNvmlAgainAfterItWasUnusable) {
  NvmlSession session;
  {
    FakeNvml fake("no_driver");
    GpuSnapshot s = session.collect();
    EXPECT_FALSE(s.available);
    ASSERT_TRUE(s.error);
    EXPECT_EQ(s.error->status, 9);
  }
  FakeNvml fake("h100_pending_row_remap");
  GpuSnapshot s = session.collect();
  ASSERT_TRUE(s.available);
  EXPECT_EQ(s.devices.size(), 2u);
  EXPECT_TRUE(session.wait_for_xid_events(2, k_event_limit));
}

TEST(NvmlSession, MovedSessionKeepsItsState) {
  FakeNvml fake("eight_h100");
  NvmlSession first;
  (void)first.collect();
  NvmlSession moved = std::move(first);
  GpuSnapshot s = moved.collect();
  EXPECT_TRUE(s.devices.at(0).gpm.has_value());  // the baseline came along
}

// A MIG mode change (gpu/nvml_hold.h): while `gpuhost mig apply` holds the hold, the session has
// NVML shut down, says why, and is no registered reader; after it, NVML opens again.
TEST(NvmlSession, StepsAsideWhileAMigModeChangeHoldsTheHold) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("gpuhost-nvml-hold-" + std::to_string(std::random_device{}()));
  ScopedEnv run_dir("GPUHOST_RUN_DIR", dir.string());
  FakeNvml fake("a100_sxm4_80gb_x8");
  NvmlSession session;
  ASSERT_TRUE(session.collect().available);
  {
    auto hold = NvmlHold::take(dir, "gpuhost mig apply, pid 1");
    ASSERT_TRUE(hold) << hold.error().message;
    // The registered reader closes NVML: on its next collection, or from its own thread when no
    // collection comes (serve between scrapes).
    EXPECT_TRUE(hold->wait_for_readers(std::chrono::seconds(10)).empty());
    GpuSnapshot paused = session.collect();
    EXPECT_FALSE(paused.available);
    ASSERT_TRUE(paused.error);
    EXPECT_EQ(paused.error->status, 19);  // NVML_ERROR_IN_USE
    EXPECT_NE(paused.error->message.find("NVML is closed while gpuhost mig apply, pid 1 changes"),
              std::string::npos);
    EXPECT_EQ(nvml_hold_holder(dir), "gpuhost mig apply, pid 1");
    // A second changer waits its turn.
    auto second = NvmlHold::take(dir, "another");
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error().code, ErrorCode::unavailable);
  }
  EXPECT_FALSE(nvml_hold_holder(dir));
  EXPECT_TRUE(session.collect().available);
  // Open again: registered again, so the next changer waits for it.
  auto hold = NvmlHold::take(dir, "gpuhost mig apply, pid 2");
  ASSERT_TRUE(hold);
  EXPECT_TRUE(hold->wait_for_readers(std::chrono::seconds(10)).empty());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace gpuhost::gpu
