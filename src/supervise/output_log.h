#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace gpuhost::supervise {

// The trainer's output as a size-capped file set: `name` grows to max_bytes, then becomes
// `name.1` (`.1` becomes `.2` ..., the oldest beyond `keep` is deleted) and a fresh `name`
// starts. Write errors (disk full) are counted, not thrown: losing log lines must never stop
// training. Thread-safe.
class RotatingLog {
 public:
  RotatingLog(std::filesystem::path path, std::uint64_t max_bytes = 64ull << 20, int keep = 4);
  RotatingLog(const RotatingLog&) = delete;
  RotatingLog& operator=(const RotatingLog&) = delete;

  void write(std::string_view text);
  [[nodiscard]] std::uint64_t failed_writes() const;

 private:
  void rotate();  // REQUIRES: m_mutex held

  const std::filesystem::path m_path;
  const std::uint64_t m_max_bytes;
  const int m_keep;
  mutable std::mutex m_mutex;
  std::ofstream m_file;           // guarded by m_mutex
  std::uint64_t m_size = 0;       // guarded by m_mutex
  std::uint64_t m_failed = 0;     // guarded by m_mutex
};

// The last few KiB of a stream (the trainer's stderr), so a final message can quote the lines
// that explain a failure without reading the log back. Thread-safe.
class OutputTail {
 public:
  explicit OutputTail(std::size_t max_bytes = 8192) : m_max(max_bytes) {}
  void write(std::string_view text);
  // Up to `count` last non-empty lines, oldest first, each cut to 300 characters.
  [[nodiscard]] std::vector<std::string> last_lines(std::size_t count) const;
  void clear();

 private:
  const std::size_t m_max;
  mutable std::mutex m_mutex;
  std::string m_text;  // guarded by m_mutex
};

}  // namespace gpuhost::supervise
