#pragma once
// Files under src/setup/ compiled into the binary (see CMakeLists.txt: verify.py).

#include <span>
#include <string_view>

#include "base/embedded.h"

namespace gpuhost::setup::assets {

[[nodiscard]] std::span<const EmbeddedFile> embedded_files();
[[nodiscard]] const EmbeddedFile* find_embedded(std::string_view name);

}  // namespace gpuhost::setup::assets
