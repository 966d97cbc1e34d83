#pragma once
// The dashboard page compiled into the binary (src/telemetry/CMakeLists.txt): web/src/index.html,
// dashboard.js, dashboard.css, and uPlot's uPlot.iife.min.js and uPlot.min.css from
// web/node_modules (npm package `uplot`, pinned by web/package-lock.json).

#include <span>
#include <string_view>

#include "base/embedded.h"

namespace gpuhost::telemetry::assets {

[[nodiscard]] std::span<const EmbeddedFile> embedded_files();
[[nodiscard]] const EmbeddedFile* find_embedded(std::string_view name);

}  // namespace gpuhost::telemetry::assets
