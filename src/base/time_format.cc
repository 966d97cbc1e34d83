#include "base/time_format.h"

#include <cstdio>

namespace gpuhost {

std::string format_rfc3339_utc(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  auto secs = floor<seconds>(t);
  auto days = floor<std::chrono::days>(secs);
  year_month_day ymd{days};
  hh_mm_ss<seconds> hms{secs - days};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02ld:%02ld:%02ldZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<long>(hms.hours().count()), static_cast<long>(hms.minutes().count()),
                static_cast<long>(hms.seconds().count()));
  return buf;
}

}  // namespace gpuhost
