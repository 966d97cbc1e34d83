#include "advise/judge.h"

#include <algorithm>

#include <gtest/gtest.h>

namespace gpuhost::advise {
namespace {

GpuWindow busy_gpu(double busy = 97) {
  GpuWindow g;
  g.index = 0;
  g.name = "NVIDIA H100 80GB HBM3";
  g.cc_major = 9;
  g.samples = 20;
  g.busy_percent = busy;
  g.memory_used_share = 0.6;
  g.thermal_share = 0.0;
  g.power_share = 0.0;
  return g;
}

HostWindow host(double main_cores, unsigned workers = 0, double worker_cores = 0, bool pin = false) {
  HostWindow h;
  h.seconds = 10;
  h.main_thread_name = "python3";
  h.main_thread_cores = main_cores;
  h.main_thread_busy = main_cores;  // a host with CPU to spare: busy is what it used
  h.loader_workers = workers;
  h.loader_cores_mean = worker_cores;
  h.loader_busy_mean = worker_cores;
  h.pin_thread = pin;
  h.cpus = 16;
  h.io_pressure_percent = 0.5;
  h.swap_in_pages_per_s = 0;
  return h;
}

Observation observe(GpuWindow gpu, std::optional<HostWindow> h) {
  Observation o;
  o.gpus.push_back(std::move(gpu));
  o.host = std::move(h);
  if (!o.host) o.host_unseen = "the threads of a process group are read on Linux only";
  return o;
}

std::vector<std::string> ids(const std::vector<Finding>& findings) {
  std::vector<std::string> out;
  for (const auto& f : findings) out.push_back(f.id + ":" + strength_name(f.strength));
  return out;
}

TEST(Judge, AHealthyComputeBoundJobGetsNoFinding) {
  EXPECT_TRUE(judge(observe(busy_gpu(), host(0.4, 4, 0.3, true))).empty());
  EXPECT_TRUE(judge(observe(busy_gpu(), host(1.0))).empty());  // a busy GPU: a busy main thread is fine
  EXPECT_TRUE(judge(observe(busy_gpu(), std::nullopt)).empty());
}

TEST(Judge, AnIdleGpuWithASaturatedMainThreadAndNoWorkersIsInputBound) {
  auto findings = judge(observe(busy_gpu(22), host(0.98)));
  ASSERT_EQ(ids(findings), std::vector<std::string>{"input_bound:verdict"});
  const Finding& f = findings[0];
  EXPECT_EQ(f.gpu, 0u);
  EXPECT_NE(f.limit.find("num_workers=0"), std::string::npos) << f.limit;
  EXPECT_NE(f.fix.find("num_workers=15"), std::string::npos) << f.fix;  // Lightning: 16 cpus, 1 process
  EXPECT_NE(f.fix.find("pin_memory=True"), std::string::npos) << f.fix;
  EXPECT_NE(f.expected.find("4.5x"), std::string::npos) << f.expected;  // 100 / 22
  EXPECT_EQ(f.evidence.size(), 3u);  // the GPU, the main thread, no pin thread
}

// On a host whose CPUs other work keeps busy, the loading thread gets half a core yet always has
// work: it waits for a CPU the rest of the time, and the GPU still waits for it.
TEST(Judge, AMainThreadWaitingForACpuIsStillSaturated) {
  HostWindow starved = host(0.51);
  starved.main_thread_busy = 0.97;
  starved.cpu_pressure_percent = 96;
  auto findings = judge(observe(busy_gpu(22), starved));
  ASSERT_EQ(ids(findings), std::vector<std::string>{"input_bound:verdict"});
  EXPECT_NE(findings[0].evidence[1].find("running or waiting for a CPU 97 % of the time (0.51 cores used"),
            std::string::npos)
      << findings[0].evidence[1];
  HostWindow idle = host(0.51);  // half a core used and nothing waiting: not the loader
  EXPECT_EQ(ids(judge(observe(busy_gpu(22), idle))), std::vector<std::string>{"gpu_waiting:hint"});
}

TEST(Judge, PinnedBatchesAreNotAskedForAgain) {
  auto findings = judge(observe(busy_gpu(22), host(0.98, 0, 0, true)));
  ASSERT_EQ(findings.size(), 1u);
  EXPECT_EQ(findings[0].fix.find("pin_memory"), std::string::npos) << findings[0].fix;
}

TEST(Judge, SaturatedWorkersAskForMoreWorkersThenCheaperDecoding) {
  auto few = judge(observe(busy_gpu(30), host(0.2, 2, 0.95, true)));
  ASSERT_EQ(ids(few), std::vector<std::string>{"input_bound:verdict"});
  EXPECT_NE(few[0].fix.find("num_workers=15"), std::string::npos) << few[0].fix;
  auto many = judge(observe(busy_gpu(30), host(0.2, 15, 0.95, true)));
  ASSERT_EQ(many.size(), 1u);
  EXPECT_NE(many[0].fix.find("DALI"), std::string::npos) << many[0].fix;
  EXPECT_EQ(many[0].fix.find("num_workers="), std::string::npos) << many[0].fix;
}

TEST(Judge, StorageStallsWhileTheGpuWaitsAreInputBoundOnStorage) {
  HostWindow h = host(0.3, 4, 0.2, true);
  h.io_pressure_percent = 35;
  h.read_mib_per_s = 180;
  auto findings = judge(observe(busy_gpu(15), h));
  ASSERT_EQ(ids(findings), std::vector<std::string>{"input_bound:verdict"});
  EXPECT_NE(findings[0].limit.find("storage"), std::string::npos);
  EXPECT_NE(findings[0].evidence[1].find("180 MiB/s"), std::string::npos) << findings[0].evidence[1];
}

// A main thread that also waits on the disk is busy less than 85 %: the reads say it loads.
TEST(Judge, AMainThreadReadingFromStorageLoadsEvenWhenItWaitsOnTheDisk) {
  HostWindow h = host(0.7);
  h.read_mib_per_s = 14;
  h.major_faults_per_s = 3500;
  auto findings = judge(observe(busy_gpu(12), h));
  ASSERT_EQ(ids(findings), std::vector<std::string>{"input_bound:verdict"});
  const Finding& f = findings[0];
  EXPECT_NE(f.limit.find("num_workers=0"), std::string::npos);
  EXPECT_NE(std::find(f.evidence.begin(), f.evidence.end(),
                      "the trainer reads its samples from storage: 14 MiB/s, 3500 major faults/s (memmap pages read "
                      "from disk); the main thread waits on those reads too"),
            f.evidence.end());
  EXPECT_NE(f.fix.find("keep the dataset in the page cache"), std::string::npos);
  // Without reads a thread busy 70 % is not called the bottleneck, and a thread busy under half
  // the window is not, reads or not.
  EXPECT_TRUE(ids(judge(observe(busy_gpu(12), host(0.7)))) != std::vector<std::string>{"input_bound:verdict"});
  h.main_thread_busy = h.main_thread_cores = 0.3;
  EXPECT_TRUE(ids(judge(observe(busy_gpu(12), h))) != std::vector<std::string>{"input_bound:verdict"});
  // A cached dataset (no reads) at 98 % keeps the plain fix.
  EXPECT_EQ(judge(observe(busy_gpu(12), host(0.98)))[0].fix.find("page cache"), std::string::npos);
}

TEST(Judge, OneSignalAloneIsAHintNotAVerdict) {
  // The GPU waits, but nothing on the host is saturated: a hint that names where else to look.
  EXPECT_EQ(ids(judge(observe(busy_gpu(20), host(0.3, 4, 0.3, true)))),
            std::vector<std::string>{"gpu_waiting:hint"});
  // The GPU waits and the host cannot be seen (Windows).
  auto unseen = judge(observe(busy_gpu(20), std::nullopt));
  ASSERT_EQ(ids(unseen), std::vector<std::string>{"gpu_waiting:hint"});
  EXPECT_NE(unseen[0].evidence.back().find("Linux only"), std::string::npos);
}

TEST(Judge, MemoryAboveNinetyPercentIsAVerdictAndBelowIsNot) {
  GpuWindow g = busy_gpu();
  g.memory_used_share = 0.95;
  EXPECT_EQ(ids(judge(observe(g, host(0.5)))), std::vector<std::string>{"memory_full:verdict"});
  g.memory_used_share = 0.89;
  EXPECT_TRUE(judge(observe(g, host(0.5))).empty());
}

TEST(Judge, ThermalSlowdownIsAVerdictAndAPowerCapAHint) {
  GpuWindow g = busy_gpu();
  g.thermal_share = 0.6;
  g.power_share = 0.5;
  EXPECT_EQ(ids(judge(observe(g, host(0.5)))),
            (std::vector<std::string>{"thermal_throttling:verdict", "power_capped:hint"}));
  g.thermal_share = 0.1;
  g.power_share = 0.1;
  EXPECT_TRUE(judge(observe(g, host(0.5))).empty());
}

TEST(Judge, IdleTensorCoresOnABusyGpuWithGpmMeanNoMixedPrecision) {
  GpuWindow g = busy_gpu();
  g.graphics_percent = 85;
  g.tensor_percent = 0.2;
  auto findings = judge(observe(g, host(0.5)));
  ASSERT_EQ(ids(findings), std::vector<std::string>{"no_mixed_precision:verdict"});
  EXPECT_NE(findings[0].fix.find("bfloat16"), std::string::npos);
  g.tensor_percent = 40;  // bf16 already
  EXPECT_TRUE(judge(observe(g, host(0.5))).empty());
  g.tensor_percent = 0.2;
  g.cc_major = 6;  // Pascal: no tensor cores to use
  EXPECT_TRUE(judge(observe(g, host(0.5))).empty());
  g.cc_major = 9;
  g.tensor_percent.reset();  // no GPM (before Hopper, or Windows): nothing is claimed
  EXPECT_TRUE(judge(observe(g, host(0.5))).empty());
}

TEST(Judge, ABusyGpuWithIdleSmsAndFreeMemoryHintsAtTheBatch) {
  GpuWindow g = busy_gpu();
  g.graphics_percent = 25;
  g.tensor_percent = 10;
  g.memory_used_share = 0.2;
  EXPECT_EQ(ids(judge(observe(g, host(0.5)))), std::vector<std::string>{"batch_small:hint"});
  g.memory_used_share = 0.7;  // no room for a larger batch: no hint
  EXPECT_TRUE(judge(observe(g, host(0.5))).empty());
}

TEST(Judge, SustainedSwapInIsAVerdict) {
  HostWindow h = host(0.5);
  h.swap_in_pages_per_s = 250;
  EXPECT_EQ(ids(judge(observe(busy_gpu(), h))), std::vector<std::string>{"swapping:verdict"});
  h.swap_in_pages_per_s = 2;
  EXPECT_TRUE(judge(observe(busy_gpu(), h)).empty());
}

TEST(Judge, AGpuWithoutSamplesIsNotJudged) {
  GpuWindow g = busy_gpu(5);
  g.samples = 0;
  EXPECT_TRUE(judge(observe(g, host(1.0))).empty());
}

TEST(SuggestedWorkers, FollowsLightningsFormula) {
  EXPECT_EQ(suggested_workers(2, 1), 1u);
  EXPECT_EQ(suggested_workers(16, 1), 15u);
  EXPECT_EQ(suggested_workers(16, 4), 3u);
  EXPECT_EQ(suggested_workers(8, 8), 1u);
  EXPECT_EQ(suggested_workers(1, 0), 1u);
}

TEST(FindingJson, CarriesEverythingTheTextSays) {
  auto findings = judge(observe(busy_gpu(22), host(0.98)));
  ASSERT_EQ(findings.size(), 1u);
  json::Value v = to_json(findings[0]);
  EXPECT_EQ(v.get_string("id"), "input_bound");
  EXPECT_EQ(v.get_string("strength"), "verdict");
  EXPECT_EQ(v["gpu"].as_int(), 0);
  EXPECT_EQ(v["evidence"].items().size(), 3u);
  EXPECT_EQ(v["sources"].items().size(), 3u);
}

}  // namespace
}  // namespace gpuhost::advise
