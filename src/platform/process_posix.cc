#include <utility>

#include <limits.h>
#include <unistd.h>

#include "platform/launch_posix.h"
#include "platform/posix_util.h"
#include "platform/process.h"

namespace gpuhost::platform {

std::optional<std::string> find_executable(std::string_view name) {
  std::vector<std::string> found =
      launch::search_path(name, launch::current_path_value(), launch::Matches::first);
  if (found.empty()) return std::nullopt;
  return std::move(found.front());
}

std::vector<std::string> find_all_executables(std::string_view name) {
  return launch::search_path(name, launch::current_path_value(), launch::Matches::all);
}

long current_process_id() {
  return static_cast<long>(::getpid());
}

Result<std::string> current_executable_path() {
  std::string buffer(PATH_MAX, '\0');
  ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size());
  if (n < 0) return std::unexpected(posix_error("reading /proc/self/exe", errno));
  buffer.resize(static_cast<std::size_t>(n));
  return buffer;
}

}  // namespace gpuhost::platform
