#include "telemetry/gpu_metrics.h"

#include <regex>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#ifdef GPUHOST_FAKE_NVML_PATH
#include "gpu/fake_nvml_test_support.h"
#include "gpu/nvml_session.h"
#endif

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
  d.mig.value = gpu::MigState{false, false};
  d.vgpu_license.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "Not Supported"};
  d.total_energy_mj.value = 123456789;
  d.pcie_throughput.value = gpu::PcieThroughput{1500, 2500};
  d.encoder_percent.value = 4;
  d.decoder_percent.value = 6;
  d.memory_temperature_c.value = 44;
  d.processes.value = {gpu::GpuProcess{4242, false, 2147483648ULL}};
  d.xid.value = gpu::XidState{0, 0, 0};
  d.gpm.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "GPM needs Hopper"};
  d.nvlink_bandwidth.value = 1234.5;
  return d;
}

gpu::GpmActivity busy_gpm() {
  gpu::GpmActivity g;
  g.interval_s = 15;
  g.graphics_util_percent.value = 98.5;
  g.tensor_util_percent.value = 61.25;
  g.dram_bw_util_percent.value = 72;
  g.pcie_tx_mib_per_s.value = 2;
  g.pcie_rx_mib_per_s.value = 0.5;
  return g;
}

gpu::GpuSnapshot snapshot_with(std::vector<gpu::GpuDevice> devices) {
  gpu::GpuSnapshot s;
  s.available = true;
  s.driver_version = "535.104.05";
  s.devices = std::move(devices);
  return s;
}

std::string label(const Sample& s, std::string_view name) {
  for (const auto& l : s.labels)
    if (l.name == name) return l.value;
  return "<absent>";
}

const Sample* sample_for(const MetricSet& set, std::string_view name, std::string_view gpu) {
  const auto* family = set.find(name);
  if (!family) return nullptr;
  for (const auto& s : family->samples)
    if (label(s, "gpu") == gpu) return &s;
  return nullptr;
}

// The reason gpuhost_metric_unavailable gives for `metric` on `gpu`, or "" when not listed.
std::string unavailable_reason(const MetricSet& set, std::string_view metric, std::string_view gpu) {
  const auto* family = set.find("gpuhost_metric_unavailable");
  if (!family) return "";
  for (const auto& s : family->samples)
    if (label(s, "metric") == metric && label(s, "gpu") == gpu) return label(s, "reason");
  return "";
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

TEST(GpuMetrics, ExportsTheReadingsAddedForDcgmExportersDefaults) {
  auto d = healthy_a100(0);
  d.gpm.issue.reset();
  d.gpm.value = busy_gpm();
  MetricSet set;
  append_gpu_metrics(snapshot_with({d}), "node1", set);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "0")->value, 123456789);  // mJ
  EXPECT_EQ(set.find("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")->type, MetricType::counter);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_MEMORY_TEMP", "0")->value, 44);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_ENC_UTIL", "0")->value, 4);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_DEC_UTIL", "0")->value, 6);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "0")->value, 1500);  // KB/s as NVML
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_PCIE_RX_THROUGHPUT", "0")->value, 2500);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "0")->value, 1234.5);
  // GPM percentages become DCGM's ratios, MiB/s becomes bytes/s.
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "0")->value, 0.985);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "0")->value, 0.6125);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_PROF_DRAM_ACTIVE", "0")->value, 0.72);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_PROF_PCIE_TX_BYTES", "0")->value, 2.0 * 1048576);
  EXPECT_DOUBLE_EQ(sample_for(set, "DCGM_FI_PROF_PCIE_RX_BYTES", "0")->value, 0.5 * 1048576);
  // Processes.
  EXPECT_DOUBLE_EQ(sample_for(set, "gpuhost_gpu_processes", "0")->value, 1);
  const Sample* memory = sample_for(set, "gpuhost_gpu_process_used_memory_bytes", "0");
  ASSERT_TRUE(memory);
  EXPECT_EQ(label(*memory, "pid"), "4242");
  EXPECT_EQ(label(*memory, "type"), "compute");
  EXPECT_DOUBLE_EQ(memory->value, 2147483648.0);
  EXPECT_DOUBLE_EQ(sample_for(set, "gpuhost_gpu_nvml_errors", "0")->value, 0);
  EXPECT_TRUE(to_prometheus_text(set));
}

TEST(GpuMetrics, XidCarriesDcgmExportersCodeAndMessageLabels) {
  auto none = healthy_a100(0);
  auto fell_off = healthy_a100(1);
  fell_off.xid.value = gpu::XidState{79, 1, 1767225600};
  auto rare = healthy_a100(2);
  rare.xid.value = gpu::XidState{154, 2, 1767225600};
  MetricSet set;
  append_gpu_metrics(snapshot_with({none, fell_off, rare}), "h", set);
  const Sample* zero = sample_for(set, "DCGM_FI_DEV_XID_ERRORS", "0");
  ASSERT_TRUE(zero);
  EXPECT_EQ(zero->value, 0);
  EXPECT_EQ(label(*zero, "err_code"), "0");
  EXPECT_EQ(label(*zero, "err_msg"), "No Error");
  const Sample* lost = sample_for(set, "DCGM_FI_DEV_XID_ERRORS", "1");
  EXPECT_EQ(lost->value, 79);
  EXPECT_EQ(label(*lost, "err_code"), "79");
  EXPECT_EQ(label(*lost, "err_msg"), "GPU has fallen off the bus");
  EXPECT_EQ(label(*lost, "UUID"), "GPU-1");
  EXPECT_EQ(label(*sample_for(set, "DCGM_FI_DEV_XID_ERRORS", "2"), "err_msg"), "Xid 154");
  EXPECT_EQ(set.find("DCGM_FI_DEV_XID_ERRORS")->type, MetricType::gauge);
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

TEST(GpuMetrics, EveryDefaultMetricIsEmittedOrExplainedForEveryGpu) {
  auto hopper = healthy_a100(1);
  hopper.gpm.issue.reset();
  hopper.gpm.value = busy_gpm();
  hopper.gpm.value->dram_bw_util_percent.value.reset();
  hopper.gpm.value->dram_bw_util_percent.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "m"};
  auto bare = healthy_a100(2);  // a one-off snapshot: no session readings
  bare.xid = {};
  bare.gpm = {};
  bare.nvlink_bandwidth = {};
  MetricSet set;
  append_gpu_metrics(snapshot_with({healthy_a100(0), hopper, bare}), "h", set);
  for (const char* gpu : {"0", "1", "2"}) {
    for (std::string_view metric : dcgm_exporter_default_metrics()) {
      SCOPED_TRACE(std::string(metric) + " gpu " + gpu);
      const bool emitted = sample_for(set, metric, gpu) != nullptr;
      const std::string reason = unavailable_reason(set, metric, gpu);
      EXPECT_NE(emitted, !reason.empty()) << "emitted and listed, or neither: " << reason;
    }
  }
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "0"),
            "NVML_ERROR_NOT_SUPPORTED: DCGM profiling field; NVML gives it through GPM on Hopper and newer "
            "GPUs only");
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_PROF_DRAM_ACTIVE", "1"), "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_TRUE(sample_for(set, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "1"));
  EXPECT_NE(unavailable_reason(set, "DCGM_FI_DEV_XID_ERRORS", "2").find("not collected"), std::string::npos);
  EXPECT_TRUE(to_prometheus_text(set));
}

TEST(GpuMetrics, ListsWhatNvmlRefusedInsteadOfEmittingIt) {
  auto d = healthy_a100(0);
  d.utilization.value.reset();
  d.utilization.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "Not Supported"};
  MetricSet set;
  append_gpu_metrics(snapshot_with({d}), "h", set);
  EXPECT_EQ(set.find("DCGM_FI_DEV_GPU_UTIL"), nullptr);
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_DEV_GPU_UTIL", "0"), "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_DEV_MEM_COPY_UTIL", "0"), "NVML_ERROR_NOT_SUPPORTED");
  // "Not supported" is the GPU's nature, not a failure.
  EXPECT_DOUBLE_EQ(sample_for(set, "gpuhost_gpu_nvml_errors", "0")->value, 0);
}

TEST(GpuMetrics, ReasonsSayWhyWhereGpuhostKnows) {
  auto mig = healthy_a100(0);
  mig.mig.value = gpu::MigState{true, true};
  mig.utilization.value.reset();
  mig.utilization.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "Not Supported"};
  auto wddm = healthy_a100(1);
  wddm.driver_model.value = gpu::DriverModelState{gpu::DriverModel::wddm, gpu::DriverModel::wddm};
  wddm.processes.value = {gpu::GpuProcess{4412, false, std::nullopt},
                          gpu::GpuProcess{1208, true, std::nullopt}};
  auto vgpu = healthy_a100(2);
  vgpu.virtualization.value = gpu::VirtualizationMode::vgpu;
  vgpu.pcie_throughput.value.reset();
  vgpu.pcie_throughput.issue = gpu::NvmlIssue{3, "NVML_ERROR_NOT_SUPPORTED", "Not Supported"};
  auto old_driver = healthy_a100(3);
  old_driver.total_energy_mj.value.reset();
  old_driver.total_energy_mj.issue = gpu::NvmlIssue{13, "NVML_ERROR_FUNCTION_NOT_FOUND", "m"};
  old_driver.nvlink_bandwidth.value.reset();
  old_driver.nvlink_bandwidth.issue = gpu::NvmlIssue{21, "NVML_ERROR_NO_DATA", "first"};
  MetricSet set;
  append_gpu_metrics(snapshot_with({mig, wddm, vgpu, old_driver}), "h", set);
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_DEV_GPU_UTIL", "0"),
            "NVML_ERROR_NOT_SUPPORTED: MIG is enabled: NVML reports utilisation per MIG instance only");
  // Under WDDM the processes are counted, their memory is not known.
  EXPECT_DOUBLE_EQ(sample_for(set, "gpuhost_gpu_processes", "1")->value, 2);
  EXPECT_FALSE(sample_for(set, "gpuhost_gpu_process_used_memory_bytes", "1"));
  EXPECT_EQ(unavailable_reason(set, "gpuhost_gpu_process_used_memory_bytes", "1"),
            "NVML_VALUE_NOT_AVAILABLE: WDDM driver model, Windows manages GPU memory");
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_DEV_PCIE_TX_THROUGHPUT", "2"),
            "NVML_ERROR_NOT_SUPPORTED: not available in vGPU guests");
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "3"),
            "NVML_ERROR_FUNCTION_NOT_FOUND: this NVIDIA driver lacks the NVML function");
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "3"),
            "NVML_ERROR_NO_DATA: first collection: a rate needs the previous scrape");
  EXPECT_TRUE(to_prometheus_text(set));
}

TEST(GpuMetrics, FailedReadingsOfOneGpuAreCountedAndTheRestIsEmitted) {
  auto failing = healthy_a100(1);
  for (auto* r : {&failing.power.issue, &failing.processes.issue})
    *r = gpu::NvmlIssue{999, "NVML_ERROR_UNKNOWN", "Unknown Error"};
  failing.power.value.reset();
  failing.processes.value.reset();
  failing.pcie_throughput.value.reset();
  failing.pcie_throughput.issue = gpu::NvmlIssue{4, "NVML_ERROR_NO_PERMISSION", "m"};
  MetricSet set;
  append_gpu_metrics(snapshot_with({healthy_a100(0), failing}), "h", set);
  EXPECT_DOUBLE_EQ(sample_for(set, "gpuhost_gpu_nvml_errors", "1")->value, 3);
  EXPECT_DOUBLE_EQ(sample_for(set, "gpuhost_gpu_nvml_errors", "0")->value, 0);
  EXPECT_FALSE(sample_for(set, "DCGM_FI_DEV_POWER_USAGE", "1"));
  EXPECT_TRUE(sample_for(set, "DCGM_FI_DEV_GPU_TEMP", "1"));
  EXPECT_EQ(unavailable_reason(set, "DCGM_FI_DEV_POWER_USAGE", "1"), "NVML_ERROR_UNKNOWN");
  EXPECT_EQ(unavailable_reason(set, "gpuhost_gpu_processes", "1"), "NVML_ERROR_UNKNOWN");
  EXPECT_TRUE(to_prometheus_text(set));
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

TEST(GpuMetrics, CountFailureIsListed) {
  gpu::GpuSnapshot s = snapshot_with({});
  s.count_error = gpu::NvmlIssue{999, "NVML_ERROR_UNKNOWN", "Unknown Error"};
  MetricSet set;
  append_gpu_metrics(s, "h", set);
  EXPECT_EQ(set.find("gpuhost_gpus")->samples[0].value, 0);
  const auto* unavailable = set.find("gpuhost_metric_unavailable");
  ASSERT_TRUE(unavailable);
  EXPECT_EQ(label(unavailable->samples[0], "metric"), "*");
  EXPECT_EQ(label(unavailable->samples[0], "reason"), "NVML_ERROR_UNKNOWN: nvmlDeviceGetCount failed");
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
  EXPECT_DOUBLE_EQ(sample_for(set, "gpuhost_gpu_nvml_errors", "1")->value, 1);
  auto up = set.find("gpuhost_nvml_up");
  EXPECT_EQ(up->samples[0].value, 1);
  EXPECT_TRUE(to_prometheus_text(set));
}

#ifdef GPUHOST_FAKE_NVML_PATH

// Every DCGM_* name in the PromQL of NVIDIA's Grafana dashboard 12239, extracted from the "expr"
// and templating "query"/"definition" strings of NVIDIA/dcgm-exporter
// grafana/dcgm-exporter-dashboard.json at commit d5e5f510a1b6b393f39a43293ccd9dc985defc79 (the
// file last changed in cffaeb8, 2023; "gnetId": 12239).
constexpr std::string_view k_dashboard_12239_metrics[] = {
    "DCGM_FI_DEV_GPU_TEMP",             // GPU Temperature, GPU Avg. Temp, $instance and $gpu variables
    "DCGM_FI_DEV_POWER_USAGE",          // GPU Power Usage, GPU Power Total
    "DCGM_FI_DEV_SM_CLOCK",             // GPU SM Clocks
    "DCGM_FI_DEV_GPU_UTIL",             // GPU Utilization
    "DCGM_FI_DEV_FB_USED",              // GPU Framebuffer Mem Used
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",  // Tensor Core Utilization (DCP; GPM on Hopper)
};

// Two scrapes' worth of snapshots (GPM and NVLink rates need the first) rendered as /metrics text.
std::string scrape_twice(const std::string& scenario) {
  gpu::testing::ScopedEnv scenario_env(gpu::testing::k_scenario_env, gpu::testing::scenario_path(scenario));
  gpu::testing::ScopedEnv library_env(gpu::k_nvml_library_env, gpu::testing::k_fake_nvml);
  gpu::NvmlSession session;
  (void)session.collect();
  MetricSet set;
  append_gpu_metrics(session.collect(), "node1", set);
  auto text = to_prometheus_text(set);
  EXPECT_TRUE(text) << text.error().message;
  return text ? *text : std::string();
}

// Metric names with a sample carrying gpu="<gpu>", read back from the text format.
std::set<std::string> names_for_gpu(const std::string& text, const std::string& gpu) {
  std::set<std::string> names;
  std::istringstream in(text);
  const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} \S+$)");
  std::smatch m;
  for (std::string line; std::getline(in, line);)
    if (std::regex_match(line, m, sample) && m[2].str().find("gpu=\"" + gpu + "\"") != std::string::npos)
      names.insert(m[1].str());
  return names;
}

TEST(GpuMetricsFakeNvml, EveryMetricOfGrafanaDashboard12239IsPresentForHealthyH100s) {
  const std::string text = scrape_twice("eight_h100");
  for (int gpu = 0; gpu < 8; ++gpu) {
    const auto names = names_for_gpu(text, std::to_string(gpu));
    for (std::string_view metric : k_dashboard_12239_metrics)
      EXPECT_TRUE(names.contains(std::string(metric))) << metric << " missing for gpu " << gpu << "\n"
                                                       << text;
  }
  // A healthy host: nothing failed, and of dcgm-exporter's defaults only the vGPU licence (bare
  // metal) is missing.
  EXPECT_NE(text.find("gpuhost_gpu_nvml_errors{"), std::string::npos);
  EXPECT_FALSE(std::regex_search(text, std::regex(R"(gpuhost_gpu_nvml_errors\{[^}]*\} [1-9])")));
  for (std::string_view metric : dcgm_exporter_default_metrics()) {
    const std::string listed = "metric=\"" + std::string(metric) + "\"";
    if (metric == "DCGM_FI_DEV_VGPU_LICENSE_STATUS")
      EXPECT_NE(text.find(listed + R"(,gpu="0",reason="NVML_ERROR_NOT_SUPPORTED")"), std::string::npos);
    else
      EXPECT_EQ(text.find(listed), std::string::npos)
          << metric << " listed as unavailable on a healthy H100 host";
  }
}

TEST(GpuMetricsFakeNvml, NvmlFailingForSomeGpusMidScrapeGivesPartialMetrics) {
  const std::string text = scrape_twice("mid_scrape_error");
  ASSERT_FALSE(text.empty());
  EXPECT_NE(text.find("gpuhost_nvml_up 1\n"), std::string::npos);
  // GPU 2: what answered is there, what failed is listed with NVML's status and counted.
  const auto gpu2 = names_for_gpu(text, "2");
  EXPECT_TRUE(gpu2.contains("DCGM_FI_DEV_GPU_TEMP"));
  EXPECT_TRUE(gpu2.contains("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"));
  EXPECT_FALSE(gpu2.contains("DCGM_FI_DEV_POWER_USAGE"));
  EXPECT_NE(
      text.find(
          R"(gpuhost_metric_unavailable{metric="DCGM_FI_DEV_POWER_USAGE",gpu="2",reason="NVML_ERROR_UNKNOWN"} 1)"),
      std::string::npos);
  EXPECT_NE(
      text.find(
          R"(gpuhost_metric_unavailable{metric="DCGM_FI_DEV_PCIE_TX_THROUGHPUT",gpu="2",reason="NVML_ERROR_NO_PERMISSION"} 1)"),
      std::string::npos);
  // Power, energy, PCIe throughput, memory temperature and NVLink (one field-value call), processes.
  const std::regex errors(R"(gpuhost_gpu_nvml_errors\{gpu="2",[^}]*\} 6\n)");
  EXPECT_TRUE(std::regex_search(text, errors)) << text;
  // GPU 5 could not be opened: listed as a whole, counted, its neighbours untouched.
  EXPECT_NE(text.find(R"(gpuhost_metric_unavailable{metric="*",gpu="5",reason="NVML_ERROR_UNKNOWN"} 1)"),
            std::string::npos);
  EXPECT_TRUE(names_for_gpu(text, "5") ==
              (std::set<std::string>{"gpuhost_gpu_nvml_errors", "gpuhost_metric_unavailable"}));
  for (int gpu : {0, 1, 3, 4, 6, 7})
    for (std::string_view metric : k_dashboard_12239_metrics)
      EXPECT_TRUE(names_for_gpu(text, std::to_string(gpu)).contains(std::string(metric)))
          << metric << " gpu " << gpu;
}

// MIG on Hopper: each GPU instance gets dcgm-exporter's profiling fields and memory once, with
// GPU_I_PROFILE / GPU_I_ID, beside the whole GPU's row; two compute instances of one GPU instance
// give one row, not two series with the same labels.
TEST(GpuMetricsFakeNvml, GpuInstancesGetTheirOwnProfilingRows) {
  const std::string text = scrape_twice("h100_mig_instances_busy");
  const std::regex tensor(
      R"re(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE\{gpu="0",[^}]*DCGM_FI_DRIVER_VERSION="[^"]*"\} (\S+)\n)re");
  const std::regex instance_tensor(
      R"re(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE\{gpu="0",[^}]*GPU_I_PROFILE="([^"]+)",GPU_I_ID="(\d+)"\} (\S+)\n)re");
  std::set<std::string> rows;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), instance_tensor);
       it != std::sregex_iterator(); ++it)
    rows.insert((*it)[1].str() + "/" + (*it)[2].str() + "=" + (*it)[3].str());
  EXPECT_EQ(rows, (std::set<std::string>{"3g.40gb/1=0.555", "1c.2g.20gb/5=0.12", "1g.10gb/9=0"})) << text;
  std::smatch whole;
  ASSERT_TRUE(std::regex_search(text, whole, tensor)) << text;
  EXPECT_EQ(whole[1].str(), "0.3");  // the GPU's own row (its labels end with the driver)
  // NVML gives no PCIe GPM per instance here: the GPU's row only.
  EXPECT_EQ(std::regex_search(text, std::regex(R"(DCGM_FI_PROF_PCIE_TX_BYTES\{[^}]*GPU_I_ID)")), false);
  const auto count = [&](const std::string& pattern) {
    const std::regex re(pattern);
    return std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator());
  };
  EXPECT_EQ(count(R"(DCGM_FI_DEV_FB_USED\{[^}]*GPU_I_ID="5"\})"), 1);
  EXPECT_EQ(count(R"(gpuhost_gpu_mig_device_info\{)"), 4);
}

#else

TEST(GpuMetricsFakeNvml, NeedsTheFakeNvmlPaths) {
  GTEST_SKIP() << "telemetry_test was built without GPUHOST_FAKE_NVML_* (src/telemetry/CMakeLists.txt): the "
                  "dashboard 12239 and mid-scrape error tests against the fake NVML did not run";
}

#endif

}  // namespace
}  // namespace gpuhost::telemetry
