#include "platform/local_time.h"

#include <gtest/gtest.h>

#include "platform/environment.h"

namespace gpuhost::platform {
namespace {

using namespace std::chrono_literals;

TEST(LocalTime, OffsetIsAWholeTimeZone) {
  // Every time zone in use is within UTC-12..UTC+14 and a multiple of 15 minutes.
  auto offset = local_utc_offset(std::chrono::system_clock::now());
  EXPECT_GE(offset, -12h);
  EXPECT_LE(offset, 14h);
  EXPECT_EQ(offset.count() % (15 * 60), 0) << offset.count();
}

#ifndef _WIN32
// Windows takes its zone from the system settings, not TZ; POSIX lets a test pin it.
TEST(LocalTime, FollowsTzOnPosix) {
  auto saved = get_env("TZ");
  set_env("TZ", "CST-8");  // POSIX TZ syntax: the sign is inverted, this is UTC+8 (Tencent's example)
  auto china = local_utc_offset(std::chrono::system_clock::now());
  set_env("TZ", "EST5EDT,M3.2.0,M11.1.0");
  // 2024-01-15 and 2024-07-15, 12:00 UTC: winter and summer in New York.
  auto winter = local_utc_offset(std::chrono::system_clock::time_point(std::chrono::seconds(1705320000)));
  auto summer = local_utc_offset(std::chrono::system_clock::time_point(std::chrono::seconds(1721044800)));
  if (saved)
    set_env("TZ", *saved);
  else
    unset_env("TZ");
  EXPECT_EQ(china, 8h);
  EXPECT_EQ(winter, -5h);
  EXPECT_EQ(summer, -4h);
}
#endif

}  // namespace
}  // namespace gpuhost::platform
