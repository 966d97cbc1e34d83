#include "metrics/downsample.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace gpuhost::metrics {
namespace {

// The finite-y points, as positions into x/y: the algorithms run over them, and every other
// point is kept on top. `all` avoids building the list in the common case of no NaN/Inf.
struct FinitePoints {
  std::vector<std::size_t> positions;  // empty when `all`
  std::vector<std::size_t> non_finite;
  bool all = true;

  [[nodiscard]] std::size_t size(std::size_t n) const { return all ? n : positions.size(); }
  [[nodiscard]] std::size_t operator[](std::size_t k) const { return all ? k : positions[k]; }
};

FinitePoints finite_points(std::span<const double> y) {
  FinitePoints f;
  for (std::size_t i = 0; i < y.size(); ++i)
    if (!std::isfinite(y[i])) f.non_finite.push_back(i);
  if (f.non_finite.empty()) return f;
  f.all = false;
  f.positions.reserve(y.size() - f.non_finite.size());
  for (std::size_t i = 0; i < y.size(); ++i)
    if (std::isfinite(y[i])) f.positions.push_back(i);
  return f;
}

std::vector<std::size_t> every_index(std::size_t n) {
  std::vector<std::size_t> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = i;
  return out;
}

// `chosen` (increasing) and the non-finite positions (increasing), merged.
std::vector<std::size_t> with_non_finite(std::vector<std::size_t> chosen, const FinitePoints& f) {
  if (f.non_finite.empty()) return chosen;
  std::vector<std::size_t> out;
  out.reserve(chosen.size() + f.non_finite.size());
  std::merge(chosen.begin(), chosen.end(), f.non_finite.begin(), f.non_finite.end(), std::back_inserter(out));
  return out;
}

// The first and last of the m finite points, for target < 3 (no bucket in between).
std::vector<std::size_t> ends(const FinitePoints& f, std::size_t m) {
  if (m == 0) return {};
  if (m == 1) return {f[0]};
  return {f[0], f[m - 1]};
}

}  // namespace

std::vector<std::size_t> lttb(std::span<const double> x, std::span<const double> y, std::size_t target) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n <= target) return every_index(n);
  const FinitePoints f = finite_points(y.first(n));
  const std::size_t m = f.size(n);
  if (m <= target) return every_index(n);
  if (target < 3) return with_non_finite(ends(f, m), f);

  // The reference implementation's bucketing (sveinn-steinarsson/flot-downsample, jquery.flot.
  // downsample.js): the m - 2 inner points in target - 2 buckets of equal count, bucket i being
  // [floor(i*every)+1, floor((i+1)*every)+1) with every = (m-2)/(target-2); in integers here, so
  // rounding cannot drop the point before the last.
  auto bucket_start = [&](std::size_t i) { return std::min(m, 1 + i * (m - 2) / (target - 2)); };
  std::vector<std::size_t> chosen;
  chosen.reserve(target);
  std::size_t a = 0;  // previous choice, as a position among the finite points
  chosen.push_back(f[0]);
  for (std::size_t i = 0; i + 2 < target; ++i) {
    // Average of the next bucket (the last point alone, for the last bucket).
    std::size_t next_from = bucket_start(i + 1);
    std::size_t next_to = bucket_start(i + 2);
    double avg_x = 0, avg_y = 0;
    for (std::size_t k = next_from; k < next_to; ++k) {
      avg_x += x[f[k]];
      avg_y += y[f[k]];
    }
    const auto count = static_cast<double>(next_to - next_from);
    avg_x /= count;
    avg_y /= count;

    const double ax = x[f[a]];
    const double ay = y[f[a]];
    double best_area = -1;
    std::size_t best = bucket_start(i);
    for (std::size_t k = bucket_start(i); k < bucket_start(i + 1); ++k) {
      // Twice the triangle's area; ties keep the earliest point.
      double area = std::abs((ax - avg_x) * (y[f[k]] - ay) - (ax - x[f[k]]) * (avg_y - ay));
      if (area > best_area) {
        best_area = area;
        best = k;
      }
    }
    chosen.push_back(f[best]);
    a = best;
  }
  chosen.push_back(f[m - 1]);
  return with_non_finite(std::move(chosen), f);
}

std::vector<std::size_t> min_max(std::span<const double> x, std::span<const double> y, std::size_t target) {
  const std::size_t n = std::min(x.size(), y.size());
  if (n <= target) return every_index(n);
  const FinitePoints f = finite_points(y.first(n));
  const std::size_t m = f.size(n);
  if (m <= target) return every_index(n);
  if (target < 4) return with_non_finite(ends(f, m), f);

  // The first and last point plus (target - 2) / 2 buckets of equal count over the points in
  // between, two points each: at most `target` in all.
  const std::size_t buckets = (target - 2) / 2;
  const std::size_t inner = m - 2;
  std::vector<std::size_t> chosen;
  chosen.reserve(2 * buckets + 2);
  chosen.push_back(f[0]);
  for (std::size_t b = 0; b < buckets; ++b) {
    std::size_t from = 1 + b * inner / buckets;
    std::size_t to = 1 + (b + 1) * inner / buckets;
    if (from == to) continue;
    std::size_t lo = from, hi = from;  // ties keep the earliest point
    double lo_y = y[f[from]], hi_y = lo_y;
    for (std::size_t k = from + 1; k < to; ++k) {
      const double v = y[f[k]];
      if (v < lo_y) {
        lo = k;
        lo_y = v;
      }
      if (v > hi_y) {
        hi = k;
        hi_y = v;
      }
    }
    chosen.push_back(f[std::min(lo, hi)]);
    if (lo != hi) chosen.push_back(f[std::max(lo, hi)]);
  }
  chosen.push_back(f[m - 1]);
  return with_non_finite(std::move(chosen), f);
}

}  // namespace gpuhost::metrics
