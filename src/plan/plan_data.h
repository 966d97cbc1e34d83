#pragma once

// Internal to plan/: the data files compiled in by gpuhost_embed (plan_data.cc):
// models.json, instances.json.

#include <span>
#include <string_view>

#include "base/embedded.h"

namespace gpuhost::plan::data {

std::span<const gpuhost::EmbeddedFile> embedded_files();
const gpuhost::EmbeddedFile* find_embedded(std::string_view name);

}  // namespace gpuhost::plan::data
