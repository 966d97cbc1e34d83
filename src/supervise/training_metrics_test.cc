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

}  // namespace
}  // namespace gpuhost::supervise
