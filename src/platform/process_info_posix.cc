#include <string>

#include "platform/posix_util.h"
#include "platform/process_info.h"

namespace gpuhost::platform {

std::optional<std::string> process_name(unsigned pid) {
  if (pid == 0) return std::nullopt;
  const std::string path = "/proc/" + std::to_string(pid) + "/comm";
  std::string name = read_text_file_or_empty(path.c_str());
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  if (name.empty()) return std::nullopt;
  return name;
}

}  // namespace gpuhost::platform
