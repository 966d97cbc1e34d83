#include "plan/model.h"

#include <cmath>

#include <gtest/gtest.h>

namespace gpuhost::plan {
namespace {

const ModelCatalog& catalog() {
  static const ModelCatalog c = *builtin_model_catalog();
  return c;
}

// Every transformer of the catalog: the parameter count it states and the one its shape gives
// agree within 2 % (the shape leaves out biases and QK norms), so a mistyped field shows.
TEST(ModelCatalog, StatedParameterCountsMatchTheShapes) {
  for (const auto& m : catalog().models) {
    if (m.architecture != Architecture::decoder) continue;
    SCOPED_TRACE(m.key);
    EXPECT_LT(std::abs(m.shape_params() / m.params - 1), 0.02) << m.shape_params() << " vs " << m.params;
  }
}

TEST(ModelCatalog, FindsHuggingFaceIdsByTheirRepositoryName) {
  for (const auto& [id, key] : {std::pair{"meta-llama/Meta-Llama-3-8B", "llama-3-8b"},
                                {"Qwen/Qwen3-8B", "qwen3-8b"},
                                {"Qwen/Qwen2.5-7B", "qwen2.5-7b"},
                                {"meta-llama/Llama-3.2-3B", "llama-3.2-3b"}}) {
    auto m = catalog().find(id);
    ASSERT_TRUE(m) << id << ": " << m.error().message;
    EXPECT_EQ((*m)->key, key);
  }
  auto unknown = catalog().find("mistralai/Mixtral-8x7B");
  ASSERT_FALSE(unknown);
  EXPECT_NE(
      unknown.error().message.find("--config config.json (https://huggingface.co/mistralai/Mixtral-8x7B/"),
      std::string::npos);
  EXPECT_FALSE(catalog().find("/"));
}

}  // namespace
}  // namespace gpuhost::plan
