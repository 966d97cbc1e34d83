#include "platform/environment.h"
#include "platform/launch_win32.h"
#include "platform/process.h"
#include "platform/win32_util.h"

namespace gpuhost::platform {

std::optional<std::string> find_executable(std::string_view name) {
  std::vector<std::string> found =
      launch::search_path(name, get_env("PATH").value_or(""), launch::Matches::first);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<std::string> find_all_executables(std::string_view name) {
  return launch::search_path(name, get_env("PATH").value_or(""), launch::Matches::all);
}

long current_process_id() {
  return static_cast<long>(GetCurrentProcessId());
}

Result<std::string> current_executable_path() {
  std::wstring buffer(MAX_PATH, L'\0');
  for (;;) {
    DWORD n = GetModuleFileNameW(nullptr, buffer.data(), static_cast<DWORD>(buffer.size()));
    if (n == 0) return std::unexpected(win32_error("finding this program's path", GetLastError()));
    if (n < buffer.size()) {
      buffer.resize(n);
      return to_utf8(buffer);
    }
    buffer.resize(buffer.size() * 2);
  }
}

}  // namespace gpuhost::platform
