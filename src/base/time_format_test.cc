#include "base/time_format.h"

#include <gtest/gtest.h>

namespace gpuhost {
namespace {

TEST(TimeFormat, FormatsUtcSeconds) {
  // 1796069594 s after the epoch is 2026-11-30T20:13:14Z (date -u -d @1796069594).
  auto t = std::chrono::system_clock::time_point(std::chrono::seconds(1796069594));
  EXPECT_EQ(format_rfc3339_utc(t), "2026-11-30T20:13:14Z");
  EXPECT_EQ(format_rfc3339_utc(std::chrono::system_clock::time_point{}), "1970-01-01T00:00:00Z");
  EXPECT_EQ(format_rfc3339_utc_millis(t + std::chrono::milliseconds(7)), "2026-11-30T20:13:14.007Z");
  EXPECT_EQ(format_rfc3339_utc_millis(std::chrono::system_clock::time_point{}), "1970-01-01T00:00:00.000Z");
}

}  // namespace
}  // namespace gpuhost
