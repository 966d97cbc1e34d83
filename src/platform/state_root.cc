#include "platform/state_root.h"

#include <string>
#include <string_view>

#include "platform/environment.h"
#include "platform/system_info.h"

namespace gpuhost::platform {

namespace {

std::filesystem::path from_utf8(std::string_view text) {
  return std::filesystem::path(std::u8string(text.begin(), text.end()));
}

}  // namespace

std::filesystem::path state_root() {
  if (auto home = get_env("GPUHOST_HOME"); home && !home->empty()) return from_utf8(*home);
  if (current_os() == OsFamily::windows) {
    if (auto local = get_env("LOCALAPPDATA"); local && !local->empty()) return from_utf8(*local) / "gpuhost";
    if (auto profile = get_env("USERPROFILE"); profile && !profile->empty())
      return from_utf8(*profile) / "AppData" / "Local" / "gpuhost";
  } else {
    // XDG Base Directory Specification 0.8: a relative $XDG_STATE_HOME is invalid and ignored.
    if (auto state = get_env("XDG_STATE_HOME"); state && !state->empty() && state->front() == '/')
      return from_utf8(*state) / "gpuhost";
    if (auto home = get_env("HOME"); home && !home->empty())
      return from_utf8(*home) / ".local" / "state" / "gpuhost";
  }
  return std::filesystem::path(".gpuhost");
}

}  // namespace gpuhost::platform
