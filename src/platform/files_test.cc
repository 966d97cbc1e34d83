#include "platform/files.h"

#include <fstream>

#include <gtest/gtest.h>

#include "platform/process.h"
#include "platform/system_info.h"

namespace gpuhost::platform {
namespace {

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    static int counter = 0;
    m_dir = std::filesystem::temp_directory_path() /
            ("gpuhost-files-test-" + std::to_string(current_process_id()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(m_dir);
    std::filesystem::create_directories(m_dir);
  }
  void TearDown() override { std::filesystem::remove_all(m_dir); }

  void write_plain(const std::string& name, const std::string& text) {
    std::ofstream(m_dir / name, std::ios::binary) << text;
  }

  std::filesystem::path m_dir;
};

TEST_F(Files, WriteAtomicCreatesFile) {
  auto path = m_dir / "new.json";
  ASSERT_TRUE(write_file_atomic(path, "{\"a\": 1}\n"));
  auto text = read_file(path);
  ASSERT_TRUE(text) << text.error().message;
  EXPECT_EQ(*text, "{\"a\": 1}\n");
}

TEST_F(Files, WriteAtomicReplacesContentAndLeavesNoTempFiles) {
  auto path = m_dir / "state.json";
  ASSERT_TRUE(write_file_atomic(path, "first version, longer than the second"));
  auto result = write_file_atomic(path, "second");
  ASSERT_TRUE(result) << result.error().message;
  EXPECT_EQ(read_file(path).value_or("?"), "second");
  auto entries = list_directory(m_dir);
  ASSERT_TRUE(entries);
  ASSERT_EQ(entries->size(), 1u);
  EXPECT_EQ(entries->front().name, "state.json");
}

TEST_F(Files, WriteAtomicWritesBinaryBytesUnchanged) {
  std::string bytes("a\r\nb\nc\0d", 8);
  ASSERT_TRUE(write_file_atomic(m_dir / "bin", bytes));
  EXPECT_EQ(read_file(m_dir / "bin").value_or("?"), bytes);
}

TEST_F(Files, WriteAtomicFailsInMissingDirectoryWithoutLeftovers) {
  auto result = write_file_atomic(m_dir / "missing" / "x.json", "data");
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("missing"), std::string::npos) << result.error().message;
  EXPECT_TRUE(list_directory(m_dir).value_or(std::vector<DirectoryEntry>{{}}).empty());
}

TEST_F(Files, ReadFileReportsNotFound) {
  auto result = read_file(m_dir / "absent.txt");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::not_found) << result.error().message;
}

TEST_F(Files, ReadFileRejectsFilesOverLimit) {
  write_plain("big.txt", "0123456789");
  auto result = read_file(m_dir / "big.txt", 4);
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::io_error);
  EXPECT_EQ(read_file(m_dir / "big.txt", 10).value_or("?"), "0123456789");
}

TEST_F(Files, ListDirectorySortsAndDescribesEntries) {
  write_plain("b.txt", "abc");
  write_plain("c.txt", "");
  std::filesystem::create_directory(m_dir / "a_dir");
  auto entries = list_directory(m_dir);
  ASSERT_TRUE(entries) << entries.error().message;
  ASSERT_EQ(entries->size(), 3u);
  EXPECT_EQ((*entries)[0].name, "a_dir");
  EXPECT_TRUE((*entries)[0].is_directory);
  EXPECT_EQ((*entries)[1].name, "b.txt");
  EXPECT_FALSE((*entries)[1].is_directory);
  EXPECT_EQ((*entries)[1].size, 3u);
  EXPECT_EQ((*entries)[2].name, "c.txt");
  EXPECT_FALSE((*entries)[2].is_symlink);
}

TEST_F(Files, ListDirectoryReportsNotFound) {
  auto result = list_directory(m_dir / "nope");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::not_found) << result.error().message;
}

TEST_F(Files, DiskSpaceIsConsistent) {
  auto space = disk_space(m_dir);
  ASSERT_TRUE(space) << space.error().message;
  EXPECT_GT(space->capacity_bytes, 0u);
  EXPECT_LE(space->free_bytes, space->capacity_bytes);
  EXPECT_LE(space->available_bytes, space->capacity_bytes);
}

TEST_F(Files, ReadsSymlinkTarget) {
  write_plain("target.txt", "t");
  std::error_code ec;
  std::filesystem::create_symlink("target.txt", m_dir / "link", ec);
  if (ec) GTEST_SKIP() << "cannot create symlinks here: " << ec.message();
  auto target = platform::read_symlink(m_dir / "link");
  ASSERT_TRUE(target) << target.error().message;
  EXPECT_EQ(*target, "target.txt");
  auto entries = list_directory(m_dir);
  ASSERT_TRUE(entries);
  ASSERT_EQ(entries->size(), 2u);
  EXPECT_TRUE((*entries)[0].is_symlink);
}

TEST_F(Files, ReadSymlinkReportsNotFound) {
  auto result = platform::read_symlink(m_dir / "no-link");
  ASSERT_FALSE(result);
  EXPECT_EQ(result.error().code, ErrorCode::not_found) << result.error().message;
}

}  // namespace
}  // namespace gpuhost::platform
