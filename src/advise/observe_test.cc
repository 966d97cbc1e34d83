#include "advise/observe.h"

#include <gtest/gtest.h>

namespace gpuhost::advise {
namespace {

gpu::GpuDevice device(unsigned busy, std::uint64_t reasons, std::uint64_t used = 40,
                      std::uint64_t total = 80) {
  gpu::GpuDevice d;
  d.index = 0;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.cc_major.value = 8;
  d.utilization.value = gpu::Utilization{busy, 10};
  d.memory.value = gpu::MemoryState{total, used, total - used, 0};
  d.clocks_event_reasons.value = reasons;
  return d;
}

gpu::GpuSnapshot snapshot(std::vector<gpu::GpuDevice> devices) {
  gpu::GpuSnapshot s;
  s.available = true;
  s.devices = std::move(devices);
  return s;
}

TEST(SummarizeGpus, MeansUtilisationAndKeepsThePeakMemory) {
  auto windows = summarize_gpus(
      {snapshot({device(10, 0x0, 40)}), snapshot({device(30, 0x0, 76)}), snapshot({device(20, 0x0, 50)})});
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_EQ(windows[0].samples, 3u);
  EXPECT_DOUBLE_EQ(*windows[0].busy_percent, 20.0);
  EXPECT_DOUBLE_EQ(*windows[0].memory_used_share, 0.95);
  EXPECT_EQ(windows[0].cc_major, 8);
  EXPECT_FALSE(windows[0].tensor_percent.has_value());  // no GPM: nothing made up
}

// MIG mode: no utilisation from NVML; the GPU instance's GPM graphics activity is the busy share,
// and with neither the busy share stays unknown.
TEST(SummarizeGpus, AMigSliceIsBusyAsItsGraphicsEngine) {
  gpu::GpuDevice d = device(0, 0x0);
  d.utilization = {};
  d.utilization.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "MIG"};
  d.mig.value = gpu::MigState{true, true};
  auto windows = summarize_gpus({snapshot({d})});
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_FALSE(windows[0].busy_percent.has_value());
  d.gpm.value = gpu::GpmActivity{};
  d.gpm.value->graphics_util_percent.value = 12.5;
  windows = summarize_gpus({snapshot({d})});
  ASSERT_TRUE(windows[0].busy_percent.has_value());
  EXPECT_DOUBLE_EQ(*windows[0].busy_percent, 12.5);
}

TEST(SummarizeGpus, ThrottleSharesCountOnlyBusySamples) {
  // Two idle samples (GpuIdle with a thermal bit, as an idle hot GPU reports) are left out; of the
  // two busy ones, one is thermally slowed and one power capped.
  auto windows = summarize_gpus({snapshot({device(0, 0x1 | 0x20)}), snapshot({device(0, 0x1 | 0x40)}),
                                 snapshot({device(99, 0x20)}), snapshot({device(99, 0x4)})});
  ASSERT_EQ(windows.size(), 1u);
  EXPECT_DOUBLE_EQ(*windows[0].thermal_share, 0.5);
  EXPECT_DOUBLE_EQ(*windows[0].power_share, 0.5);
}

TEST(SummarizeGpus, SkipsSnapshotsWithoutNvmlAndLostGpus) {
  gpu::GpuSnapshot none;  // NVML not loaded
  gpu::GpuDevice lost = device(50, 0);
  lost.lost = true;
  EXPECT_TRUE(summarize_gpus({none, snapshot({lost})}).empty());
}

platform::ThreadTimes thread(long pid, long tid, const char* name, double cpu,
                             std::optional<double> runqueue = std::nullopt) {
  return platform::ThreadTimes{pid, tid, name, cpu, runqueue};
}

TEST(LoaderWorkers, AreNamedOrForkedOrSpawnedCopiesOfATrainer) {
  platform::GroupActivity g;
  g.processes = {
      {10, 1, "torchrun", "/usr/bin/python3 /usr/bin/torchrun --nproc_per_node=2 train.py"},
      {11, 10, "python3", "/usr/bin/python3 -u train.py"},  // a rank: not its parent's command line
      {12, 11, "python3",
       "/usr/bin/python3 -u train.py"},  // forked by rank 11 (a torch that names no worker)
      {13, 11, "pt_data_worker", "/usr/bin/python3 -u train.py"},  // named (a recent torch)
      {14, 10, "python3",
       "/usr/bin/python3 -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5)"},
  };
  EXPECT_EQ(loader_worker_pids(g), (std::vector<long>{12, 13, 14}));
}

TEST(SummarizeHost, SplitsTheMainThreadFromTheLoaderWorkers) {
  HostReadings before, after;
  after.group.processes = {{100, 1, "python3", "python3 train.py"},
                           {200, 100, "pt_data_worker", "python3 train.py"},
                           {300, 100, "pt_data_worker", "python3 train.py"},
                           {400, 100, "pt_data_worker", "python3 train.py"}};
  before.group.threads = {thread(100, 100, "python3", 5.0, 1.0), thread(100, 101, "pt_data_pin", 0.1),
                          thread(200, 200, "pt_data_worker", 1.0), thread(300, 300, "pt_data_worker", 1.0)};
  after.group.threads = {thread(100, 100, "python3", 6.0, 1.8), thread(100, 101, "pt_data_pin", 0.2),
                         thread(200, 200, "pt_data_worker", 2.8), thread(300, 300, "pt_data_worker", 2.6),
                         thread(400, 400, "pt_data_worker", 0.5)};  // started during the window
  before.group.read_bytes = 0;
  after.group.read_bytes = 20 * 1024 * 1024;
  before.group.major_faults = 10;
  after.group.major_faults = 30;
  before.swapped_in_pages = 1000;
  after.swapped_in_pages = 1000;
  after.io_pressure_percent = 3.5;
  HostWindow h = summarize_host(before, after, 2.0, 8);
  EXPECT_EQ(h.main_thread_name, "python3");
  EXPECT_DOUBLE_EQ(h.main_thread_cores, 0.5);
  EXPECT_DOUBLE_EQ(h.main_thread_busy, 0.9);  // 0.5 s a second on a CPU, 0.4 s waiting for one
  EXPECT_TRUE(h.pin_thread);
  EXPECT_EQ(h.loader_workers, 3u);
  EXPECT_NEAR(h.loader_cores_mean, (0.9 + 0.8 + 0.25) / 3, 1e-9);
  EXPECT_NEAR(h.loader_busy_mean, (0.9 + 0.8 + 0.25) / 3, 1e-9);  // no runqueue reading: what they used
  EXPECT_DOUBLE_EQ(*h.read_mib_per_s, 10.0);
  EXPECT_DOUBLE_EQ(*h.major_faults_per_s, 10.0);
  EXPECT_DOUBLE_EQ(*h.swap_in_pages_per_s, 0.0);
  EXPECT_DOUBLE_EQ(*h.io_pressure_percent, 3.5);
  EXPECT_EQ(h.cpus, 8u);
}

TEST(SummarizeHost, UnreadableIoIsUnknownNotZero) {
  HostReadings before, after;
  before.group.threads = {thread(1, 1, "python3", 0)};
  after.group.threads = {thread(1, 1, "python3", 1)};
  after.group.io_visible = false;
  HostWindow h = summarize_host(before, after, 1.0, 2);
  EXPECT_FALSE(h.read_mib_per_s.has_value());
  EXPECT_FALSE(h.swap_in_pages_per_s.has_value());
  EXPECT_FALSE(h.pin_thread);
  EXPECT_EQ(h.loader_workers, 0u);
}

}  // namespace
}  // namespace gpuhost::advise
