#include "plan/memory.h"

#include <gtest/gtest.h>

#include "plan/test_models.h"

namespace gpuhost::plan {
namespace {

using testing::bare;
using testing::llama3_8b;
using testing::tiny;

TEST(ModelShape, CountsLlama3_8bParametersFromItsConfig) {
  // Per layer: attention q,o 4096x4096 x2 = 33,554,432; k,v 4096x(8x128) x2 = 8,388,608;
  // SwiGLU MLP 3 x 4096 x 14336 = 176,160,768; two RMSNorms 8,192 -> 218,112,000 x 32 layers
  // = 6,979,584,000. Untied embeddings + head 2 x 128256 x 4096 = 1,050,673,152; final norm 4,096.
  // Total 8,030,261,248 (the published Llama 3 8B count).
  EXPECT_DOUBLE_EQ(llama3_8b().shape_params(), 8'030'261'248.0);
}

TEST(ModelShape, RejectsHeadsThatDoNotDivideHidden) {
  auto m = tiny(2, 1000, 16);
  auto r = validate_shape(m);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("do not divide hidden size 1000"), std::string::npos);
  m = tiny();
  m.kv_heads = 5;
  EXPECT_FALSE(validate_shape(m));
}

TEST(Memory, MixedPrecisionAdamWIs16BytesPerParameter) {
  // bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam m 4 + v 4 = 16 bytes/param.
  auto m = tiny();
  m.params = 1e9;
  auto s = bare();
  s.precision = Precision::mixed;
  auto e = estimate_memory(m, s);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_DOUBLE_EQ(e->item_bytes("weights"), 2e9);
  EXPECT_DOUBLE_EQ(e->item_bytes("gradients"), 2e9);
  EXPECT_DOUBLE_EQ(e->item_bytes("optimizer"), 12e9);
}

TEST(Memory, Fp32AdamWIs16AndPureBf16Is8BytesPerParameter) {
  auto m = tiny();
  m.params = 1e9;
  auto s = bare();
  s.precision = Precision::fp32;  // 4 + 4 + 8
  auto e = estimate_memory(m, s);
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->item_bytes("weights") + e->item_bytes("gradients") + e->item_bytes("optimizer"), 16e9);
  s.precision = Precision::bf16;  // 2 + 2 + 4 (bf16 m, v)
  e = estimate_memory(m, s);
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->item_bytes("weights") + e->item_bytes("gradients") + e->item_bytes("optimizer"), 8e9);
  s.precision = Precision::mixed;  // 8-bit Adam: 2 + 2 + (4 master + 2) = 10
  s.optimizer = Optimizer::adamw_8bit;
  e = estimate_memory(m, s);
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->item_bytes("weights") + e->item_bytes("gradients") + e->item_bytes("optimizer"), 10e9);
}

TEST(Memory, ZeroStagesShardStatesAcrossGpus) {
  // ZeRO paper (arXiv 1910.02054), mixed precision, K = 12, N = 4, P = 1e9:
  // stage 1: 2P + 2P + 12P/4 = 7e9; stage 2: 2P + 14P/4 = 5.5e9; stage 3: 16P/4 = 4e9 plus the
  // gathered-layer buffer 4 x largest layer (vocab 1000 x 1024 < block 12.6M params).
  auto m = tiny();
  m.params = 1e9;
  auto s = bare();
  s.gpus = 4;
  auto states = [&](Sharding sh) {
    s.sharding = sh;
    auto e = estimate_memory(m, s);
    EXPECT_TRUE(e);
    return e->item_bytes("weights") + e->item_bytes("gradients") + e->item_bytes("optimizer") + e->item_bytes("gather");
  };
  EXPECT_DOUBLE_EQ(states(Sharding::none), 16e9);
  EXPECT_DOUBLE_EQ(states(Sharding::zero1), 7e9);
  EXPECT_DOUBLE_EQ(states(Sharding::zero2), 5.5e9);
  // Largest layer: one block = 4h^2 (attention) + 2 x h x 4h (MLP) = 12 x 1024^2 = 12,582,912.
  EXPECT_DOUBLE_EQ(states(Sharding::zero3), 4e9 + 4 * 12'582'912.0);
}

TEST(Memory, ActivationsFollowKorthikantiEquationOne) {
  // L=2, h=1024, a=16, s=512, b=2. Per layer s*b*h*(34 + 5*a*s/h) = 1,048,576 x (34 + 40)
  // = 77,594,624 bytes; two layers 155,189,248.
  auto m = tiny();
  auto s = bare();
  s.seq = 512;
  s.batch = 2;
  s.flash_attention = false;
  auto e = estimate_memory(m, s);
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->item_bytes("activations"), 155'189'248.0);
  // FlashAttention drops the 5as/h score term: 2 x 1,048,576 x 34 = 71,303,168.
  s.flash_attention = true;
  e = estimate_memory(m, s);
  EXPECT_DOUBLE_EQ(e->item_bytes("activations"), 71'303'168.0);
  // Selective recomputation gives the same 34*s*b*h without FlashAttention.
  s.flash_attention = false;
  s.checkpointing = Checkpointing::selective;
  e = estimate_memory(m, s);
  EXPECT_DOUBLE_EQ(e->item_bytes("activations"), 71'303'168.0);
  // Full checkpointing: 2 layers x 2*s*b*h (4,194,304) + one layer recomputed with FA (35,651,584).
  s.flash_attention = true;
  s.checkpointing = Checkpointing::full;
  e = estimate_memory(m, s);
  EXPECT_DOUBLE_EQ(e->item_bytes("activations"), 4'194'304.0 + 35'651'584.0);
  // Logits at the loss's backward: b x s x V x 12 bytes = 2 x 512 x 1000 x 12.
  EXPECT_DOUBLE_EQ(e->item_bytes("logits"), 12'288'000.0);
}

TEST(Memory, GradientAccumulationDoesNotChangePeakMemory) {
  auto m = tiny();
  auto s = bare();
  auto one = estimate_memory(m, s);
  s.grad_accum = 8;
  auto eight = estimate_memory(m, s);
  ASSERT_TRUE(one && eight);
  EXPECT_DOUBLE_EQ(one->total_bytes, eight->total_bytes);
}

TEST(Memory, LoraCountsAdaptersLikePeft) {
  // Rank 16 on q,k,v,o of Llama 3 8B: q 16x(4096+4096) = 131,072; k, v 16x(4096+1024) = 81,920
  // each; o 131,072 -> 425,984 per layer x 32 = 13,631,488 (what PEFT prints as trainable params).
  auto s = bare();
  s.method = Method::lora;
  auto e = estimate_memory(llama3_8b(), s);
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_DOUBLE_EQ(e->trainable_params, 13'631'488.0);
  // Adapter states: 16 bytes each (fp32 weight 4 + grad 4 + AdamW 8).
  EXPECT_DOUBLE_EQ(e->item_bytes("adapters"), 13'631'488.0 * 16);
  // Frozen base in bf16: 2 bytes x 8,030,261,248.
  EXPECT_DOUBLE_EQ(e->item_bytes("weights"), 2 * 8'030'261'248.0);
}

TEST(Memory, QloraStoresBlockWeightsInNf4WithDoubleQuantisedConstants) {
  // Block linear params of Llama 3 8B: 32 x (41,943,040 + 176,160,768) = 6,979,321,856.
  // NF4 with double quantisation: 4 + 8/64 + 32/(64*256) = 4.126953125 bits/param.
  // Rest (embeddings, head, norms) 8,030,261,248 - 6,979,321,856 = 1,050,939,392 x 2 bytes.
  auto s = bare();
  s.method = Method::qlora;
  auto e = estimate_memory(llama3_8b(), s);
  ASSERT_TRUE(e);
  EXPECT_NEAR(e->item_bytes("weights"), 6'979'321'856.0 * 4.126953125 / 8 + 1'050'939'392.0 * 2, 1);
  s.double_quant = false;  // 4 + 32/64 = 4.5 bits/param
  e = estimate_memory(llama3_8b(), s);
  EXPECT_NEAR(e->item_bytes("weights"), 6'979'321'856.0 * 4.5 / 8 + 1'050'939'392.0 * 2, 1);
}

TEST(Memory, KvCacheOfLlama3_8bIs128KiBPerToken) {
  // 2 (K,V) x 32 layers x 8 kv heads x 128 head dim x 2 bytes = 131,072 bytes per token;
  // 1,024 tokens x batch 1 = 128 MiB.
  auto s = bare();
  s.method = Method::inference;
  s.seq = 1024;
  auto e = estimate_memory(llama3_8b(), s);
  ASSERT_TRUE(e);
  EXPECT_DOUBLE_EQ(e->item_bytes("kv_cache"), 131'072.0 * 1024);
  EXPECT_DOUBLE_EQ(e->item_bytes("weights"), 2 * 8'030'261'248.0);
}

TEST(Memory, HeadroomIsAShareOfTheTensorsAndContextIsAdded) {
  auto m = tiny();
  m.params = 1e9;
  auto s = bare();
  auto base = estimate_memory(m, s);
  s.headroom = 0.10;
  s.context_bytes = 1e9;
  auto with = estimate_memory(m, s);
  ASSERT_TRUE(base && with);
  EXPECT_DOUBLE_EQ(with->total_bytes, base->total_bytes * 1.10 + 1e9);
}

TEST(Memory, RejectsZeroBatchAndUnknownLoraTargets) {
  auto s = bare();
  s.batch = 0;
  auto e = estimate_memory(tiny(), s);
  ASSERT_FALSE(e);
  EXPECT_EQ(e.error().code, ErrorCode::invalid_argument);
  s = bare();
  s.method = Method::lora;
  s.lora_targets = {"q", "qkv"};
  e = estimate_memory(tiny(), s);
  ASSERT_FALSE(e);
  EXPECT_NE(e.error().message.find("unknown LoRA target 'qkv'"), std::string::npos);
}

TEST(Memory, LargestBatchAndSequenceAreTheLastThatFit) {
  auto m = tiny();
  auto s = bare();
  s.seq = 512;
  auto at = [&](int b) {
    s.batch = b;
    return estimate_memory(m, s)->total_bytes;
  };
  double memory = (at(37) + at(38)) / 2;  // 37 fits, 38 does not
  auto best = largest_batch(m, s, memory);
  ASSERT_TRUE(best && *best);
  EXPECT_EQ(**best, 37);
  auto none = largest_batch(m, s, 1.0);
  ASSERT_TRUE(none);
  EXPECT_FALSE(*none);
  s.batch = 1;
  auto seq = largest_seq(m, s, memory);
  ASSERT_TRUE(seq && *seq);
  s.seq = **seq;
  EXPECT_LE(estimate_memory(m, s)->total_bytes, memory);
  s.seq = **seq + 1;
  EXPECT_GT(estimate_memory(m, s)->total_bytes, memory);
}

TEST(Memory, CalibratedPresetScalesTheMeasurementByBatchAndArea) {
  // Measured 2.8 GiB at batch 8, 704 px -> 0.35 GiB per image; at 640 px x (640/704)^2, batch 16.
  ModelSpec m;
  m.key = "yolo";
  m.name = "yolo";
  m.architecture = Architecture::calibrated;
  m.params = 3.2e6;
  m.default_input = 640;
  m.calibration = Calibration{2.8, 8, 704, 1.0, "test"};
  auto s = bare();
  s.batch = 16;
  auto e = estimate_memory(m, s);
  ASSERT_TRUE(e);
  const double gib = 1024.0 * 1024 * 1024;
  EXPECT_NEAR(e->item_bytes("activations"), 2.8 * gib / 8 * (640.0 / 704) * (640.0 / 704) * 16, 1);
  EXPECT_EQ(e->basis, "calibrated");
  m.calibration.reset();
  e = estimate_memory(m, s);
  EXPECT_EQ(e->basis, "incomplete");
}

}  // namespace
}  // namespace gpuhost::plan
