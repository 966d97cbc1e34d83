#include "knowledge/cudnn.h"

#include <gtest/gtest.h>

#include "knowledge/test_support.h"

namespace gpuhost::knowledge {
namespace {

using testing::cc;
using testing::embedded;
using testing::v;

const CudnnTable& cudnn() {
  return embedded().cudnn;
}

std::vector<std::string> versions(const std::vector<const CudnnRelease*>& rows) {
  std::vector<std::string> out;
  for (const auto* row : rows) out.push_back(row->cudnn.str());
  return out;
}

TEST(Cudnn, Cuda13GetsOnlyTheCuda13Build) {
  auto rows = cudnn().for_cuda(v("13.0"));
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0]->cudnn, v("9.17.0"));
  EXPECT_EQ(rows[0]->min_driver_linux, v("580.65.06"));
  EXPECT_EQ(rows[0]->min_driver_windows, std::nullopt);
}

TEST(Cudnn, Cuda11_8HasNo9_17Build) {
  EXPECT_EQ(versions(cudnn().for_cuda(v("11.8"))),
            (std::vector<std::string>{"9.10.2", "9.5", "9.0.0", "8.9.6", "8.9.5"}));
}

TEST(Cudnn, ComputeCapabilityNarrowsTheChoice) {
  auto all = versions(cudnn().for_cuda(v("12.8")));
  EXPECT_EQ(all.front(), "9.17.0");
  auto pascal = versions(cudnn().for_cuda(v("12.8"), cc("6.1")));
  EXPECT_EQ(pascal.front(), "9.10.2");  // 9.17 dropped Maxwell, Pascal and Volta
  auto blackwell = cudnn().for_cuda(v("12.6"), cc("12.0"));
  for (const auto* row : blackwell) EXPECT_NE(row->cudnn, v("9.10.2")) << "12.0 needs the CUDA 12.8+ row";
}

TEST(Cudnn, OldReleasesListTheirToolkits) {
  EXPECT_EQ(versions(cudnn().for_cuda(v("10.1"))), (std::vector<std::string>{"7.6.0"}));
  EXPECT_TRUE(cudnn().for_cuda(v("9.1")).empty());
  EXPECT_EQ(versions(cudnn().for_cuda(v("10.2"))), (std::vector<std::string>{"8.2.2"}));
}

}  // namespace
}  // namespace gpuhost::knowledge
