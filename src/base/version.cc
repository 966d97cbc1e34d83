#include "base/version.h"

#include <cctype>

namespace gpuhost {

std::optional<Version> Version::parse(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i < text.size() && (text[i] == 'v' || text[i] == 'V')) ++i;
  if (i >= text.size() || !std::isdigit(static_cast<unsigned char>(text[i]))) return std::nullopt;
  std::size_t begin = i;
  Version v;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
    long value = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) {
      if (value < 100000000) value = value * 10 + (text[i] - '0');
      ++i;
    }
    v.m_parts.push_back(static_cast<int>(value));
    if (i + 1 < text.size() && text[i] == '.' && std::isdigit(static_cast<unsigned char>(text[i + 1])))
      ++i;
    else
      break;
  }
  v.m_text = std::string(text.substr(begin, i - begin));
  return v;
}

std::string Version::str() const {
  if (!m_text.empty()) return m_text;
  std::string out;
  for (std::size_t i = 0; i < m_parts.size(); ++i) {
    if (i) out += '.';
    out += std::to_string(m_parts[i]);
  }
  return out;
}

std::strong_ordering operator<=>(const Version& a, const Version& b) {
  std::size_t n = std::max(a.m_parts.size(), b.m_parts.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (auto c = a.component(i) <=> b.component(i); c != 0) return c;
  }
  return std::strong_ordering::equal;
}

}  // namespace gpuhost
