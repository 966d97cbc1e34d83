// Benchmark for `gpuhost plan`: prices the whole built-in instance catalog for 1,000 job variants
// in one process (memory estimate per instance shape + whole-job ranking), and reports the time
// per plan. Issue target: the whole ranking well under 100 ms. Data loading is timed apart, once.
// Run: build/linux/bench/plan_ranking_bench
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "knowledge/knowledge.h"
#include "plan/instances.h"
#include "plan/memory.h"
#include "plan/model.h"
#include "plan/ranking.h"

using namespace gpuhost;
using Clock = std::chrono::steady_clock;

int main() {
  auto load_start = Clock::now();
  auto knowledge = knowledge::load_knowledge();
  auto models = plan::builtin_model_catalog();
  auto catalog = plan::builtin_instance_catalog();
  if (!knowledge || !models || !catalog) {
    std::fprintf(stderr, "loading data failed\n");
    return 1;
  }
  plan::ThroughputTable throughput = plan::spec_throughput(knowledge->gpus);
  double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - load_start).count();

  const char* names[] = {"llama-3-8b", "llama-3.1-70b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b",
                         "qwen2.5-72b", "mistral-7b", "gemma-2-9b", "gemma-2-2b", "whisper-small"};
  const plan::Method methods[] = {plan::Method::full, plan::Method::lora, plan::Method::qlora, plan::Method::inference,
                                  plan::Method::lora};
  const int batches[] = {1, 2, 4, 8, 16};
  const double hours[] = {10, 100, 1000, 5000};

  std::size_t plans = 0, options = 0, failures = 0;
  auto start = Clock::now();
  for (const char* name : names) {
    auto model = models->find(name);
    if (!model) {
      ++failures;
      continue;
    }
    for (std::size_t mi = 0; mi < 5; ++mi) {
      for (int batch : batches) {
        for (double h : hours) {
          plan::JobSetup setup;
          setup.method = methods[mi];
          setup.batch = batch;
          if (mi == 4) setup.sharding = plan::Sharding::zero3;
          auto memory_for = [&](int gpus) {
            plan::JobSetup s = setup;
            s.gpus = gpus;
            return plan::estimate_memory(**model, s);
          };
          auto ranking = plan::rank_instances(*catalog, throughput, plan::Work{h, "a100-sxm4-80gb"}, plan::SpotPolicy{},
                                              knowledge::Os::linux, memory_for);
          ++plans;
          if (ranking)
            options += ranking->options.size();
          else
            ++failures;
        }
      }
    }
  }
  double total_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  std::printf("data loaded once in %.2f ms (knowledge + models + %zu catalog rows)\n", load_ms, catalog->instances.size());
  std::printf("%zu plans (%zu ranked rows, %zu failed) in %.2f ms: %.4f ms per plan (target: well under 100 ms)\n",
              plans, options, failures, total_ms, total_ms / static_cast<double>(plans));
  return failures ? 1 : 0;
}
