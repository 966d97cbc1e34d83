#pragma once

#include <chrono>
#include <string>

namespace gpuhost {

// "2026-11-30T20:13:14Z" for a point in time (UTC, whole seconds). Pure: no time zone database.
[[nodiscard]] std::string format_rfc3339_utc(std::chrono::system_clock::time_point t);

// "2026-11-30T20:13:14.123Z": the same with milliseconds (truncated).
[[nodiscard]] std::string format_rfc3339_utc_millis(std::chrono::system_clock::time_point t);

// Seconds since the Unix epoch, with fractions: the time axis of metrics and dashboards.
[[nodiscard]] inline double unix_seconds(
    std::chrono::system_clock::time_point t = std::chrono::system_clock::now()) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace gpuhost
