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

void OutputTail::write(std::string_view text) {
  std::lock_guard lock(m_mutex);
  m_text.append(text);
  if (m_text.size() > 2 * m_max) m_text.erase(0, m_text.size() - m_max);
}

std::vector<std::string> OutputTail::last_lines(std::size_t count) const {
  std::string text;
  {
    std::lock_guard lock(m_mutex);
    text = m_text.size() > m_max ? m_text.substr(m_text.size() - m_max) : m_text;
  }
  std::vector<std::string> lines;
  std::size_t end = text.size();
  while (end > 0 && lines.size() < count) {
    std::size_t start = text.rfind('\n', end - 1);
    std::size_t from = start == std::string::npos ? 0 : start + 1;
    std::string line = text.substr(from, end - from);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    // Progress bars redraw with '\r': the last frame is what the user saw.
    if (auto cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    if (line.size() > 300) line = line.substr(0, 300) + "...";
    if (!line.empty()) lines.push_back(std::move(line));
    if (start == std::string::npos) break;
    end = start;
  }
  return {lines.rbegin(), lines.rend()};
}

void OutputTail::clear() {
  std::lock_guard lock(m_mutex);
  m_text.clear();
}

}  // namespace gpuhost::supervise
