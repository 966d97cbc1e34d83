#include "base/time_format.h"

#include <cstdio>

namespace gpuhost {

namespace {

enum class Fraction { none, milliseconds };

std::string format_utc(std::chrono::system_clock::time_point t, Fraction fraction) {
  using namespace std::chrono;
  auto ms = floor<milliseconds>(t);
  auto days = floor<std::chrono::days>(ms);
  year_month_day ymd{days};
  hh_mm_ss<milliseconds> hms{ms - days};
  char buf[40];
  int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02ld:%02ld:%02ld", static_cast<int>(ymd.year()),
                        static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                        static_cast<long>(hms.hours().count()), static_cast<long>(hms.minutes().count()),
                        static_cast<long>(hms.seconds().count()));
  if (fraction == Fraction::milliseconds && n > 0 && static_cast<std::size_t>(n) < sizeof buf)
    std::snprintf(buf + n, sizeof buf - static_cast<std::size_t>(n), ".%03ld",
                  static_cast<long>(hms.subseconds().count()));
  return std::string(buf) + "Z";
}

}  // namespace

std::string format_rfc3339_utc(std::chrono::system_clock::time_point t) { return format_utc(t, Fraction::none); }

std::string format_rfc3339_utc_millis(std::chrono::system_clock::time_point t) {
  return format_utc(t, Fraction::milliseconds);
}

}  // namespace gpuhost
