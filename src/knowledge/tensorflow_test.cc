#include "knowledge/tensorflow.h"

#include <gtest/gtest.h>

#include "knowledge/tensorflow_advice.h"
#include "knowledge/test_support.h"

namespace gpuhost::knowledge {
namespace {

using testing::embedded;
using testing::v;

const TensorflowTable& tensorflow() {
  return embedded().tensorflow;
}

TEST(Tensorflow, TestedConfigurations) {
  const auto* tf215 = tensorflow().find_release(v("2.15"));
  ASSERT_NE(tf215, nullptr);
  EXPECT_EQ(tf215->cuda, v("12.2"));
  EXPECT_EQ(tf215->cudnn, v("8.9"));
  EXPECT_FALSE(tf215->windows_native_gpu);
  EXPECT_TRUE(tensorflow().find_release(v("2.10.0"))->windows_native_gpu);
  EXPECT_FALSE(tensorflow().find_release(v("2.11.0"))->windows_native_gpu);
  EXPECT_EQ(tensorflow().find_release(v("2.16"))->version, v("2.16.1"));
  EXPECT_EQ(tensorflow().releases.front().version, v("2.21.0"));
}

TEST(Tensorflow, RulesAreTyped) {
  const auto& rules = tensorflow().rules;
  EXPECT_EQ(rules.last_native_windows_gpu, v("2.10"));
  EXPECT_EQ(rules.linux_driver_floor, v("525.60.13"));
  EXPECT_EQ(rules.wsl_driver_floor, v("528.33"));
  EXPECT_EQ(rules.wsl_min_windows_build, 19044);
  EXPECT_EQ(rules.windows_native_conda, "conda install -c conda-forge cudatoolkit=11.2 cudnn=8.1.0");
  EXPECT_EQ(rules.windows_native_pip, "pip install \"tensorflow<2.11\"");
  EXPECT_NE(rules.tensorflow_gpu_removed.find("has been removed"), std::string::npos);
}

TEST(Tensorflow, WindowsTf2_15HasNoGpu) {
  auto support = tensorflow_gpu_support(embedded(), v("2.15.0"), Os::windows);
  EXPECT_FALSE(support.gpu);
  EXPECT_NE(support.reason.find("WSL2"), std::string::npos) << support.reason;
  EXPECT_NE(support.reason.find("tensorflow<2.11"), std::string::npos) << support.reason;
  EXPECT_TRUE(tensorflow_gpu_support(embedded(), v("2.10.1"), Os::windows).gpu);
  EXPECT_TRUE(tensorflow_gpu_support(embedded(), v("2.15.0"), Os::linux).gpu);
}

TEST(Tensorflow, BeforeTwoOneTheGpuPackageIsGone) {
  auto support = tensorflow_gpu_support(embedded(), v("2.0.0"), Os::linux);
  EXPECT_FALSE(support.gpu);
  EXPECT_NE(support.reason.find("tensorflow-gpu"), std::string::npos) << support.reason;
}

TEST(TensorflowAdvice, LinuxDriver535GetsTheNewestWithAndCuda) {
  auto advice = recommend_tensorflow(embedded(), {Os::linux, v("535.104.05"), v("3.11"), std::nullopt});
  ASSERT_EQ(advice.options.size(), 1u);
  const auto& option = advice.options[0];
  EXPECT_EQ(option.release->version, v("2.21.0"));
  EXPECT_EQ(option.path, TensorflowInstallPath::linux_pip);
  EXPECT_EQ(option.commands, (std::vector<std::string>{"pip install 'tensorflow[and-cuda]==2.21.0'"}));
  EXPECT_EQ(option.driver.kind, DriverVerdictKind::supported_via_minor_version_compat);
}

TEST(TensorflowAdvice, LinuxDriver470FallsBackToASystemCudaRelease) {
  auto advice = recommend_tensorflow(embedded(), {Os::linux, v("470.82.01"), v("3.9"), std::nullopt});
  ASSERT_EQ(advice.options.size(), 1u);
  const auto& option = advice.options[0];
  EXPECT_EQ(option.release->version, v("2.13.0"));
  EXPECT_EQ(option.commands, (std::vector<std::string>{"pip install tensorflow==2.13.0"}));
  ASSERT_FALSE(option.caveats.empty());
  EXPECT_NE(option.caveats[0].find("CUDA 11.8"), std::string::npos);
  EXPECT_FALSE(advice.problems.empty());
}

TEST(TensorflowAdvice, WindowsOffersNativeTwoTenThenWsl2) {
  auto advice = recommend_tensorflow(embedded(), {Os::windows, v("537.13"), v("3.10"), 20348});
  ASSERT_EQ(advice.options.size(), 2u);
  EXPECT_EQ(advice.options[0].path, TensorflowInstallPath::windows_native);
  EXPECT_EQ(advice.options[0].release->version, v("2.10.0"));
  EXPECT_EQ(advice.options[0].commands,
            (std::vector<std::string>{"conda install -c conda-forge cudatoolkit=11.2 cudnn=8.1.0",
                                      "pip install \"tensorflow<2.11\""}));
  EXPECT_EQ(advice.options[1].path, TensorflowInstallPath::wsl2);
  EXPECT_EQ(advice.options[1].release->version, v("2.21.0"));
}

TEST(TensorflowAdvice, WindowsPython3_12OnlyHasWsl2) {
  auto advice = recommend_tensorflow(embedded(), {Os::windows, v("537.13"), v("3.12"), std::nullopt});
  ASSERT_EQ(advice.options.size(), 1u);
  EXPECT_EQ(advice.options[0].path, TensorflowInstallPath::wsl2);
  EXPECT_FALSE(advice.problems.empty());
}

TEST(TensorflowAdvice, OldWindowsBuildHasNoWsl2Gpu) {
  auto advice = recommend_tensorflow(embedded(), {Os::windows, v("537.13"), v("3.9"), 17763});
  ASSERT_EQ(advice.options.size(), 1u);
  EXPECT_EQ(advice.options[0].path, TensorflowInstallPath::windows_native);
}

TEST(TensorflowAdvice, NoDriverNoOptions) {
  auto advice = recommend_tensorflow(embedded(), {Os::linux, std::nullopt, v("3.11"), std::nullopt});
  EXPECT_TRUE(advice.options.empty());
  ASSERT_EQ(advice.problems.size(), 1u);
}

}  // namespace
}  // namespace gpuhost::knowledge
