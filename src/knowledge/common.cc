#include "knowledge/common.h"

namespace gpuhost::knowledge {

const char* os_name(Os os) {
  switch (os) {
    case Os::linux: return "linux";
    case Os::windows: return "windows";
  }
  return "unknown";
}

std::optional<Os> parse_os(std::string_view text) {
  if (text == "linux") return Os::linux;
  if (text == "windows") return Os::windows;
  return std::nullopt;
}

const char* confidence_name(Confidence confidence) {
  switch (confidence) {
    case Confidence::confirmed: return "confirmed";
    case Confidence::secondary: return "secondary";
    case Confidence::unofficial: return "unofficial";
    case Confidence::unconfirmed: return "unconfirmed";
  }
  return "unknown";
}

std::optional<Confidence> parse_confidence(std::string_view text) {
  for (Confidence c :
       {Confidence::confirmed, Confidence::secondary, Confidence::unofficial, Confidence::unconfirmed})
    if (text == confidence_name(c)) return c;
  return std::nullopt;
}

const Fact* find_fact(const std::vector<Fact>& facts, std::string_view id) {
  for (const auto& fact : facts)
    if (fact.id == id) return &fact;
  return nullptr;
}

Version major_minor(const Version& version) {
  return Version({version.major(), version.minor()});
}

}  // namespace gpuhost::knowledge
