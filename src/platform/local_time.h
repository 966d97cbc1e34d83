#pragma once

#include <chrono>

namespace gpuhost::platform {

// How far the host's local time zone is ahead of UTC at `when` (UTC+8 → +28800 s, daylight
// saving included), from the OS's time zone setting: TZ / /etc/localtime on POSIX, the active
// time zone on Windows. Zero when the OS cannot say. Thread-safe.
[[nodiscard]] std::chrono::seconds local_utc_offset(std::chrono::system_clock::time_point when);

}  // namespace gpuhost::platform
