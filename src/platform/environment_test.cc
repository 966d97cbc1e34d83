#include "platform/environment.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "platform/system_info.h"

namespace gpuhost::platform {
namespace {

TEST(Environment, SetsReadsAndUnsetsVariables) {
  set_env("GPUHOST_ENV_TEST", "value one");
  EXPECT_EQ(get_env("GPUHOST_ENV_TEST").value_or("?"), "value one");
  set_env("GPUHOST_ENV_TEST", "value two");
  EXPECT_EQ(get_env("GPUHOST_ENV_TEST").value_or("?"), "value two");
  unset_env("GPUHOST_ENV_TEST");
  EXPECT_FALSE(get_env("GPUHOST_ENV_TEST"));
}

TEST(Environment, KeepsUtf8Values) {
  set_env("GPUHOST_ENV_UTF8", "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  EXPECT_EQ(get_env("GPUHOST_ENV_UTF8").value_or("?"), "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c");
  unset_env("GPUHOST_ENV_UTF8");
}

TEST(Environment, DistinguishesEmptyFromUnset) {
  set_env("GPUHOST_ENV_EMPTY", "");
  auto value = get_env("GPUHOST_ENV_EMPTY");
  unset_env("GPUHOST_ENV_EMPTY");
  // Windows cannot hold an empty variable: SetEnvironmentVariable("") stores it, the CRT deletes it.
  if (value) {
    EXPECT_EQ(*value, "");
  }
  EXPECT_FALSE(get_env("GPUHOST_ENV_NEVER_SET_7f3a"));
}

TEST(Environment, ListsVariables) {
  set_env("GPUHOST_ENV_LISTED", "listed");
  auto all = environment();
  unset_env("GPUHOST_ENV_LISTED");
  auto it =
      std::find_if(all.begin(), all.end(), [](const auto& kv) { return kv.first == "GPUHOST_ENV_LISTED"; });
  ASSERT_NE(it, all.end());
  EXPECT_EQ(it->second, "listed");
  EXPECT_TRUE(std::none_of(all.begin(), all.end(), [](const auto& kv) { return kv.first.empty(); }));
}

TEST(Environment, PathSeparatorMatchesOs) {
  EXPECT_EQ(path_list_separator(), current_os() == OsFamily::windows ? ';' : ':');
}

}  // namespace
}  // namespace gpuhost::platform
