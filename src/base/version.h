#pragma once

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuhost {

// A dotted numeric version: "535.104.05", "12.4", "2.1.0+cu121" (the local part after '+' and
// any pre-release suffix are kept as text but ignored by comparison). Missing components compare
// as zero, so "12.4" == "12.4.0".
class Version {
 public:
  Version() = default;
  explicit Version(std::vector<int> parts) : m_parts(std::move(parts)) {}

  // Parses the leading dotted numbers; nullopt when the text does not start with a digit.
  [[nodiscard]] static std::optional<Version> parse(std::string_view text);

  [[nodiscard]] int major() const { return component(0); }
  [[nodiscard]] int minor() const { return component(1); }
  [[nodiscard]] int patch() const { return component(2); }
  [[nodiscard]] int component(std::size_t i) const { return i < m_parts.size() ? m_parts[i] : 0; }
  [[nodiscard]] const std::vector<int>& parts() const { return m_parts; }
  [[nodiscard]] bool empty() const { return m_parts.empty(); }

  // Text form. Driver versions keep their zero padding ("535.104.05") because the original text
  // is stored; a Version built from parts prints plain numbers.
  [[nodiscard]] std::string str() const;

  friend std::strong_ordering operator<=>(const Version& a, const Version& b);
  friend bool operator==(const Version& a, const Version& b) { return (a <=> b) == 0; }

 private:
  std::vector<int> m_parts;
  std::string m_text;
};

}  // namespace gpuhost
