#include "telemetry/gpu_metrics.h"

#include <gtest/gtest.h>

namespace gpuhost::telemetry {
namespace {

gpu::GpuDevice healthy_a100(unsigned index) {
  gpu::GpuDevice d;
  d.index = index;
  d.name = "NVIDIA A100-SXM4-80GB";
  d.uuid = "GPU-" + std::to_string(index);
  d.pci_bus_id = "00000000:07:00.0";
  d.memory.value = gpu::MemoryState{85899345920, 4194304, 85327872000, 567279616};
  d.clocks.value = gpu::Clocks{210, 1593, 1410, 1593};
  d.temperature.value = gpu::Temperatures{31, 92, 89, 85, 95};
  d.power.value = gpu::Power{61000, 400000};
  d.utilization.value = gpu::Utilization{7, 3};
  d.pcie_replay_counter.value = 2;
  d.remapped_rows.value = gpu::RemappedRows{1, 0, false, false};
  d.ecc.value = gpu::EccState{true, true, 5, 0, 9, 0};
  return d;
}

gpu::GpuSnapshot snapshot_with(std::vector<gpu::GpuDevice> devices) {
  gpu::GpuSnapshot s;
  s.available = true;
  s.driver_version = "535.104.05";
  s.devices = std::move(devices);
  return s;
}

const Sample* sample_for(const MetricSet& set, std::string_view name, std::string_view gpu) {
  const auto* family = set.find(name);
  if (!family) return nullptr;
  for (const auto& s : family->samples)
    for (const auto& l : s.labels)
      if (l.name == "gpu" && l.value == gpu) return &s;
  return nullptr;
}

std::string label(const Sample& s, std::string_view name) {
  for (const auto& l : s.labels)
    if (l.name == name) return l.value;
  return "<absent>";
}

TEST(GpuMetrics, ConvertsUnitsToDcgmExporters) {
  MetricSet set;
  append_gpu_metrics(snapshot_with({healthy_a100(0)}), "node1", set);
  auto* power = sample_for(set, "DCGM_FI_DEV_POWER_USAGE", "0");
  ASSERT_TRUE(power);
  EXPECT_DOUBLE_EQ(power->value, 61.0);                                       // W from mW
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_FB_USED", "0")->value, 4.0);  // MiB from bytes
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_FB_FREE", "0")->value, 85327872000.0 / 1048576.0);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_GPU_UTIL", "0")->value, 7);  // percent, not ratio
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_SM_CLOCK", "0")->value, 210);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_MEM_CLOCK", "0")->value, 1593);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_GPU_TEMP", "0")->value, 31);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "0")->value, 1);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "0")->value, 5);
  EXPECT_EQ(set.find("DCGM_FI_DEV_PCIE_REPLAY_COUNTER")->type, MetricType::counter);
  EXPECT_EQ(set.find("DCGM_FI_DEV_GPU_UTIL")->type, MetricType::gauge);
}

TEST(GpuMetrics, CarriesDcgmExporterLabels) {
  MetricSet set;
  append_gpu_metrics(snapshot_with({healthy_a100(0), healthy_a100(3)}), "node1", set);
  auto* s = sample_for(set, "DCGM_FI_DEV_GPU_TEMP", "3");
  ASSERT_TRUE(s);
  EXPECT_EQ(label(*s, "UUID"), "GPU-3");
  EXPECT_EQ(label(*s, "pci_bus_id"), "00000000:07:00.0");
  EXPECT_EQ(label(*s, "device"), "nvidia3");
  EXPECT_EQ(label(*s, "modelName"), "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(label(*s, "Hostname"), "node1");
  EXPECT_EQ(label(*s, "DCGM_FI_DRIVER_VERSION"), "535.104.05");
  EXPECT_EQ(set.find("DCGM_FI_DEV_GPU_TEMP")->samples.size(), 2u);
}

TEST(GpuMetrics, ListsWhatNvmlRefusedInsteadOfEmittingIt) {
  auto d = healthy_a100(0);
  d.utilization.value.reset();
  d.utilization.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "Not Supported"};
  MetricSet set;
  append_gpu_metrics(snapshot_with({d}), "h", set);
  EXPECT_EQ(set.find("DCGM_FI_DEV_GPU_UTIL"), nullptr);
  const auto* unavailable = set.find("gpuhost_metric_unavailable");
  ASSERT_TRUE(unavailable);
  bool found = false;
  for (const auto& s : unavailable->samples)
    if (label(s, "metric") == "DCGM_FI_DEV_GPU_UTIL" && label(s, "gpu") == "0" &&
        label(s, "reason") == "NVML_ERROR_NOT_SUPPORTED")
      found = true;
  EXPECT_TRUE(found);
  // The DCP fields are always listed: NVML has no source for them.
  found = false;
  for (const auto& s : unavailable->samples)
    if (label(s, "metric") == "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE") found = true;
  EXPECT_TRUE(found);
}

TEST(GpuMetrics, NvmlDownGivesUpZeroWithTheErrorAndNoGpuSeries) {
  gpu::GpuSnapshot s;
  s.available = false;
  s.error = gpu::NvmlIssue{9, "NVML_ERROR_DRIVER_NOT_LOADED", "Driver Not Loaded"};
  MetricSet set;
  append_gpu_metrics(s, "h", set);
  const auto* up = set.find("gpuhost_nvml_up");
  ASSERT_TRUE(up);
  ASSERT_EQ(up->samples.size(), 1u);
  EXPECT_EQ(up->samples[0].value, 0);
  EXPECT_EQ(label(up->samples[0], "error"), "NVML_ERROR_DRIVER_NOT_LOADED");
  EXPECT_EQ(set.find("DCGM_FI_DEV_GPU_TEMP"), nullptr);
  EXPECT_TRUE(to_prometheus_text(set));
}

TEST(GpuMetrics, LostGpuIsFlaggedAndKeepsWhatWasRead) {
  auto lost = healthy_a100(1);
  lost.lost = true;
  lost.power.value.reset();
  lost.power.issue = gpu::NvmlIssue{15, "NVML_ERROR_GPU_IS_LOST", "GPU is lost"};
  MetricSet set;
  append_gpu_metrics(snapshot_with({healthy_a100(0), lost}), "h", set);
  ASSERT_TRUE(set.find("gpuhost_gpu_lost"));
  EXPECT_EQ(set.find("gpuhost_gpu_lost")->samples.size(), 1u);
  EXPECT_TRUE(sample_for(set, "DCGM_FI_DEV_POWER_USAGE", "0"));
  EXPECT_FALSE(sample_for(set, "DCGM_FI_DEV_POWER_USAGE", "1"));
  EXPECT_TRUE(sample_for(set, "DCGM_FI_DEV_GPU_TEMP", "1"));
  auto up = set.find("gpuhost_nvml_up");
  EXPECT_EQ(up->samples[0].value, 1);
  EXPECT_TRUE(to_prometheus_text(set));
}

}  // namespace
}  // namespace gpuhost::telemetry
