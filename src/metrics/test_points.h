// Helpers the metrics tests share: the non-finite values a trainer's log can hold, and parsed
// points as a name -> value map.
#pragma once

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "metrics/point.h"

namespace gpuhost::metrics::testing {

inline constexpr double k_nan = std::numeric_limits<double>::quiet_NaN();
inline constexpr double k_inf = std::numeric_limits<double>::infinity();

inline std::map<std::string, double> values_of(const std::vector<Point>& points) {
  std::map<std::string, double> out;
  for (const auto& p : points) out.emplace(p.name, p.value);
  return out;
}

}  // namespace gpuhost::metrics::testing
