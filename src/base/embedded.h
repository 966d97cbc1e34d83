#pragma once

#include <span>
#include <string_view>

namespace gpuhost {

// A file compiled into the binary by cmake/Embed.cmake. `bytes` points at static storage.
struct EmbeddedFile {
  std::string_view name;
  std::string_view bytes;
};

}  // namespace gpuhost
