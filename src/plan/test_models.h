#pragma once
// Shapes shared by the plan tests.

#include "plan/memory.h"
#include "plan/model.h"

namespace gpuhost::plan::testing {

// Llama 3 8B as in meta-llama/Meta-Llama-3-8B config.json.
inline ModelSpec llama3_8b() {
  ModelSpec m;
  m.key = "llama-3-8b";
  m.name = "Llama 3 8B";
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 8;
  m.intermediate = 14336;
  m.vocab = 128256;
  m.gated_mlp = true;
  m.params = 0;  // counted from the shape
  return m;
}

// A tiny decoder for hand-worked activation examples.
inline ModelSpec tiny(int layers = 2, int hidden = 1024, int heads = 16, int vocab = 1000) {
  ModelSpec m;
  m.key = "tiny";
  m.name = "tiny";
  m.layers = layers;
  m.hidden = hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.intermediate = 4 * hidden;
  m.vocab = vocab;
  m.gated_mlp = false;
  return m;
}

// A setup with no context or headroom, so the items add up to the formulas alone.
inline JobSetup bare() {
  JobSetup s;
  s.context_bytes = 0;
  s.headroom = 0;
  return s;
}

}  // namespace gpuhost::plan::testing
