#include "base/version.h"

#include <gtest/gtest.h>

namespace gpuhost {
namespace {

TEST(Version, ComparesDriverVersionsNumerically) {
  auto a = Version::parse("535.104.05");
  auto b = Version::parse("535.86.10");
  ASSERT_TRUE(a && b);
  EXPECT_GT(*a, *b);
  EXPECT_EQ(a->str(), "535.104.05");
}

TEST(Version, MissingComponentsAreZeroAndLocalPartIgnored) {
  EXPECT_EQ(*Version::parse("12.4"), *Version::parse("12.4.0"));
  auto torch = Version::parse("2.1.0+cu121");
  ASSERT_TRUE(torch);
  EXPECT_EQ(torch->str(), "2.1.0");
  EXPECT_EQ(torch->minor(), 1);
}

TEST(Version, RejectsNonVersions) {
  EXPECT_FALSE(Version::parse("None"));
  EXPECT_FALSE(Version::parse(""));
  EXPECT_EQ(Version::parse("v1.2")->major(), 1);
}

}  // namespace
}  // namespace gpuhost
