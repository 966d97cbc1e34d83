#pragma once

// Shared by the knowledge tests.

#include <cstdio>
#include <cstdlib>

#include "knowledge/knowledge.h"

namespace gpuhost::knowledge::testing {

// The embedded data, loaded once. Aborts the test binary when it does not load: every test
// depends on it, and KnowledgeLoader.EmbeddedDataLoads says why.
inline const Knowledge& embedded() {
  static const Knowledge knowledge = [] {
    auto loaded = load_knowledge();
    if (!loaded) {
      std::fprintf(stderr, "embedded knowledge does not load: %s\n", loaded.error().message.c_str());
      std::abort();
    }
    return std::move(*loaded);
  }();
  return knowledge;
}

inline Version v(std::string_view text) {
  return *Version::parse(text);
}
inline ComputeCapability cc(std::string_view text) {
  return *ComputeCapability::parse(text);
}

}  // namespace gpuhost::knowledge::testing
