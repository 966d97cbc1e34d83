#include "supervise/training_metrics.h"

#include <limits>

#include <gtest/gtest.h>

namespace gpuhost::supervise {
namespace {

// The MFU figures trainers print or log, in percent; other points are not MFU.
TEST(MfuPercentOf, ReadsTheFormsTrainersUse) {
  EXPECT_EQ(mfu_percent_of("mfu_percent", 35.21), 35.21);  // nanoGPT "mfu 35.21%", torchtitan "mfu: 35.21%"
  EXPECT_EQ(mfu_percent_of("train/mfu", 0.42), 42);        // Lightning's ThroughputMonitor: a fraction
  EXPECT_EQ(mfu_percent_of("MFU", 38.0), 38.0);            // a percent without the sign
  EXPECT_EQ(mfu_percent_of("model_mfu_percent", 12.5), 12.5);
  EXPECT_FALSE(mfu_percent_of("mfu_percent", 180));  // not a share of the peak
  EXPECT_FALSE(mfu_percent_of("mfu", -1));
  EXPECT_FALSE(mfu_percent_of("mfu", std::numeric_limits<double>::quiet_NaN()));
  EXPECT_FALSE(mfu_percent_of("loss", 0.5));
  EXPECT_FALSE(mfu_percent_of("mfu_target", 0.5));
}

// Token throughput as trainers print or log it; per device when the name says so.
TEST(TokenRateOf, ReadsTheFormsTrainersUse) {
  EXPECT_EQ(token_rate_of("tokens_per_sec", 2000)->tokens_per_second, 2000);
  EXPECT_EQ(token_rate_of("train/tokens_per_second", 10)->tokens_per_second, 10);
  EXPECT_EQ(token_rate_of("tok/s", 7)->tokens_per_second, 7);
  EXPECT_EQ(token_rate_of("train_tok/s", 7)->tokens_per_second, 7);
  EXPECT_EQ(token_rate_of("train_tokens_per_second", 5)->tokens_per_second, 5);  // HF's summary
  EXPECT_FALSE(token_rate_of("tokens_per_sec", 2000)->per_device);
  EXPECT_TRUE(token_rate_of("train/device/tokens_per_sec", 300)->per_device);
  EXPECT_FALSE(token_rate_of("tokens_per_sec", 0));
  EXPECT_FALSE(token_rate_of("tokens_per_sec", std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(token_rate_of("samples_per_sec", 40));
  EXPECT_FALSE(token_rate_of("tokens", 4096));
  EXPECT_FALSE(token_rate_of("mytokens_per_sec", 1));  // not a word of its own
}

}  // namespace
}  // namespace gpuhost::supervise
