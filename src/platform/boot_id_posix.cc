#include "base/strings.h"
#include "platform/boot_id.h"
#include "platform/files.h"

namespace gpuhost::platform {

Result<std::string> boot_id() {
  auto text = read_file("/proc/sys/kernel/random/boot_id", 256);
  if (!text) return std::unexpected(text.error());
  return std::string(trim(*text));
}

}  // namespace gpuhost::platform
