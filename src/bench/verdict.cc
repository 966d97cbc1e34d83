#include "bench/verdict.h"

#include <algorithm>
#include <cstdio>

namespace gpuhost::bench {

void judge_at_least(Measurement& m, double threshold, std::string expected_text, std::string basis) {
  m.expected = threshold;
  m.expected_text = std::move(expected_text);
  m.basis = std::move(basis);
  m.ratio = threshold > 0 ? std::optional<double>(m.value / threshold) : std::nullopt;
  if (m.value >= threshold)
    m.status = Status::pass;
  else if (m.value >= threshold * 0.9)
    m.status = Status::warn;
  else
    m.status = Status::fail;
}

std::optional<double> pcie_theoretical_gbps(int generation, int width) {
  double x16 = 0;
  switch (generation) {
    case 1: x16 = 4.0; break;
    case 2: x16 = 8.0; break;
    case 3: x16 = 15.754; break;
    case 4: x16 = 31.5; break;
    case 5: x16 = 63.0; break;
    case 6: x16 = 126.0; break;  // derived: 2x Gen5 (64 GT/s, PAM4 with FLIT encoding), approximate
    default: return std::nullopt;
  }
  if (width <= 0) return std::nullopt;
  return x16 * width / 16.0;
}

std::string format_fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::optional<double> spread(const std::vector<double>& values) {
  if (values.size() < 2) return std::nullopt;
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  if (*hi <= 0) return std::nullopt;
  return (*hi - *lo) / *hi;
}

}  // namespace gpuhost::bench
