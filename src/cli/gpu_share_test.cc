#include "cli/gpu_share.h"

#include <gtest/gtest.h>

namespace gpuhost::cli {
namespace {

TEST(ParseGpuShare, ReadsTheModesAndSettings) {
  auto time = parse_gpu_share("time", false);
  ASSERT_TRUE(time);
  EXPECT_EQ(time->mode, GpuShare::Mode::time);
  auto plain = parse_gpu_share("mps", false);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->mode, GpuShare::Mode::mps);
  EXPECT_FALSE(plain->thread_percent);
  EXPECT_TRUE(plain->memory_limit.empty());
  auto full = parse_gpu_share("mps:threads=50,mem=20G", false);
  ASSERT_TRUE(full);
  EXPECT_EQ(full->thread_percent, 50);
  EXPECT_EQ(full->memory_limit, "20G");
  EXPECT_EQ(parse_gpu_share("mps:mem=512M", false)->memory_limit, "512M");
}

TEST(ParseGpuShare, RefusesWhatMpsCannotTake) {
  for (const char* bad : {"mps:threads=0", "mps:threads=101", "mps:threads=x", "mps:mem=20", "mps:mem=G",
                          "mps:mem=-1G", "mps:speed=2", "mps:", "slices", ""}) {
    auto r = parse_gpu_share(bad, false);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_NE(r.error().message.find("use time, mps, or mps:threads=PCT,mem=SIZE"), std::string::npos)
          << bad;
    }
  }
  auto windows = parse_gpu_share("mps", true);
  ASSERT_FALSE(windows);
  EXPECT_NE(windows.error().message.find("Hyper-V GPU-P"), std::string::npos);
  EXPECT_TRUE(parse_gpu_share("time", true));
}

TEST(GpuShareWarnings, NameWhatIsNotIsolated) {
  GpuShare share;
  EXPECT_NE(gpu_share_warnings(share).at(0).find("no memory or fault isolation"), std::string::npos);
  share.mode = GpuShare::Mode::mps;
  EXPECT_NE(gpu_share_warnings(share).at(0).find("one fault domain"), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::cli
