#pragma once

#include <filesystem>

#include "cli/args.h"
#include "supervise/job.h"

namespace gpuhost::cli {

// The jobs folder a command works on: --jobs-dir when given, else this user's default
// (job::jobs_root). One place, so every command that takes --jobs-dir agrees.
[[nodiscard]] inline std::filesystem::path jobs_root_from(const ParsedArgs& parsed) {
  if (auto dir = parsed.value("--jobs-dir")) return std::filesystem::path(*dir);
  return job::jobs_root();
}

}  // namespace gpuhost::cli
