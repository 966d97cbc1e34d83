#include <time.h>

#include "platform/local_time.h"

namespace gpuhost::platform {

std::chrono::seconds local_utc_offset(std::chrono::system_clock::time_point when) {
  // localtime_r need not read TZ again (POSIX); tzset makes a changed TZ count.
  ::tzset();
  std::time_t t = std::chrono::system_clock::to_time_t(when);
  std::tm local{};
  if (::localtime_r(&t, &local) == nullptr) return std::chrono::seconds(0);
  return std::chrono::seconds(local.tm_gmtoff);
}

}  // namespace gpuhost::platform
