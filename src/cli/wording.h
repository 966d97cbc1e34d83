#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuhost::cli {

// "1 warning", "2 warnings", "0 warnings"; `plural` for words that do not take an "s"
// ("1 supervisor run", "2 supervisor runs" are "run"/"runs").
inline std::string counted(std::int64_t n, std::string_view singular, std::string_view plural = {}) {
  std::string word(n == 1 ? singular : (plural.empty() ? std::string(singular) + "s" : std::string(plural)));
  return std::to_string(n) + " " + word;
}

}  // namespace gpuhost::cli
