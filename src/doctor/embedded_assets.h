#pragma once
// Files under src/doctor/ compiled into the binary (see CMakeLists.txt: python_probe.py).

#include <span>
#include <string_view>

#include "base/embedded.h"

namespace gpuhost::doctor::assets {

[[nodiscard]] std::span<const EmbeddedFile> embedded_files();
[[nodiscard]] const EmbeddedFile* find_embedded(std::string_view name);

}  // namespace gpuhost::doctor::assets
