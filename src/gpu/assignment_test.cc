#include "gpu/assignment.h"

#include <gtest/gtest.h>

namespace gpuhost::gpu {
namespace {

GpuSnapshot host(unsigned count, bool mig_on = false) {
  GpuSnapshot s;
  s.available = true;
  for (unsigned i = 0; i < count; ++i) {
    GpuDevice d;
    d.index = i;
    d.name = "NVIDIA A100-SXM4-80GB";
    d.uuid = "GPU-0000000" + std::to_string(i);
    d.mig.value = MigState{mig_on, mig_on};
    s.devices.push_back(d);
  }
  return s;
}

GpuSnapshot no_nvml() {
  GpuSnapshot s;
  s.error = NvmlIssue{12, "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML Shared Library Not Found"};
  return s;
}

std::string refused(std::string_view spec, const GpuSnapshot& snapshot, bool windows = false) {
  auto a = assign_gpus(spec, snapshot, windows);
  EXPECT_FALSE(a.has_value()) << spec;
  if (a) return "";
  EXPECT_EQ(a.error().code, ErrorCode::invalid_argument);
  return a.error().message;
}

TEST(AssignGpus, IndicesBecomeUuidsInTheOrderGiven) {
  auto a = assign_gpus("3, 1", host(8), false);
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(a->visible_devices(), "GPU-00000003,GPU-00000001");
  EXPECT_EQ(a->devices[0].label, "GPU 3 (NVIDIA A100-SXM4-80GB)");
  EXPECT_TRUE(a->notes.empty());
}

TEST(AssignGpus, UuidsAreCheckedAgainstTheHost) {
  auto a = assign_gpus("GPU-00000002", host(4), false);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->devices[0].label, "GPU 2 (NVIDIA A100-SXM4-80GB)");
  EXPECT_NE(refused("GPU-ffff", host(4)).find("no GPU with that UUID; this host has GPU 0-3"),
            std::string::npos);
}

TEST(AssignGpus, RefusesWhatTheHostDoesNotHaveOrTwice) {
  EXPECT_NE(refused("8", host(8)).find("--gpu 8: no such GPU; this host has GPU 0-7"), std::string::npos);
  EXPECT_NE(refused("0,GPU-00000000", host(2)).find("names GPU 0 (NVIDIA A100-SXM4-80GB) twice"),
            std::string::npos);
  EXPECT_NE(refused("one", host(2)).find("expects GPU indices"), std::string::npos);
  EXPECT_NE(refused("-1", host(2)).find("expects GPU indices"), std::string::npos);
  EXPECT_NE(refused("0,,1", host(2)).find("empty entry"), std::string::npos);
  EXPECT_NE(refused("0", host(0)).find("this host has no GPU NVML can see"), std::string::npos);
}

TEST(AssignGpus, WithoutNvmlOnlyUuidsGoThroughAndSaySo) {
  EXPECT_NE(refused("0", no_nvml()).find("GPU indices need NVML"), std::string::npos);
  EXPECT_NE(refused("0", no_nvml()).find("NVML Shared Library Not Found"), std::string::npos);
  auto a = assign_gpus("GPU-abc", no_nvml(), false);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->visible_devices(), "GPU-abc");
  ASSERT_EQ(a->notes.size(), 1u);
  EXPECT_NE(a->notes[0].find("not checked"), std::string::npos);
}

TEST(AssignGpus, OneMigSliceAloneAndOnlyWhereMigIsOn) {
  auto a = assign_gpus("MIG-4f2c", host(1, true), false);
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(a->visible_devices(), "MIG-4f2c");
  EXPECT_NE(refused("MIG-a,MIG-b", host(1, true)).find("one MIG device only"), std::string::npos);
  EXPECT_NE(refused("MIG-a,0", host(2, true)).find("DDP across slices cannot work"), std::string::npos);
  EXPECT_NE(refused("MIG-a", host(2, false)).find("no GPU of this host has MIG mode on"), std::string::npos);
  EXPECT_NE(refused("MIG-a", host(1, true), true).find("MIG is supported on Linux only"), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::gpu
