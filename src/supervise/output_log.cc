#include "supervise/output_log.h"

#include <system_error>
#include <utility>

namespace gpuhost::supervise {

RotatingLog::RotatingLog(std::filesystem::path path, std::uint64_t max_bytes, int keep)
    : m_path(std::move(path)), m_max_bytes(max_bytes), m_keep(keep) {
  std::error_code ec;
  std::filesystem::create_directories(m_path.parent_path(), ec);
  m_size = std::filesystem::exists(m_path, ec) ? std::filesystem::file_size(m_path, ec) : 0;
  if (ec) m_size = 0;
  m_file.open(m_path, std::ios::binary | std::ios::app);
}

void RotatingLog::write(std::string_view text) {
  std::lock_guard lock(m_mutex);
  if (m_size > 0 && m_size + text.size() > m_max_bytes) rotate();
  if (!m_file.is_open()) {
    ++m_failed;
    return;
  }
  m_file.write(text.data(), static_cast<std::streamsize>(text.size()));
  m_file.flush();
  if (!m_file) {
    ++m_failed;
    m_file.clear();
    return;
  }
  m_size += text.size();
}

std::uint64_t RotatingLog::failed_writes() const {
  std::lock_guard lock(m_mutex);
  return m_failed;
}

void RotatingLog::rotate() {
  m_file.close();
  std::error_code ec;
  auto numbered = [&](int i) { return std::filesystem::path(m_path.string() + "." + std::to_string(i)); };
  std::filesystem::remove(numbered(m_keep), ec);
  for (int i = m_keep - 1; i >= 1; --i) std::filesystem::rename(numbered(i), numbered(i + 1), ec);
  std::filesystem::rename(m_path, numbered(1), ec);
  m_file.open(m_path, std::ios::binary | std::ios::trunc);
  m_size = 0;
}

}  // namespace gpuhost::supervise
