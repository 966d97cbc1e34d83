#pragma once

// Internal to knowledge/: the data files compiled in by gpuhost_embed (knowledge_data.cc).

#include <span>
#include <string_view>

#include "base/embedded.h"

namespace gpuhost::knowledge::data {

std::span<const gpuhost::EmbeddedFile> embedded_files();
const gpuhost::EmbeddedFile* find_embedded(std::string_view name);

}  // namespace gpuhost::knowledge::data
