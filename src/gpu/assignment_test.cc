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
  EXPECT_EQ(a->notes, (std::vector<std::string>{
                          "MIG-4f2c is not checked: NVML could not list this host's MIG devices"}));
}

TEST(AssignGpus, MigUuidsAreCheckedAgainstTheListedSlices) {
  GpuSnapshot s = host(1, true);
  s.devices[0].mig_devices.value = std::vector<MigDevice>{
      {0, "MIG-aaaa", "NVIDIA A100-SXM4-80GB MIG 3g.40gb", "3g.40gb", 2, 0, std::nullopt, {}, {}},
      {1, "MIG-bbbb", "NVIDIA A100-SXM4-80GB MIG 1g.10gb", "1g.10gb", 9, 0, std::nullopt, {}, {}}};
  auto a = assign_gpus("MIG-bbbb", s, false);
  ASSERT_TRUE(a.has_value()) << a.error().message;
  EXPECT_EQ(a->visible_devices(), "MIG-bbbb");
  EXPECT_EQ(a->devices[0].label, "MIG 1g.10gb on GPU 0 (instance 9)");
  EXPECT_TRUE(a->notes.empty());
  EXPECT_EQ(refused("MIG-cccc", s), "--gpu MIG-cccc: no MIG device with that UUID; this host has MIG-aaaa (MIG "
                                    "3g.40gb on GPU 0 (instance 2)), MIG-bbbb (MIG 1g.10gb on GPU 0 (instance 9))");
  s.devices[0].mig_devices.value->clear();
  EXPECT_NE(refused("MIG-aaaa", s).find("have no MIG device yet"), std::string::npos);
}

// mig:<profile>: the slices of that profile with no process, in order; each refusal says why.
TEST(FreeMigSlices, PicksIdleSlicesOfTheProfileAndSaysWhyWhenNone) {
  GpuSnapshot s = host(1, true);
  s.devices[0].mig_devices.value =
      std::vector<MigDevice>{{0, "MIG-a", "A100 MIG 1g.10gb", "1g.10gb", 3, 0, std::nullopt, {4242}, {}},
                             {1, "MIG-b", "A100 MIG 1g.10gb", "1g.10gb", 4, 0, std::nullopt, {}, {}},
                             {2, "MIG-c", "A100 MIG 3g.40gb", "3g.40gb", 2, 0, std::nullopt, {}, {}}};
  auto free = free_mig_slices("1g.10gb", s, false);
  ASSERT_TRUE(free) << free.error().message;
  ASSERT_EQ(free->size(), 1u);
  EXPECT_EQ((*free)[0].uuid, "MIG-b");
  EXPECT_EQ((*free)[0].label, "MIG 1g.10gb on GPU 0 (instance 4)");
  s.devices[0].mig_devices.value->at(1).compute_pids = {7};
  EXPECT_EQ(free_mig_slices("1g.10gb", s, false).error().message,
            "--gpu mig:1g.10gb: every 1g.10gb slice has a process on it: MIG-a (PID 4242), MIG-b (PID 7); wait for "
            "one to end, or make more with gpuhost mig apply");
  EXPECT_EQ(free_mig_slices("2g.20gb", s, false).error().message,
            "--gpu mig:2g.20gb: no slice of that profile; this host has 1g.10gb, 3g.40gb");
  EXPECT_NE(free_mig_slices("1g.10gb", s, true).error().message.find("Linux only"), std::string::npos);
  EXPECT_NE(free_mig_slices("1g.10gb", host(1, false), false).error().message.find("no MIG slice"), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::gpu
