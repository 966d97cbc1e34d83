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

TEST(VisibleDevices, KeepsEveryGpuWhenAnEntryNamesNone) {
  // A MIG slice or a typo: which GPU is the job's is unknown, so nothing narrower is claimed.
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
