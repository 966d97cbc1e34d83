#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace gpuhost::metrics {

// Indices of the points to draw when a series of x.size() points is shown `target` points wide.
// Both keep the first and last point and return indices in increasing order; when
// x.size() <= target every index is returned. Points whose y is NaN/±Inf are always kept (a
// diverged loss must stay visible), on top of the target. x must be non-decreasing.

// Largest-Triangle-Three-Buckets (Steinarsson 2013, "Downsampling Time Series for Visual
// Representation", ch. 4.2): one point per bucket, the one forming the largest triangle with the
// previous choice and the next bucket's average.
[[nodiscard]] std::vector<std::size_t> lttb(std::span<const double> x, std::span<const double> y,
                                            std::size_t target);

// Min-max: per bucket (target / 2 buckets) the lowest and highest point, in x order: keeps every
// spike, which LTTB may smooth away.
[[nodiscard]] std::vector<std::size_t> min_max(std::span<const double> x, std::span<const double> y,
                                               std::size_t target);

}  // namespace gpuhost::metrics
