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
  work.all_instances = true;  // the 8-GPU node too
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

Instance test_instance(std::string type, int count, double on_demand, std::optional<double> reserved = {}) {
  Instance in;
  in.cloud = "test";
  in.instance_type = std::move(type);
  in.gpu = "a100-sxm4-80gb";
  in.gpu_count = count;
  in.gpu_memory_gb = 80;
  in.on_demand = on_demand;
  in.reserved = reserved;
  return in;
}

Result<MemoryEstimate> small_job(int) {
  MemoryEstimate e;
  e.total_bytes = 10.0 * 1024 * 1024 * 1024;
  return e;
}

TEST(Ranking, NodesBiggerThanTheJobNeedsAreLeftOutUnlessAsked) {
  InstanceCatalog catalog;
  catalog.instances = {test_instance("one", 1, 3.0), test_instance("eight", 8, 24.0),
                       test_instance("two", 2, 6.0)};
  static const knowledge::Knowledge k = *knowledge::load_knowledge();
  ThroughputTable t = spec_throughput(k.gpus);
  Work work{10, "a100-sxm4-80gb"};
  auto r = rank_instances(catalog, t, work, SpotPolicy{}, knowledge::Os::linux, small_job);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->options.size(), 1u);  // fits on one GPU: the 2- and 8-GPU nodes are not ranked
  EXPECT_EQ(r->options[0].instance->instance_type, "one");
  EXPECT_NE(r->notes[0].find("2 instance types with more than 1 GPU are left out"), std::string::npos)
      << r->notes[0];
  work.max_gpus = 2;  // plan --gpus 2
  r = rank_instances(catalog, t, work, SpotPolicy{}, knowledge::Os::linux, small_job);
  ASSERT_EQ(r->options.size(), 2u);
  work.all_instances = true;
  r = rank_instances(catalog, t, work, SpotPolicy{}, knowledge::Os::linux, small_job);
  EXPECT_EQ(r->options.size(), 3u);
}

TEST(Ranking, AReservedPriceIsBestOnlyForAJobAsLongAsItsTerm) {
  InstanceCatalog catalog;
  catalog.instances = {test_instance("block", 1, 3.0, 1.0)};
  catalog.instances[0].reserved_min_hours = 24;  // an EC2 Capacity Block: booked by the day
  static const knowledge::Knowledge k = *knowledge::load_knowledge();
  ThroughputTable t = spec_throughput(k.gpus);
  // 2 hours: on-demand $6; reserved $2 for the hours but $24 for the day it commits to.
  auto r =
      rank_instances(catalog, t, Work{2, "a100-sxm4-80gb"}, SpotPolicy{}, knowledge::Os::linux, small_job);
  ASSERT_TRUE(r);
  const RankedOption& short_job = r->options.at(0);
  EXPECT_EQ(short_job.best_option, "on-demand");
  EXPECT_NEAR(*short_job.best_total, 6, 1e-9);
  EXPECT_NEAR(*short_job.reserved_total, 2, 1e-9);
  EXPECT_NEAR(*short_job.reserved_commitment_total, 24, 1e-9);
  EXPECT_NE(std::find(short_job.flags.begin(), short_job.flags.end(),
                      "reserved: a 24-hour commitment for a 2.0-hour job costs $24"),
            short_job.flags.end());
  // 100 hours: reserved $100 against on-demand $300.
  r = rank_instances(catalog, t, Work{100, "a100-sxm4-80gb"}, SpotPolicy{}, knowledge::Os::linux, small_job);
  EXPECT_EQ(r->options.at(0).best_option, "reserved");
  EXPECT_NEAR(*r->options.at(0).best_total, 100, 1e-9);
  // A row that does not say is a 1-year reservation: never best for a 100-hour job.
  catalog.instances[0].reserved_min_hours = 8760;
  r = rank_instances(catalog, t, Work{100, "a100-sxm4-80gb"}, SpotPolicy{}, knowledge::Os::linux, small_job);
  EXPECT_EQ(r->options.at(0).best_option, "on-demand");
}

}  // namespace
}  // namespace gpuhost::plan
