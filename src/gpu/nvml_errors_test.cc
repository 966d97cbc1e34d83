#include "gpu/nvml_errors.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace gpuhost::gpu {
namespace {

TEST(NvmlErrors, TableHasEveryCodeOnceInOrder) {
  // nvml.h nvmlReturn_t: 0..29 and 999.
  std::set<int> expected;
  for (int i = 0; i <= 29; ++i) expected.insert(i);
  expected.insert(999);
  std::set<int> seen;
  std::set<std::string> names;
  int previous = -1;
  for (const auto& e : nvml_error_table()) {
    EXPECT_GT(e.status, previous);
    previous = e.status;
    seen.insert(e.status);
    EXPECT_TRUE(names.insert(e.name).second) << e.name;
    EXPECT_TRUE(std::string(e.name).starts_with("NVML_")) << e.name;
    EXPECT_FALSE(std::string(e.message).empty()) << e.name;
    EXPECT_EQ(find_nvml_error(e.status), &e);
  }
  EXPECT_EQ(seen, expected);
}

TEST(NvmlErrors, NamesMatchNvmlHeader) {
  EXPECT_EQ(nvml_error_name(0), "NVML_SUCCESS");
  EXPECT_EQ(nvml_error_name(3), "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(nvml_error_name(4), "NVML_ERROR_NO_PERMISSION");
  EXPECT_EQ(nvml_error_name(7), "NVML_ERROR_INSUFFICIENT_SIZE");
  EXPECT_EQ(nvml_error_name(9), "NVML_ERROR_DRIVER_NOT_LOADED");
  EXPECT_EQ(nvml_error_name(12), "NVML_ERROR_LIBRARY_NOT_FOUND");
  EXPECT_EQ(nvml_error_name(13), "NVML_ERROR_FUNCTION_NOT_FOUND");
  EXPECT_EQ(nvml_error_name(15), "NVML_ERROR_GPU_IS_LOST");
  EXPECT_EQ(nvml_error_name(18), "NVML_ERROR_LIB_RM_VERSION_MISMATCH");
  EXPECT_EQ(nvml_error_name(25), "NVML_ERROR_ARGUMENT_VERSION_MISMATCH");
  EXPECT_EQ(nvml_error_name(26), "NVML_ERROR_DEPRECATED");
  EXPECT_EQ(nvml_error_name(999), "NVML_ERROR_UNKNOWN");
}

TEST(NvmlErrors, MessagesSayWhatToDo) {
  EXPECT_NE(make_nvml_issue(18).message.find("Reboot"), std::string::npos);
  EXPECT_NE(make_nvml_issue(15).message.find("Xid 79"), std::string::npos);
  EXPECT_NE(make_nvml_issue(12).message.find("no NVIDIA driver is installed"), std::string::npos);
  EXPECT_NE(make_nvml_issue(4).message.find("root or Administrator"), std::string::npos);
}

TEST(NvmlErrors, LibraryTextOnlyWhereItAddsSomething) {
  NvmlIssue known = make_nvml_issue(3, "Not Supported");
  EXPECT_EQ(known.status, 3);
  EXPECT_EQ(known.name, "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(known.message.find("Not Supported\""), std::string::npos);

  NvmlIssue unknown = make_nvml_issue(999, "Unknown Error (RM failure 0x65)");
  EXPECT_NE(unknown.message.find("NVML says: \"Unknown Error (RM failure 0x65)\""), std::string::npos);

  NvmlIssue newer = make_nvml_issue(42, "Some new condition");
  EXPECT_EQ(newer.status, 42);
  EXPECT_EQ(newer.name, "NVML_RETURN_42");
  EXPECT_EQ(find_nvml_error(42), nullptr);
  EXPECT_NE(newer.message.find("status 42"), std::string::npos);
  EXPECT_NE(newer.message.find("Some new condition"), std::string::npos);
}

}  // namespace
}  // namespace gpuhost::gpu
