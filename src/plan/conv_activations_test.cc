#include "plan/conv_activations.h"

#include <gtest/gtest.h>

#include "plan/memory.h"
#include "plan/model.h"
#include "plan/test_models.h"

namespace gpuhost::plan {
namespace {

double fp32_bytes(int depth, int image_size) {
  auto table = resnet_activations(depth, image_size);
  EXPECT_TRUE(table) << table.error().message;
  double bytes = 0;
  if (table)
    for (const auto& stage : table->stages) bytes += stage.elements * 4 + stage.fixed_bytes;
  return bytes;
}

// What PyTorch 1.13's autograd keeps for one image, every saved tensor counted once per storage,
// parameters and buffers left out (tests/integration/resnet_saved_tensors.py, fp32 on the CPU):
// ResNet-50 at 224 px 86,125,996 bytes, at 160 px 44,051,884, ResNet-18 at 224 px 22,222,252.
// The 12 bytes over are the loss's scalars (its target and reduction), which the table leaves out.
TEST(ResnetActivations, MatchAutogradsSavedTensorsToTheLossScalars) {
  EXPECT_DOUBLE_EQ(fp32_bytes(50, 224), 86'125'996.0 - 12);
  EXPECT_DOUBLE_EQ(fp32_bytes(50, 160), 44'051'884.0 - 12);
  EXPECT_DOUBLE_EQ(fp32_bytes(18, 224), 22'222'252.0 - 12);
}

// The network's stages without Ultralytics' loss, in fp32 bytes.
double yolo_fp32_bytes(char scale, int image_size) {
  auto table = yolov8_activations(scale, image_size);
  EXPECT_TRUE(table) << table.error().message;
  double bytes = 0;
  if (table)
    for (const auto& stage : table->stages)
      if (stage.name != "loss") bytes += stage.elements * 4 + stage.fixed_bytes;
  return bytes;
}

// tests/integration/yolo_saved_tensors.py (PyTorch 1.13, fp32 on the CPU, one image, the sum of
// the three outputs as the loss): exact to the byte.
TEST(YoloActivations, MatchAutogradsSavedTensors) {
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('n', 640), 192'503'168.0);
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('s', 640), 360'732'928.0);
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('m', 640), 647'556'480.0);
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('l', 640), 1'005'549'056.0);
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('x', 640), 1'255'707'520.0);
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('n', 320), 48'157'568.0);
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('m', 1280), 2'589'828'480.0);
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('x', 96), 28'480'512.0);
  EXPECT_DOUBLE_EQ(yolo_fp32_bytes('s', 64), 3'686'656.0);
}

TEST(YoloActivations, ItemisesBackboneNeckHeadAndLossAndRefusesWhatUltralyticsWouldNotBuild) {
  auto table = yolov8_activations('m', 640);
  ASSERT_TRUE(table) << table.error().message;
  ASSERT_EQ(table->stages.size(), 7u);
  EXPECT_EQ(table->stages[0].name, "backbone P1-P2");
  EXPECT_EQ(table->stages[0].shape, "96x160x160 out");  // 128 x 0.75 width
  EXPECT_EQ(table->stages[3].shape, "576x20x20 out");   // 1024 capped at 768, x 0.75
  EXPECT_EQ(table->stages[6].name, "loss");
  EXPECT_EQ(table->stages[6].shape, "8400 anchors");  // 80^2 + 40^2 + 20^2
  EXPECT_NE(table->source.find("yolov8.yaml"), std::string::npos);
  auto scale = yolov8_activations('q', 640);
  ASSERT_FALSE(scale);
  EXPECT_NE(scale.error().message.find("n, s, m, l and x"), std::string::npos);
  auto size = yolov8_activations('n', 650);
  ASSERT_FALSE(size);
  EXPECT_NE(size.error().message.find("multiple of 32"), std::string::npos);
}

TEST(ResnetActivations, ItemisesTheStemFourStagesAndTheHead) {
  auto table = resnet_activations(50, 224);
  ASSERT_TRUE(table);
  ASSERT_EQ(table->stages.size(), 6u);
  EXPECT_EQ(table->stages[0].name, "stem");
  EXPECT_EQ(table->stages[0].shape, "64x112x112, pooled to 56x56");
  EXPECT_EQ(table->stages[1].shape, "3 bottlenecks, 256x56x56 out");
  EXPECT_EQ(table->stages[4].shape, "3 bottlenecks, 2048x7x7 out");
  EXPECT_EQ(table->stages[5].name, "head");
  // The largest maps are the early ones: layer1 holds more than layers 3 and 4 together.
  EXPECT_GT(table->stages[1].elements, table->stages[3].elements + table->stages[4].elements);
}

TEST(ResnetActivations, RefusesUnknownDepthsAndImagesBelowTheTotalStride) {
  auto depth = resnet_activations(42, 224);
  ASSERT_FALSE(depth);
  EXPECT_NE(depth.error().message.find("18, 34, 50, 101 and 152"), std::string::npos);
  auto small = resnet_activations(50, 16);
  ASSERT_FALSE(small);
  EXPECT_NE(small.error().message.find("at least 32 px"), std::string::npos);
}

TEST(ResnetActivations, ThePresetsEstimateIsCompleteAndScalesWithBatchAndPrecision) {
  auto catalog = builtin_model_catalog();
  ASSERT_TRUE(catalog) << catalog.error().message;
  auto model = catalog->find("resnet-50");
  ASSERT_TRUE(model) << model.error().message;
  auto setup = testing::bare();
  setup.precision = Precision::fp32;
  setup.optimizer = Optimizer::sgd;
  setup.batch = 32;
  auto fp32 = estimate_memory(**model, setup);
  ASSERT_TRUE(fp32) << fp32.error().message;
  EXPECT_EQ(fp32->basis, "layer_table");
  EXPECT_DOUBLE_EQ(fp32->item_bytes("activations"), 32 * (86'125'996.0 - 12));

  setup.precision = Precision::mixed;
  auto amp = estimate_memory(**model, setup);
  ASSERT_TRUE(amp);
  // Half the feature maps' bytes; the indices and batch statistics stay (the fp16 weight copies
  // autocast keeps are the "weights" line of mixed precision).
  const auto table = resnet_activations(50, 224);
  double elements = 0, fixed = 0;
  for (const auto& stage : table->stages) elements += stage.elements, fixed += stage.fixed_bytes;
  EXPECT_DOUBLE_EQ(amp->item_bytes("activations"), 32 * (elements * 2 + fixed));

  setup.image_size = 448;
  auto big = estimate_memory(**model, setup);
  ASSERT_TRUE(big);
  // Four times the pixels: four times the maps, give or take the odd sizes the strides round.
  EXPECT_NEAR(big->item_bytes("activations") / amp->item_bytes("activations"), 4.0, 0.05);
}

}  // namespace
}  // namespace gpuhost::plan
