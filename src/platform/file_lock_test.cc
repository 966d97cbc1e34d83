#include "platform/file_lock.h"

#include <filesystem>

#include <gtest/gtest.h>

#include "platform/process.h"

namespace gpuhost::platform {
namespace {

std::filesystem::path lock_path(const char* tag) {
  auto dir = std::filesystem::temp_directory_path() /
             ("gpuhost-lock-test-" + std::to_string(current_process_id()) + "-" + tag);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir / "run.lock";
}

TEST(FileLock, CreatesTheFileAndExcludesASecondHolder) {
  auto path = lock_path("exclude");
  {
    auto first = FileLock::try_lock(path);
    ASSERT_TRUE(first) << first.error().message;
    EXPECT_TRUE(std::filesystem::exists(path));
    auto second = FileLock::try_lock(path);
    ASSERT_FALSE(second);
    EXPECT_EQ(second.error().code, ErrorCode::unavailable);
    EXPECT_NE(second.error().message.find(path.string()), std::string::npos) << second.error().message;
  }
  std::error_code ignored;
  std::filesystem::remove_all(path.parent_path(), ignored);
}

TEST(FileLock, IsFreeAgainAfterRelease) {
  auto path = lock_path("release");
  {
    auto first = FileLock::try_lock(path);
    ASSERT_TRUE(first) << first.error().message;
  }
  EXPECT_TRUE(FileLock::try_lock(path));
  std::error_code ignored;
  std::filesystem::remove_all(path.parent_path(), ignored);
}

TEST(FileLock, MovedLockStaysHeld) {
  auto path = lock_path("move");
  auto first = FileLock::try_lock(path);
  ASSERT_TRUE(first) << first.error().message;
  FileLock moved = std::move(*first);
  EXPECT_FALSE(FileLock::try_lock(path));
  {
    FileLock assigned = std::move(moved);
    EXPECT_FALSE(FileLock::try_lock(path));
  }
  EXPECT_TRUE(FileLock::try_lock(path));
  std::error_code ignored;
  std::filesystem::remove_all(path.parent_path(), ignored);
}

TEST(FileLock, ReportsAMissingDirectory) {
  auto path = lock_path("missing").parent_path() / "absent" / "run.lock";
  auto lock = FileLock::try_lock(path);
  ASSERT_FALSE(lock);
  EXPECT_EQ(lock.error().code, ErrorCode::io_error);
}

}  // namespace
}  // namespace gpuhost::platform
