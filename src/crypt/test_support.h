#pragma once
// For crypt/ tests: keys, plaintexts and a scratch directory.

#include <cstdint>
#include <filesystem>
#include <random>
#include <string>

#include "crypt/encryption_key.h"
#include "platform/process.h"
#include "platform/system_info.h"

namespace gpuhost::crypt::testing {

// Key bytes start, start+1, ..., start+31.
inline EncryptionKey test_key(std::uint8_t start = 0) {
  std::array<std::uint8_t, 32> raw{};
  for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<std::uint8_t>(start + i);
  return std::move(*EncryptionKey::from_bytes(raw));
}

// Deterministic bytes that do not repeat within a chunk.
inline std::string test_bytes(std::size_t size, unsigned seed = 1) {
  std::mt19937 random(seed);
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(random() & 0xff);
  return out;
}

inline bool on_windows() {
  return platform::current_os() == platform::OsFamily::windows;
}

// A fresh directory under the system temp directory, removed with its contents at scope end.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag)
      : m_path(std::filesystem::temp_directory_path() /
               ("gpuhost-crypt-test-" + std::to_string(platform::current_process_id()) + "-" + tag)) {
    std::filesystem::remove_all(m_path);
    std::filesystem::create_directories(m_path);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(m_path, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

 private:
  std::filesystem::path m_path;
};

}  // namespace gpuhost::crypt::testing
