#pragma once
// Test-only: the torch-free DCP fixtures of tests/fixtures/dcp (made by make_dcp_fixtures.py),
// compiled into supervise_test, and a way to lay one out as a checkpoint folder.

#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "base/embedded.h"
#include "supervise/checkpoint_fixtures.h"

namespace gpuhost::supervise::dcp_fixtures {

[[nodiscard]] std::span<const EmbeddedFile> embedded_files();
[[nodiscard]] const EmbeddedFile* find_embedded(std::string_view name);

inline std::string_view bytes(std::string_view name) {
  const EmbeddedFile* f = find_embedded(name);
  if (f == nullptr) throw std::runtime_error("no DCP fixture " + std::string(name));
  return f->bytes;
}

// Writes every file of fixture `set` ("two_ranks": two_ranks.metadata, two_ranks__0_0.distcp, ...)
// into `folder` under its DCP name (".metadata", "__0_0.distcp", "__0.metadata").
inline void lay_out(std::string_view set, const std::filesystem::path& folder) {
  std::filesystem::create_directories(folder);
  for (const EmbeddedFile& f : embedded_files()) {
    if (f.name.substr(0, set.size()) != set) continue;
    const std::string_view rest = f.name.substr(set.size());
    if (rest.empty() || (rest[0] != '.' && rest.substr(0, 2) != "__")) continue;
    fixtures::write_bytes(folder / std::string(rest), std::string(f.bytes));
  }
}

}  // namespace gpuhost::supervise::dcp_fixtures
