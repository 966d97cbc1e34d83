#pragma once
// Files under src/cli/ compiled into the binary (see CMakeLists.txt: memory_fraction_sitecustomize.py).

#include <span>
#include <string_view>

#include "base/embedded.h"

namespace gpuhost::cli::assets {

[[nodiscard]] std::span<const EmbeddedFile> embedded_files();
[[nodiscard]] const EmbeddedFile* find_embedded(std::string_view name);

}  // namespace gpuhost::cli::assets
