#include "knowledge/gpus.h"

#include <gtest/gtest.h>

#include "knowledge/test_support.h"

namespace gpuhost::knowledge {
namespace {

using testing::cc;
using testing::embedded;

const GpuTable& gpus() {
  return embedded().gpus;
}

TEST(Gpus, NameTokensAreLowerCaseAlphanumericRuns) {
  EXPECT_EQ(gpu_name_tokens("NVIDIA A100-SXM4-80GB"),
            (std::vector<std::string>{"nvidia", "a100", "sxm4", "80gb"}));
  EXPECT_EQ(gpu_name_tokens("  Tesla T4 "), (std::vector<std::string>{"tesla", "t4"}));
  EXPECT_TRUE(gpu_name_tokens("--").empty());
}

TEST(Gpus, A100Sxm4_80gbIsAmpere8_0) {
  auto match = gpus().match("NVIDIA A100-SXM4-80GB");
  ASSERT_TRUE(match);
  EXPECT_EQ(match->model->key, "a100-sxm4-80gb");
  EXPECT_EQ(match->model->compute_capability, cc("8.0"));
  EXPECT_EQ(match->model->architecture, "Ampere");
  EXPECT_EQ(match->model->memory_gb, 80);
  EXPECT_EQ(match->pattern, "a100 sxm4 80gb");
}

struct NameCase {
  const char* nvml_name;
  const char* key;
  const char* cc;
};

TEST(Gpus, NvmlNamesMatchTheMostSpecificModel) {
  const NameCase cases[] = {
      {"Tesla T4", "t4", "7.5"},
      {"Tesla V100-SXM2-16GB", "v100-sxm2-16gb", "7.0"},
      {"Tesla V100-PCIE-32GB", "v100-pcie-32gb", "7.0"},
      {"Tesla V100S-PCIE-32GB", "v100s-pcie-32gb", "7.0"},
      {"Tesla V100-DGXS-32GB", "v100", "7.0"},
      {"NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb", "8.0"},
      {"NVIDIA A100-PCIE-40GB", "a100-pcie-40gb", "8.0"},
      {"NVIDIA A100 80GB PCIe", "a100-pcie-80gb", "8.0"},
      {"NVIDIA A100-SXM-80GB", "a100-sxm4-80gb", "8.0"},
      {"NVIDIA A10", "a10", "8.6"},
      {"NVIDIA A10G", "a10g", "8.6"},
      {"NVIDIA A30", "a30", "8.0"},
      {"NVIDIA A40", "a40", "8.6"},
      {"NVIDIA GeForce RTX 3090", "rtx-3090", "8.6"},
      {"NVIDIA RTX A6000", "rtx-a6000", "8.6"},
      {"NVIDIA L4", "l4", "8.9"},
      {"NVIDIA L40", "l40", "8.9"},
      {"NVIDIA L40S", "l40s", "8.9"},
      {"NVIDIA GeForce RTX 4090", "rtx-4090", "8.9"},
      {"NVIDIA RTX 6000 Ada Generation", "rtx-6000-ada", "8.9"},
      {"NVIDIA H100 80GB HBM3", "h100-sxm", "9.0"},
      {"NVIDIA H100 PCIe", "h100-pcie", "9.0"},
      {"NVIDIA H100 NVL", "h100-nvl", "9.0"},
      {"NVIDIA H200", "h200", "9.0"},
      {"NVIDIA GH200 480GB", "gh200", "9.0"},
      {"NVIDIA B200", "b200", "10.0"},
      {"NVIDIA B300 SXM6 AC", "b300", "10.3"},
      {"NVIDIA GeForce RTX 5090", "rtx-5090", "12.0"},
      {"NVIDIA RTX PRO 6000 Blackwell Server Edition", "rtx-pro-6000-blackwell", "12.0"},
      {"NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "rtx-pro-6000-blackwell", "12.0"},
      {"NVIDIA GB10", "gb10", "12.1"},
      {"Tesla P100-PCIE-16GB", "p100", "6.0"},
      {"Tesla P4", "p4", "6.1"},
      {"Tesla P40", "p40", "6.1"},
      {"Tesla K80", "k80", "3.7"},
      {"Tesla M60", "m60", "5.2"},
  };
  for (const auto& c : cases) {
    auto match = gpus().match(c.nvml_name);
    ASSERT_TRUE(match) << c.nvml_name;
    EXPECT_EQ(match->model->key, c.key) << c.nvml_name;
    EXPECT_EQ(match->model->compute_capability, cc(c.cc)) << c.nvml_name;
  }
}

TEST(Gpus, ShorterNamesDoNotMatchLongerModels) {
  EXPECT_FALSE(gpus().match("Quadro RTX 6000"));  // Turing, not the Ada RTX 6000
  EXPECT_FALSE(gpus().match("NVIDIA GeForce GTX 1080"));
  EXPECT_FALSE(gpus().match("NVIDIA T400"));
  EXPECT_FALSE(gpus().match(""));
}

TEST(Gpus, A10gComputeCapabilityIsMarkedUnofficial) {
  const auto* model = gpus().find_by_key("a10g");
  ASSERT_NE(model, nullptr);
  EXPECT_EQ(model->provenance.confidence, Confidence::unofficial);
  EXPECT_EQ(gpus().find_by_key("a10")->provenance.confidence, Confidence::confirmed);
}

TEST(Gpus, EveryComputeCapabilityIsInTheArchitectureTable) {
  for (const auto& model : gpus().models) {
    const auto* arch = embedded().arch_support.find(model.compute_capability);
    ASSERT_NE(arch, nullptr) << model.key;
    EXPECT_EQ(arch->architecture, model.architecture) << model.key;
  }
}

TEST(Gpus, A100AndH100CarryDenseSpecSheetNumbers) {
  const auto* a100 = gpus().find_by_key("a100-sxm4-80gb");
  ASSERT_TRUE(a100 && a100->spec);
  EXPECT_EQ(a100->spec->bf16_dense_tflops, 312);
  EXPECT_EQ(a100->spec->tf32_dense_tflops, 156);
  EXPECT_EQ(a100->spec->fp32_tflops, 19.5);
  EXPECT_EQ(a100->spec->pcie_generation, 4);
  EXPECT_EQ(a100->spec->pcie_width, 16);
  EXPECT_FALSE(a100->spec->source.empty());
  const auto* h100 = gpus().find_by_key("h100-sxm");
  ASSERT_TRUE(h100 && h100->spec);
  EXPECT_EQ(h100->spec->bf16_dense_tflops, 989);
  EXPECT_EQ(h100->spec->pcie_generation, 5);
}

TEST(Gpus, SpecLeavesOutFormatsWithoutTensorSupport) {
  const auto* t4 = gpus().find_by_key("t4");
  ASSERT_TRUE(t4 && t4->spec);
  EXPECT_FALSE(t4->spec->bf16_dense_tflops);
  EXPECT_FALSE(t4->spec->tf32_dense_tflops);
  EXPECT_EQ(t4->spec->fp16_dense_tflops, 65);
  EXPECT_FALSE(gpus().find_by_key("a10g")->spec);
}

}  // namespace
}  // namespace gpuhost::knowledge
