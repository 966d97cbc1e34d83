#include "platform/process_info.h"

#include <gtest/gtest.h>

#include "platform/process.h"

namespace gpuhost::platform {
namespace {

TEST(ProcessName, NamesThisProcessAfterItsExecutable) {
  auto name = process_name(static_cast<unsigned>(current_process_id()));
  ASSERT_TRUE(name.has_value());
  // The test binary: "platform_test" (Linux, comm keeps 15 bytes) or "platform_test.exe".
  EXPECT_TRUE(name->starts_with("platform_test")) << *name;
}

TEST(ProcessName, IsEmptyForAProcessThatDoesNotExist) {
  EXPECT_FALSE(process_name(0).has_value());
  // Far above any pid_max (Linux 4194304) and not a multiple of 4 (Windows PIDs are).
  EXPECT_FALSE(process_name(2147483645u).has_value());
}

}  // namespace
}  // namespace gpuhost::platform
