#include <gtest/gtest.h>

#include "base/embedded.h"
#include "bench/disk.h"
#include "bench/disk_tiers.h"
#include "bench/gpu_bench.h"
#include "bench/network.h"
#include "bench/result.h"
#include "bench/verdict.h"
#include "knowledge/knowledge.h"

namespace gpuhost::bench {
namespace {

Measurement measured(std::string id, double value) {
  Measurement m;
  m.id = std::move(id);
  m.value = value;
  return m;
}

const knowledge::GpuTable& gpu_table() {
  static const knowledge::Knowledge k = *knowledge::load_knowledge({});
  return k.gpus;
}

TEST(Verdict, AtLeastPassesWarnsWithinTenPercentAndFailsBelow) {
  auto m = measured("x", 100);
  judge_at_least(m, 100, ">= 100", "test");
  EXPECT_EQ(m.status, Status::pass);
  m.value = 95;
  judge_at_least(m, 100, ">= 100", "test");
  EXPECT_EQ(m.status, Status::warn);
  EXPECT_DOUBLE_EQ(*m.ratio, 0.95);
  m.value = 80;
  judge_at_least(m, 100, ">= 100", "test");
  EXPECT_EQ(m.status, Status::fail);
}

TEST(Verdict, PcieBandwidthScalesWithGenerationAndWidth) {
  EXPECT_DOUBLE_EQ(*pcie_theoretical_gbps(4, 16), 31.5);
  EXPECT_DOUBLE_EQ(*pcie_theoretical_gbps(3, 8), 15.754 / 2);
  EXPECT_FALSE(pcie_theoretical_gbps(9, 16));
}

TEST(Verdict, SpreadIsMaxMinusMinOverMax) {
  EXPECT_NEAR(*spread({100, 95, 98}), 0.05, 1e-12);
  EXPECT_FALSE(spread({100}));
}

TEST(DiskTiers, EmbeddedTableLoadsWithSourcesAndFormulas) {
  ASSERT_FALSE(disk_tiers().empty());
  for (const auto& t : disk_tiers()) EXPECT_FALSE(t.source.empty()) << t.key;
  EXPECT_EQ(find_disk_tier("aws-gp3")->iops(std::nullopt), 3000);
  EXPECT_EQ(find_disk_tier("alibaba-essd-pl1")->iops(164.0), 10000);
  EXPECT_EQ(find_disk_tier("alibaba-essd-pl1")->iops(5000.0), 50000);
  EXPECT_EQ(find_disk_tier("alibaba-essd-autopl")->iops(10.0), 3000);
  EXPECT_FALSE(find_disk_tier("gcp-hyperdisk")->iops(std::nullopt));
  EXPECT_EQ(find_disk_tier("azure-premium-p30")->iops(std::nullopt), 5000);
}

TEST(DiskTiers, RejectsARowWithoutSource) {
  auto parsed = parse_disk_tiers(R"({"schema_version":1,"tiers":[{"key":"x","name":"X","base_iops":5,"as_of":"2026-11"}]})");
  ASSERT_FALSE(parsed);
  EXPECT_NE(parsed.error().message.find("source"), std::string::npos);
}

TEST(DiskVerdict, SeedRuleAppliesWhenTheTierIsUnknown) {
  auto m = measured("disk.randread_iops", 12000);
  judge_random_read_iops(m, DiskOptions{});
  EXPECT_EQ(m.status, Status::pass);
  EXPECT_EQ(*m.expected, 10000);
}

TEST(DiskVerdict, Gp3AtDefaultIopsMeetsItsTierButNotTheSeedRule) {
  DiskOptions options;
  options.tier_key = "aws-gp3";
  auto m = measured("disk.randread_iops", 3050);
  judge_random_read_iops(m, options);
  EXPECT_EQ(m.status, Status::pass);
  EXPECT_EQ(*m.expected, 2700);
  ASSERT_FALSE(m.notes.empty());
  EXPECT_NE(m.notes.front().find("10K"), std::string::npos);
}

TEST(DiskVerdict, ProvisionedIopsOverrideTheTierBaseline) {
  DiskOptions options;
  options.tier_key = "aws-gp3";
  options.provisioned_iops = 16000;
  auto m = measured("disk.randread_iops", 9000);
  judge_random_read_iops(m, options);
  EXPECT_EQ(m.status, Status::fail);
}

TEST(NetworkVerdict, SeedRuleAndNominalBandwidth) {
  auto m = measured("network.upload_gbits", 0.5);
  judge_network_throughput(m, std::nullopt);
  EXPECT_EQ(m.status, Status::fail);
  m.value = 9.0;
  judge_network_throughput(m, 25.0);
  EXPECT_EQ(m.status, Status::fail);
  m.value = 21.0;
  judge_network_throughput(m, 25.0);
  EXPECT_EQ(m.status, Status::pass);
}

TEST(Network, ParsesPeerForms) {
  EXPECT_EQ(*parse_peer("10.0.0.2"), (std::pair<std::string, std::uint16_t>{"10.0.0.2", k_default_bench_port}));
  EXPECT_EQ(*parse_peer("host:80"), (std::pair<std::string, std::uint16_t>{"host", 80}));
  EXPECT_EQ(*parse_peer("[::1]:81"), (std::pair<std::string, std::uint16_t>{"::1", 81}));
  EXPECT_FALSE(parse_peer("host:99999"));
  EXPECT_FALSE(parse_peer(":80"));
}

TEST(GpuVerdict, HealthyA100PassesBf16AndPinnedBands) {
  GpuContext context;
  context.model = gpu_table().find_by_key("a100-sxm4-80gb");
  context.link = gpu::PcieLink{4, 4, 4, 16, 16};
  std::vector<Measurement> ms{measured("gpu.gemm_bf16_tflops", 280), measured("gpu.d2h_pinned_gbps", 25)};
  judge_gpu(ms, context);
  EXPECT_EQ(ms[0].status, Status::pass);
  EXPECT_NEAR(*ms[0].ratio, 280 / (312 * 0.8), 1e-9);
  EXPECT_EQ(ms[1].status, Status::pass);
}

TEST(GpuVerdict, DowntrainedLinkFailsPinnedCopyAndSaysWhy) {
  GpuContext context;
  context.model = gpu_table().find_by_key("a100-pcie-40gb");
  context.link = gpu::PcieLink{3, 4, 4, 8, 16};
  std::vector<Measurement> ms{measured("gpu.d2h_pinned_gbps", 6.1)};
  judge_gpu(ms, context);
  EXPECT_EQ(ms[0].status, Status::fail);
  ASSERT_FALSE(ms[0].notes.empty());
  EXPECT_NE(ms[0].notes[0].find("Gen3 x8"), std::string::npos);
  EXPECT_NE(ms[0].notes[0].find("Gen4 x16"), std::string::npos);
}

TEST(GpuVerdict, ThrottledGemmNamesTheClockReasons) {
  GpuContext context;
  context.model = gpu_table().find_by_key("l4");
  context.clocks_event_reasons = gpu::clocks_event::sw_thermal_slowdown | gpu::clocks_event::hw_thermal_slowdown;
  std::vector<Measurement> ms{measured("gpu.gemm_bf16_tflops", 50)};
  judge_gpu(ms, context);
  EXPECT_EQ(ms[0].status, Status::fail);
  ASSERT_FALSE(ms[0].notes.empty());
  EXPECT_NE(ms[0].notes[0].find("thermal"), std::string::npos);
}

TEST(GpuVerdict, SpreadAboveFivePercentIsReported) {
  BenchReport report;
  report.measurements = {measured("gpu.gemm_bf16_tflops", 280), measured("gpu.gemm_bf16_tflops", 250)};
  judge_gpu_spread(report);
  ASSERT_EQ(report.measurements.size(), 3u);
  EXPECT_EQ(report.measurements.back().id, "gpu.gemm_spread");
  EXPECT_EQ(report.measurements.back().status, Status::fail);
}

TEST(ResultJson, RoundTripsMeasurementsAndGpuSummaries) {
  BenchReport report;
  report.parts = {"disk", "gpu"};
  report.mode = "quick";
  auto m = measured("disk.randread_iops", 12345);
  judge_at_least(m, 10000, ">= 10000 IOPS", "seed");
  m.notes.push_back("note");
  report.measurements.push_back(m);
  report.unavailable.push_back({"network", "no peer"});
  GpuSummary g;
  g.name = "NVIDIA A100-SXM4-80GB";
  g.model_key = "a100-sxm4-80gb";
  g.bf16_tflops = 281.5;
  report.gpus.push_back(g);
  auto json = to_json(report);
  EXPECT_EQ(json.get_string("schema"), "gpuhost.bench/1");
  auto back = report_from_json(json);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->measurements.size(), 1u);
  EXPECT_EQ(back->measurements[0].status, Status::pass);
  EXPECT_EQ(back->measurements[0].notes, std::vector<std::string>{"note"});
  EXPECT_EQ(back->gpus[0].bf16_tflops, 281.5);
  EXPECT_FALSE(back->gpus[0].fp32_tflops);
  EXPECT_EQ(back->unavailable[0].reason, "no peer");
  EXPECT_FALSE(report_from_json(json::Value::object()));
}

}  // namespace
}  // namespace gpuhost::bench
