#include "plan/flops.h"

#include <gtest/gtest.h>

#include "plan/test_models.h"

namespace gpuhost::plan {
namespace {

TEST(TrainingFlops, Llama3_8bAt8192TokensByHand) {
  // N = 8,030,261,248 - the input embedding 128,256 x 4,096 (525,336,576) = 7,504,924,672;
  // 6N = 45,029,548,032; 12·L·H·Q·T = 12 x 32 x 32 x 128 x 8192 = 12,884,901,888.
  auto flops = training_flops_per_token(testing::llama3_8b(), 8192);
  ASSERT_TRUE(flops) << flops.error().message;
  EXPECT_DOUBLE_EQ(flops->matmul_params, 7'504'924'672.0);
  EXPECT_DOUBLE_EQ(flops->attention, 12'884'901'888.0);
  EXPECT_DOUBLE_EQ(flops->per_token, 57'914'449'920.0);
}

TEST(TrainingFlops, TiedEmbeddingsCountOnceAsTheOutputHead) {
  ModelSpec m = testing::llama3_8b();
  m.params = 1'000'000'000;
  m.tied_embeddings = true;
  auto tied = training_flops_per_token(m, 1);
  m.tied_embeddings = false;
  auto untied = training_flops_per_token(m, 1);
  ASSERT_TRUE(tied && untied);
  EXPECT_DOUBLE_EQ(tied->matmul_params, 1e9);
  EXPECT_DOUBLE_EQ(untied->matmul_params, 1e9 - 128256.0 * 4096);
}

TEST(TrainingFlops, RefusesWhatTheFormulaDoesNotDescribe) {
  ModelSpec vision = testing::llama3_8b();
  vision.architecture = Architecture::calibrated;
  auto r = training_flops_per_token(vision, 1);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::unsupported);
  EXPECT_NE(r.error().message.find("have the trainer print its own mfu"), std::string::npos);
  ModelSpec whisper = testing::llama3_8b();
  whisper.architecture = Architecture::encoder_decoder;
  EXPECT_FALSE(training_flops_per_token(whisper, 448));
  EXPECT_EQ(training_flops_per_token(testing::llama3_8b(), 0).error().code, ErrorCode::invalid_argument);
}

}  // namespace
}  // namespace gpuhost::plan
