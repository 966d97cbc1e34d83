// Compares the estimator's totals with published measured or documented figures and prints the
// error per case. The bound is loose on purpose: it catches a broken formula, not a few percent.
#include <cmath>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include "plan/memory.h"
#include "plan/model.h"

namespace gpuhost::plan {
namespace {

struct Case {
  const char* name;
  double published_gb;  // as published ("GB"; read as GiB, as torch reports it)
  const char* source;
  ModelSpec model;
  JobSetup setup;
};

ModelSpec t0_3b() {
  // bigscience/T0_3B = T5 v1.1 XL (LM-adapted): 24 + 24 layers, d_model 2048, 32 heads, gated
  // d_ff 5120, vocab 32128, 2.85B parameters (huggingface.co/bigscience/T0_3B config.json).
  ModelSpec m;
  m.key = "t0_3b";
  m.name = "T0_3B";
  m.architecture = Architecture::encoder_decoder;
  m.layers = 24;
  m.decoder_layers = 24;
  m.hidden = 2048;
  m.heads = 32;
  m.kv_heads = 32;
  m.intermediate = 5120;
  m.vocab = 32128;
  m.gated_mlp = true;
  m.params = 2.85e9;
  m.encoder_seq = 64;
  m.decoder_seq = 64;
  return m;
}

ModelSpec bloom_7b1() {
  // bigscience/bloomz-7b1: 30 layers, hidden 4096, 32 heads, vocab 250880, 4h GeLU MLP, tied, 7.07B.
  ModelSpec m;
  m.key = "bloomz-7b1";
  m.name = "bloomz-7b1";
  m.layers = 30;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 32;
  m.intermediate = 4 * 4096;
  m.vocab = 250880;
  m.gated_mlp = false;
  m.tied_embeddings = true;
  m.params = 7.07e9;
  return m;
}

ModelSpec llama2_7b() {
  // meta-llama/Llama-2-7b-hf config.json: 32 layers, 4096, 32 heads (no GQA), 11008, vocab 32000.
  ModelSpec m;
  m.key = "llama-2-7b";
  m.name = "Llama 2 7B";
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 32;
  m.intermediate = 11008;
  m.vocab = 32000;
  m.params = 6.74e9;
  return m;
}

JobSetup setup(Method method, Precision precision, int batch, int seq, Checkpointing ckpt) {
  JobSetup s;
  s.method = method;
  s.precision = precision;
  s.batch = batch;
  s.seq = seq;
  s.checkpointing = ckpt;
  return s;
}

TEST(Validation, EstimatesAgainstPublishedFigures) {
  const char* peft = "huggingface/peft README, 'GPU memory required for adapting LLMs on the few-shot dataset ought/raft/twitter_complaints', "
                     "single A100 80GB (batch 8 and 64-token texts assumed from the PEFT seq2seq example scripts)";
  std::vector<Case> cases;
  {
    JobSetup s = setup(Method::full, Precision::fp32, 8, 64, Checkpointing::none);
    s.flash_attention = false;
    cases.push_back({"T0_3B full fine-tune, fp32 AdamW", 47.14, peft, t0_3b(), s});
  }
  {
    JobSetup s = setup(Method::lora, Precision::fp32, 8, 64, Checkpointing::none);
    s.flash_attention = false;
    s.lora_rank = 8;
    s.lora_targets = {"q", "v"};
    cases.push_back({"T0_3B LoRA r8 q,v, fp32 base", 14.4, peft, t0_3b(), s});
  }
  {
    JobSetup s = setup(Method::lora, Precision::fp32, 8, 64, Checkpointing::none);
    s.flash_attention = false;
    s.lora_rank = 8;
    s.lora_targets = {"q", "v"};
    cases.push_back({"bloomz-7b1 LoRA r8, fp32 base", 32, peft, bloom_7b1(), s});
  }
  const char* factory = "hiyouga/LLaMA-Factory README 'Hardware Requirement' table, 7B column (2023 revision, as kept in the fork "
                        "charlieUWUuwu/NTTU_meta_campus_chat README); batch 1, 1024 tokens, gradient checkpointing assumed";
  cases.push_back({"7B LoRA 16-bit (LLaMA-Factory)", 16, factory, llama2_7b(),
                   setup(Method::lora, Precision::bf16, 1, 1024, Checkpointing::full)});
  cases.push_back({"7B QLoRA 4-bit (LLaMA-Factory)", 6, factory, llama2_7b(),
                   setup(Method::qlora, Precision::bf16, 1, 1024, Checkpointing::full)});
  {
    JobSetup s = setup(Method::lora, Precision::bf16, 1, 8192, Checkpointing::full);
    s.sharding = Sharding::zero2;
    s.gpus = 8;
    s.lora_rank = 8;
    cases.push_back({"Llama-2-7B LoRA 8k ctx, ZeRO-2 x8", 25.7,
                     "LongLoRA (arXiv 2309.12307) Table 12 via huggingface.co/datasets/odyn-network/benchmark-finetune-lora-v1 "
                     "(shared/research/03 section 4.6); FlashAttention-2 and gradient checkpointing assumed",
                     llama2_7b(), s});
  }

  std::printf("\n%-40s %10s %10s %8s\n", "case", "published", "estimate", "error");
  for (const auto& c : cases) {
    auto e = estimate_memory(c.model, c.setup);
    ASSERT_TRUE(e) << c.name << ": " << e.error().message;
    const double est = e->total_bytes / (1024.0 * 1024 * 1024);
    const double error = (est - c.published_gb) / c.published_gb;
    std::printf("%-40s %8.2fGB %8.2fGB %+7.1f%%   source: %s\n", c.name, c.published_gb, est, error * 100, c.source);
    EXPECT_LT(std::abs(error), 0.5) << c.name;
  }
}

ModelSpec t5_small() {
  // t5-small config.json: 6 + 6 layers, d_model 512, 8 heads, d_ff 2048 (ReLU, two matrices),
  // vocab 32128, 60.5M parameters.
  ModelSpec m;
  m.key = "t5-small";
  m.name = "t5-small";
  m.architecture = Architecture::encoder_decoder;
  m.layers = 6;
  m.decoder_layers = 6;
  m.hidden = 512;
  m.heads = 8;
  m.kv_heads = 8;
  m.intermediate = 2048;
  m.vocab = 32128;
  m.gated_mlp = false;
  m.params = 60.5e6;
  m.encoder_seq = 64;
  m.decoder_seq = 64;
  return m;
}

// The model states on the GPU (weights, gradients, optimizer, ZeRO-3 gather buffer) against
// DeepSpeed's own estimator, estimate_zero3_model_states_mem_needs_all_live(t5-small, 1 GPU):
// "60M total params, 16M largest layer params", per GPU 0.06GB (offload_param and
// offload_optimizer cpu), 0.17GB (offload_optimizer cpu), 1.08GB (no offload), as printed in
// blog.csdn.net/u012327567/article/details/132278598. Within 25 %.
TEST(Validation, ModelStatesAgainstDeepSpeedsEstimator) {
  const char* source =
      "DeepSpeed estimate_zero3_model_states_mem_needs_all_live(t5-small), "
      "blog.csdn.net/u012327567/article/details/132278598";
  struct Row {
    Offload offload;
    double published_gb;
  };
  std::printf("\n%-40s %10s %10s %8s\n", "ZeRO-3, 1 GPU, model states", "DeepSpeed", "estimate", "error");
  for (const Row& row : {Row{Offload::all, 0.06}, Row{Offload::optimizer, 0.17}, Row{Offload::none, 1.08}}) {
    JobSetup s = setup(Method::full, Precision::mixed, 1, 64, Checkpointing::none);
    s.sharding = Sharding::zero3;
    s.offload = row.offload;
    auto e = estimate_memory(t5_small(), s);
    ASSERT_TRUE(e) << e.error().message;
    const double states = (e->item_bytes("weights") + e->item_bytes("gradients") +
                           e->item_bytes("optimizer") + e->item_bytes("gather")) /
                          (1024.0 * 1024 * 1024);
    const double error = (states - row.published_gb) / row.published_gb;
    std::printf("%-40s %8.2fGB %8.2fGB %+7.1f%%   source: %s\n",
                (std::string("offload ") + offload_name(row.offload)).c_str(), row.published_gb, states,
                error * 100, source);
    EXPECT_LT(std::abs(error), 0.25) << offload_name(row.offload);
  }
}

// The longest context that fits, as Unsloth published it for Llama 3.1 8B, 4-bit QLoRA on all
// linear layers, rank 32, batch 1, with Unsloth (offloaded checkpointing + Apple's Cut Cross
// Entropy) and with Hugging Face + FlashAttention 2 (gradient checkpointing): the estimate at each
// published length against the card's memory (read as GiB). Within 25 %.
TEST(Validation, LongestContextAgainstUnslothsTable) {
  const char* source =
      "unsloth.ai/blog/llama3-3 (Llama 3.1 8B max. context length; also the unslothai/unsloth README)";
  auto catalog = builtin_model_catalog();
  ASSERT_TRUE(catalog) << catalog.error().message;
  auto model = catalog->find("llama-3.1-8b");
  ASSERT_TRUE(model) << model.error().message;
  struct Row {
    Framework framework;
    int context;
    double vram_gb;
  };
  const Row rows[] = {
      {Framework::unsloth, 2'972, 8},    {Framework::unsloth, 21'848, 12},  {Framework::unsloth, 40'724, 16},
      {Framework::unsloth, 78'475, 24},  {Framework::unsloth, 153'977, 40}, {Framework::unsloth, 191'728, 48},
      {Framework::unsloth, 342'733, 80}, {Framework::hf, 932, 12},          {Framework::hf, 2'551, 16},
      {Framework::hf, 5'789, 24},        {Framework::hf, 12'264, 40},       {Framework::hf, 15'502, 48},
      {Framework::hf, 28'454, 80},
  };
  std::printf("\n%-40s %10s %10s %8s\n", "Llama 3.1 8B QLoRA r32, longest context", "card", "estimate",
              "error");
  for (const Row& row : rows) {
    JobSetup s = setup(Method::qlora, Precision::mixed, 1, row.context, Checkpointing::full);
    s.framework = row.framework;
    s.lora_rank = 32;
    s.lora_targets = {"q", "k", "v", "o", "gate", "up", "down"};
    auto e = estimate_memory(**model, s);
    ASSERT_TRUE(e) << e.error().message;
    const double gib = e->total_bytes / (1024.0 * 1024 * 1024);
    const double error = (gib - row.vram_gb) / row.vram_gb;
    const std::string name =
        std::string(framework_name(row.framework)) + " at " + std::to_string(row.context) + " tokens";
    std::printf("%-40s %8.0fGB %8.2fGB %+7.1f%%   source: %s\n", name.c_str(), row.vram_gb, gib, error * 100,
                source);
    EXPECT_LT(std::abs(error), 0.25) << name;
  }
}

TEST(Validation, OffloadIsRefusedWhereDeepSpeedCannotDoIt) {
  JobSetup s = setup(Method::full, Precision::mixed, 1, 64, Checkpointing::none);
  s.offload = Offload::optimizer;
  auto r = estimate_memory(t5_small(), s);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("--offload needs ZeRO or FSDP"), std::string::npos);
  s.sharding = Sharding::zero2;
  s.offload = Offload::all;
  EXPECT_FALSE(estimate_memory(t5_small(), s));
  s.offload = Offload::optimizer;
  auto zero2 = estimate_memory(t5_small(), s);
  ASSERT_TRUE(zero2);
  // ZeRO-Offload: the 16-bit weights stay (2 bytes/param), nothing else of the model states.
  EXPECT_DOUBLE_EQ(zero2->item_bytes("weights"), 2 * 60.5e6);
  EXPECT_DOUBLE_EQ(zero2->item_bytes("optimizer"), 0);
  s.method = Method::lora;
  EXPECT_FALSE(estimate_memory(t5_small(), s));
}

}  // namespace
}  // namespace gpuhost::plan
