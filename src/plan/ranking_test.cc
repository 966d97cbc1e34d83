#include "plan/ranking.h"

#include <gtest/gtest.h>

#include "knowledge/knowledge.h"
#include "plan/test_models.h"

namespace gpuhost::plan {
namespace {

TEST(SpotRisk, FollowsTheFirstOrderModelAndYoungsInterval) {
  // W = 10 h, lambda = 0.1/h, R = 0.1 h, tau = 1 h, C = 0.05 h:
  // T = 10 x (1 + 0.05/1) / (1 - 0.1 x (0.1 + 0.5)) = 10.5 / 0.94 = 11.1702...;
  // interruptions = 0.1 x T = 1.117; tau* = sqrt(2 x 0.05 / 0.1) = 1 h.
  SpotPolicy p;
  p.interruptions_per_hour = 0.1;
  p.restart_hours = 0.1;
  p.checkpoint_interval_hours = 1;
  p.checkpoint_write_hours = 0.05;
  SpotRisk r = spot_risk(10, p);
  EXPECT_NEAR(r.expected_hours, 10.5 / 0.94, 1e-12);
  EXPECT_NEAR(r.expected_interruptions, 1.05 / 0.94, 1e-12);
  EXPECT_NEAR(r.optimal_interval_hours, 1.0, 1e-12);
  // A longer interval loses more work per interruption: tau = 4 -> 10 x 1.0125 / (1 - 0.21).
  p.checkpoint_interval_hours = 4;
  EXPECT_NEAR(spot_risk(10, p).expected_hours, 10.125 / 0.79, 1e-12);
  EXPECT_GT(spot_risk(10, p).expected_hours, r.expected_hours_at_optimum);
  // lambda (R + tau/2) >= 1: never finishes.
  p.interruptions_per_hour = 1;
  EXPECT_FALSE(spot_risk(10, p).finishes);
}

TEST(Ranking, ScalesTimeByThroughputAndFlagsMissingPrices) {
  InstanceCatalog catalog;
  auto add = [&](std::string type, std::string gpu, int count, double mem, std::optional<double> od, std::optional<double> spot) {
    Instance in;
    in.cloud = "test";
    in.instance_type = std::move(type);
    in.gpu = std::move(gpu);
    in.gpu_count = count;
    in.gpu_memory_gb = mem;
    in.on_demand = od;
    in.spot = spot;
    catalog.instances.push_back(in);
  };
  add("big", "h100-sxm", 8, 80, 98.32, std::nullopt);
  add("small", "a100-sxm4-80gb", 1, 80, 3.0, std::nullopt);
  add("noprice", "a100-sxm4-80gb", 1, 80, std::nullopt, std::nullopt);
  add("tiny", "t4", 1, 16, 0.5, 0.2);
  add("mystery", "a10g", 1, 24, 1.0, std::nullopt);
  static const knowledge::Knowledge k = *knowledge::load_knowledge();
  ThroughputTable t = spec_throughput(k.gpus);
  Work work{100, "a100-sxm4-80gb"};
  auto memory = [](int) -> Result<MemoryEstimate> {
    MemoryEstimate e;
    e.total_bytes = 20.0 * 1024 * 1024 * 1024;  // 20 GiB: T4 does not fit
    return e;
  };
  auto r = rank_instances(catalog, t, work, SpotPolicy{}, knowledge::Os::linux, memory);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->options.size(), 5u);
  // small: 100 A100-hours on one A100 = 100 h x $3 = $300. big: 100 x 312/989 / 8 = 3.943 h x 98.32 = $387.7.
  EXPECT_EQ(r->options[0].instance->instance_type, "small");
  EXPECT_NEAR(*r->options[0].on_demand_total, 300, 1e-9);
  EXPECT_EQ(r->options[1].instance->instance_type, "big");
  EXPECT_NEAR(*r->options[1].hours, 100.0 * 312 / 989 / 8, 1e-9);
  // Then the flagged ones (no price or no throughput), then what does not fit.
  EXPECT_FALSE(r->options[2].best_total);
  EXPECT_FALSE(r->options[3].best_total);
  EXPECT_EQ(r->options[4].instance->instance_type, "tiny");
  EXPECT_FALSE(r->options[4].fits);
  for (const auto& o : r->options) {
    if (o.instance->instance_type == "noprice") {
      EXPECT_FALSE(o.on_demand_total);
      EXPECT_NE(std::find(o.flags.begin(), o.flags.end(), "on-demand price missing"), o.flags.end());
    }
    if (o.instance->instance_type == "mystery") {
      EXPECT_FALSE(o.hours);
    }
  }
}

TEST(Ranking, ReadsMeasuredThroughputFromABenchResult) {
  auto k = *knowledge::load_knowledge();
  auto r = parse_bench_result(
      R"({"gpu": {"devices": [{"name": "NVIDIA A100-SXM4-80GB", "gemm_tflops": {"bf16": 270}},
                              {"name": "NVIDIA A100-SXM4-80GB", "gemm_tflops": {"bf16": 280}}]}})",
      "bench.json", k.gpus);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].gpu, "a100-sxm4-80gb");
  EXPECT_DOUBLE_EQ((*r)[0].tflops, 275);
  auto bad = parse_bench_result(R"({"gpu": {}})", "bench.json", k.gpus);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::parse_error);
}

TEST(Ranking, ResolvesGpuNamesWithSuggestions) {
  auto k = *knowledge::load_knowledge();
  EXPECT_EQ(*resolve_gpu("A100", k.gpus), "a100");
  EXPECT_EQ(*resolve_gpu("h100-sxm", k.gpus), "h100-sxm");
  auto bad = resolve_gpu("h10o-sxm", k.gpus);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("did you mean 'h100-sxm'"), std::string::npos) << bad.error().message;
}

}  // namespace
}  // namespace gpuhost::plan
