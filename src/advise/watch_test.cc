#include "advise/watch.h"

#include <gtest/gtest.h>

namespace gpuhost::advise {
namespace {

gpu::GpuSnapshot three_gpus() {
  gpu::GpuSnapshot s;
  s.available = true;
  for (unsigned i = 0; i < 3; ++i) {
    gpu::GpuDevice d;
    d.index = i;
    d.uuid = "GPU-" + std::to_string(i) + "aaa";
    s.devices.push_back(d);
  }
  return s;
}

std::vector<unsigned> indices(const gpu::GpuSnapshot& s) {
  std::vector<unsigned> out;
  for (const auto& d : s.devices) out.push_back(d.index);
  return out;
}

TEST(VisibleDevices, SplitsCudaVisibleDevices) {
  EXPECT_EQ(split_visible_devices("0, 2"), (std::vector<std::string>{"0", "2"}));
  EXPECT_EQ(split_visible_devices("GPU-1aaa"), std::vector<std::string>{"GPU-1aaa"});
  EXPECT_TRUE(split_visible_devices("").empty());
}

TEST(VisibleDevices, KeepsTheJobsGpusByIndexOrUuid) {
  auto s = three_gpus();
  keep_visible_devices(s, {"2", "GPU-0aaa"});
  EXPECT_EQ(indices(s), (std::vector<unsigned>{0, 2}));
}

// A job on a MIG slice is judged on the slice: its memory and its GPU instance's GPM, not the
// whole GPU's.
TEST(VisibleDevices, AMigSliceNarrowsItsGpuToTheSlice) {
  auto s = three_gpus();
  s.devices[1].name = "NVIDIA H100 80GB HBM3";
  s.devices[1].memory.value = gpu::MemoryState{80ULL << 30, 70ULL << 30, 10ULL << 30, 0};
  s.devices[1].gpm.value = gpu::GpmActivity{};
  s.devices[1].gpm.value->tensor_util_percent.value = 30;
  gpu::MigDevice slice;
  slice.uuid = "MIG-4f2c";
  slice.profile = "3g.40gb";
  slice.memory = gpu::MemoryState{40ULL << 30, 2ULL << 30, 38ULL << 30, 0};
  slice.gpm.value = gpu::GpmActivity{};
  slice.gpm.value->tensor_util_percent.value = 55.5;
  gpu::MigDevice other = slice;
  other.uuid = "MIG-9e01";
  s.devices[1].mig_devices.value = std::vector<gpu::MigDevice>{other, slice};
  keep_visible_devices(s, {"MIG-4f2c"});
  ASSERT_EQ(indices(s), (std::vector<unsigned>{1}));
  const gpu::GpuDevice& d = s.devices[0];
  EXPECT_EQ(d.name, "NVIDIA H100 80GB HBM3 (MIG 3g.40gb)");
  ASSERT_TRUE(d.memory.value);
  EXPECT_EQ(d.memory.value->used_bytes, 2ULL << 30);
  ASSERT_TRUE(d.gpm.value);
  EXPECT_EQ(d.gpm.value->tensor_util_percent.value, 55.5);
}

TEST(VisibleDevices, KeepsEveryGpuWhenAnEntryNamesNone) {
  // A slice NVML did not list, or a typo: which GPU is the job's is unknown, so nothing narrower
  // is claimed.
  auto s = three_gpus();
  keep_visible_devices(s, {"1", "MIG-4f2c"});
  EXPECT_EQ(indices(s), (std::vector<unsigned>{0, 1, 2}));
  keep_visible_devices(s, {});
  EXPECT_EQ(indices(s), (std::vector<unsigned>{0, 1, 2}));
}

TEST(Watch, AGroupThatIsGoneIsNotFound) {
  gpu::NvmlSession session;
  WatchOptions options;
  options.group = 999999999;
  options.window = std::chrono::milliseconds(10);
  auto watched = watch(options, session);
  // Linux reads the process group, Windows the process tree under that pid: neither is there.
  ASSERT_FALSE(watched.has_value());
  EXPECT_EQ(watched.error().code, ErrorCode::not_found);
}

TEST(Watch, AStopRequestEndsTheWindowEarly) {
  gpu::NvmlSession session;
  WatchOptions options;
  options.group = 0;  // never read: the stop comes first on Linux too
  options.window = std::chrono::seconds(600);
  std::stop_source stop;
  stop.request_stop();
  const auto began = std::chrono::steady_clock::now();
  auto watched = watch(options, session, stop.get_token());
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(60));
  ASSERT_FALSE(watched.has_value());
  EXPECT_EQ(watched.error().code, ErrorCode::unavailable);
}

}  // namespace
}  // namespace gpuhost::advise
