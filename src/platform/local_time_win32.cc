#include <windows.h>

#include "platform/local_time.h"

namespace gpuhost::platform {

std::chrono::seconds local_utc_offset(std::chrono::system_clock::time_point when) {
  // FILETIME counts 100 ns ticks since 1601-01-01; the Unix epoch is 11644473600 s later.
  constexpr long long k_epoch_difference_s = 11644473600LL;
  long long seconds = std::chrono::duration_cast<std::chrono::seconds>(when.time_since_epoch()).count();
  ULARGE_INTEGER utc_ticks;
  utc_ticks.QuadPart = static_cast<ULONGLONG>(seconds + k_epoch_difference_s) * 10000000ULL;
  FILETIME utc_file{utc_ticks.LowPart, utc_ticks.HighPart};
  SYSTEMTIME utc, local;
  FILETIME local_file;
  // A null zone means the active one, with the daylight-saving rule in force at that date.
  if (!FileTimeToSystemTime(&utc_file, &utc) || !SystemTimeToTzSpecificLocalTime(nullptr, &utc, &local) ||
      !SystemTimeToFileTime(&local, &local_file))
    return std::chrono::seconds(0);
  ULARGE_INTEGER local_ticks;
  local_ticks.LowPart = local_file.dwLowDateTime;
  local_ticks.HighPart = local_file.dwHighDateTime;
  auto difference = static_cast<long long>(local_ticks.QuadPart) - static_cast<long long>(utc_ticks.QuadPart);
  return std::chrono::seconds(difference / 10000000LL);
}

}  // namespace gpuhost::platform
