#include "platform/registry.h"

#include <gtest/gtest.h>

#include "platform/process.h"
#include "platform/system_info.h"

namespace gpuhost::platform {
namespace {

constexpr const char* k_test_key = "Software\\GpuhostPlatformTest";

bool reg(std::vector<std::string> args) {
  ProcessOptions options;
  options.argv = {"reg"};
  options.argv.insert(options.argv.end(), args.begin(), args.end());
  options.timeout = std::chrono::seconds(30);
  auto result = run_process(options);
  return result && result->succeeded();
}

// The values are written once per suite with reg.exe, a writer independent of the code under test.
class Registry : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (current_os() != OsFamily::windows) return;
    const std::string key = std::string("HKCU\\") + k_test_key;
    s_written = reg({"add", key, "/v", "Count", "/t", "REG_DWORD", "/d", "7", "/f"}) &&
                reg({"add", key, "/v", "Name", "/t", "REG_SZ", "/d", "gpu host", "/f"}) &&
                reg({"add", key + "\\Child", "/f"});
  }
  static void TearDownTestSuite() {
    if (current_os() == OsFamily::windows) reg({"delete", std::string("HKCU\\") + k_test_key, "/f"});
  }
  void SetUp() override {
    if (current_os() == OsFamily::windows) {
      ASSERT_TRUE(s_written) << "reg.exe add failed";
    }
  }

  static inline bool s_written = false;
};

TEST_F(Registry, IsUnsupportedOffWindows) {
  if (current_os() == OsFamily::windows) GTEST_SKIP() << "Windows has a registry";
  auto value = registry_read_dword(RegistryRoot::local_machine, "SOFTWARE\\X", "Y");
  ASSERT_FALSE(value);
  EXPECT_EQ(value.error().code, ErrorCode::unsupported);
  EXPECT_EQ(registry_read_string(RegistryRoot::current_user, "X", "Y").error().code, ErrorCode::unsupported);
  EXPECT_EQ(registry_subkeys(RegistryRoot::current_user, "X").error().code, ErrorCode::unsupported);
}

TEST_F(Registry, ReadsValuesWrittenByRegExe) {
  if (current_os() != OsFamily::windows) GTEST_SKIP() << "no registry off Windows";
  auto count = registry_read_dword(RegistryRoot::current_user, k_test_key, "Count");
  ASSERT_TRUE(count) << count.error().message;
  EXPECT_EQ(*count, 7u);
  auto name = registry_read_string(RegistryRoot::current_user, k_test_key, "Name");
  ASSERT_TRUE(name) << name.error().message;
  EXPECT_EQ(*name, "gpu host");
  auto subkeys = registry_subkeys(RegistryRoot::current_user, k_test_key);
  ASSERT_TRUE(subkeys) << subkeys.error().message;
  EXPECT_EQ(*subkeys, std::vector<std::string>{"Child"});
}

TEST_F(Registry, ReadsMachineKeys) {
  if (current_os() != OsFamily::windows) GTEST_SKIP() << "no registry off Windows";
  auto build = registry_read_string(RegistryRoot::local_machine,
                                    "SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion", "CurrentBuild");
  ASSERT_TRUE(build) << build.error().message;
  EXPECT_FALSE(build->empty());
}

TEST_F(Registry, ReportsMissingKeysAndValuesAsNotFound) {
  if (current_os() != OsFamily::windows) GTEST_SKIP() << "no registry off Windows";
  auto missing_key = registry_read_dword(RegistryRoot::local_machine, "SOFTWARE\\GpuhostNoSuchKey7f3a", "X");
  ASSERT_FALSE(missing_key);
  EXPECT_EQ(missing_key.error().code, ErrorCode::not_found) << missing_key.error().message;
  auto missing_value = registry_read_string(RegistryRoot::current_user, k_test_key, "NoSuchValue");
  ASSERT_FALSE(missing_value);
  EXPECT_EQ(missing_value.error().code, ErrorCode::not_found) << missing_value.error().message;
  auto missing_subkeys = registry_subkeys(RegistryRoot::current_user, "Software\\GpuhostNoSuchKey7f3a");
  ASSERT_FALSE(missing_subkeys);
  EXPECT_EQ(missing_subkeys.error().code, ErrorCode::not_found);
}

TEST_F(Registry, RejectsWrongValueType) {
  if (current_os() != OsFamily::windows) GTEST_SKIP() << "no registry off Windows";
  auto wrong = registry_read_dword(RegistryRoot::current_user, k_test_key, "Name");
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.error().code, ErrorCode::not_found);
}

}  // namespace
}  // namespace gpuhost::platform
