// For tests: the knowledge embedded in the binary, loaded once per test program.
#pragma once

#include "knowledge/knowledge.h"

namespace gpuhost::knowledge::testing {

inline const Knowledge& embedded_knowledge() {
  static const Knowledge k = *load_knowledge();
  return k;
}

}  // namespace gpuhost::knowledge::testing
