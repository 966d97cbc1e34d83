#include "metrics/downsample.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "metrics/test_points.h"

namespace gpuhost::metrics {
namespace {

using Indices = std::vector<std::size_t>;
using testing::k_inf;
using testing::k_nan;

std::vector<double> iota_x(std::size_t n) {
  std::vector<double> x(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<double>(i);
  return x;
}

TEST(Lttb, PicksTheLargestTriangleInEachBucket) {
  // 7 points, target 4: first and last plus 2 buckets over the 5 inner points; bucket i is
  // [1 + i*5/2, 1 + (i+1)*5/2) in integers: {1,2} and {3,4,5}.
  // Bucket {1,2}: a = (0,0), next bucket's average (4, 4/3); twice the area is
  //   |(0-4)(y-0) - (0-x)(4/3)| = |-4y + 4x/3|: point 1 (1,2) -> 20/3, point 2 (2,0) -> 8/3. Picks 1.
  // Bucket {3,4,5}: a = (1,2), next "bucket" is the last point (6,0); twice the area is
  //   |(1-6)(y-2) - (1-x)(0-2)|: point 3 (3,5) -> 19, point 4 (4,0) -> 4, point 5 (5,-1) -> 7. Picks 3.
  std::vector<double> x = iota_x(7);
  std::vector<double> y = {0, 2, 0, 5, 0, -1, 0};
  EXPECT_EQ(lttb(x, y, 4), (Indices{0, 1, 3, 6}));
}

TEST(Lttb, KeepsNonFinitePointsOnTopAndSkipsThemInTheArea) {
  // The same series with point 4 a NaN: LTTB runs over the 6 finite points (positions
  // 0,1,2,3,5,6), 2 buckets over 4 inner ones: {1,2} and {3,5}.
  // Bucket {1,2}: next average ((3+5)/2, (5-1)/2) = (4,2); |-4y + 2x|: point 1 -> 6, point 2 -> 4.
  // Bucket {3,5}: a = (1,2), next = (6,0); point 3 -> 19, point 5 -> 7. Then the NaN joins.
  std::vector<double> x = iota_x(7);
  std::vector<double> y = {0, 2, 0, 5, k_nan, -1, 0};
  EXPECT_EQ(lttb(x, y, 4), (Indices{0, 1, 3, 4, 6}));
  y[4] = -k_inf;
  EXPECT_EQ(lttb(x, y, 4), (Indices{0, 1, 3, 4, 6}));
}

TEST(Lttb, ReturnsEveryIndexWhenTheSeriesFits) {
  std::vector<double> x = iota_x(5);
  std::vector<double> y = {1, 2, 3, 4, 5};
  EXPECT_EQ(lttb(x, y, 5), (Indices{0, 1, 2, 3, 4}));
  EXPECT_EQ(lttb(x, y, 100), (Indices{0, 1, 2, 3, 4}));
  // Four finite points and two NaNs with target 4: the finite ones fit, so everything is shown.
  std::vector<double> x6 = iota_x(6);
  std::vector<double> y6 = {1, k_nan, 2, 3, k_nan, 4};
  EXPECT_EQ(lttb(x6, y6, 4), (Indices{0, 1, 2, 3, 4, 5}));
}

TEST(Lttb, HandlesEmptyInputAndTargetsBelowThree) {
  EXPECT_TRUE(lttb({}, {}, 10).empty());
  EXPECT_TRUE(lttb({}, {}, 0).empty());
  std::vector<double> x = iota_x(5);
  std::vector<double> y = {1, 9, 3, 7, 5};
  EXPECT_EQ(lttb(x, y, 0), (Indices{0, 4}));
  EXPECT_EQ(lttb(x, y, 1), (Indices{0, 4}));
  EXPECT_EQ(lttb(x, y, 2), (Indices{0, 4}));
  y[2] = k_nan;
  EXPECT_EQ(lttb(x, y, 2), (Indices{0, 2, 4}));
}

TEST(Lttb, EqualXValuesPickTheFirstPointOfEachBucket) {
  // With every x equal every triangle is flat (area 0): ties keep the earliest point. Buckets
  // of the 8 inner points for target 4: {1,2,3,4} and {5,6,7,8}.
  std::vector<double> x(10, 42.0);
  std::vector<double> y = {0, 3, 1, 4, 1, 5, 9, 2, 6, 5};
  EXPECT_EQ(lttb(x, y, 4), (Indices{0, 1, 5, 9}));
}

TEST(MinMax, KeepsTheLowestAndHighestOfEachBucket) {
  // 10 points, target 6: first and last plus (6-2)/2 = 2 buckets over the 8 inner points,
  // {1,2,3,4} (y 1,9,3,3: min at 1, max at 2) and {5,6,7,8} (y 7,0,2,8: min at 6, max at 8).
  std::vector<double> x = iota_x(10);
  std::vector<double> y = {5, 1, 9, 3, 3, 7, 0, 2, 8, 4};
  EXPECT_EQ(min_max(x, y, 6), (Indices{0, 1, 2, 6, 8, 9}));
}

TEST(MinMax, AFlatBucketGivesOnePointAndNonFiniteOnesAreKept) {
  // Buckets {1,2,3,4} (all 7: lowest and highest are point 1) and {5,6,8,9} of the finite
  // positions (point 7 is +Inf, kept on top): y 2,3,1,1 -> min 8, max 6.
  std::vector<double> x = iota_x(11);
  std::vector<double> y = {0, 7, 7, 7, 7, 2, 3, k_inf, 1, 1, 0};
  EXPECT_EQ(min_max(x, y, 6), (Indices{0, 1, 6, 7, 8, 10}));
}

TEST(MinMax, ASingleSpikeSurvives) {
  const std::size_t n = 100'000;
  std::vector<double> x = iota_x(n);
  std::vector<double> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = std::sin(static_cast<double>(i) / 5000.0);
  y[43'210] = 1000;
  y[77'777] = -1000;
  Indices picked = min_max(x, y, 200);
  EXPECT_TRUE(std::ranges::binary_search(picked, std::size_t{43'210}));
  EXPECT_TRUE(std::ranges::binary_search(picked, std::size_t{77'777}));
  EXPECT_LE(picked.size(), 200u);
}

TEST(MinMax, HandlesEmptyInputAndSmallTargets) {
  EXPECT_TRUE(min_max({}, {}, 0).empty());
  std::vector<double> x = iota_x(5);
  std::vector<double> y = {1, 9, 3, 7, 5};
  EXPECT_EQ(min_max(x, y, 0), (Indices{0, 4}));
  EXPECT_EQ(min_max(x, y, 3), (Indices{0, 4}));
  EXPECT_EQ(min_max(x, y, 4), (Indices{0, 1, 2, 4}));  // one bucket {1,2,3}: highest 1, lowest 2
}

// Sorted, unique, in range, first and last kept, every non-finite point kept, at most
// max(target, 2) finite points, and everything when the series fits.
void expect_invariants(const Indices& picked, const std::vector<double>& y, std::size_t target,
                       const std::string& what) {
  SCOPED_TRACE(what);
  const std::size_t n = y.size();
  if (n == 0) {
    EXPECT_TRUE(picked.empty());
    return;
  }
  ASSERT_FALSE(picked.empty());
  EXPECT_TRUE(std::ranges::adjacent_find(picked, std::greater_equal<>()) == picked.end());
  EXPECT_EQ(picked.front(), 0u);
  EXPECT_EQ(picked.back(), n - 1);
  std::size_t non_finite = 0;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(y[i])) {
      ++non_finite;
      EXPECT_TRUE(std::ranges::binary_search(picked, i)) << "non-finite point " << i << " dropped";
    }
  if (n <= target || n - non_finite <= target)
    EXPECT_EQ(picked.size(), n);
  else
    EXPECT_LE(picked.size(), std::max<std::size_t>(target, 2) + non_finite);
}

TEST(Downsample, KeepInvariantsOnRandomSeries) {
  std::mt19937_64 rng(20240607);
  for (int round = 0; round < 300; ++round) {
    std::size_t n = std::uniform_int_distribution<std::size_t>(0, 3000)(rng);
    std::size_t target = std::uniform_int_distribution<std::size_t>(0, 400)(rng);
    std::vector<double> x(n), y(n);
    double t = 1.7e9;
    for (std::size_t i = 0; i < n; ++i) {
      t += static_cast<double>(std::uniform_int_distribution<int>(0, 2)(rng));  // repeats in x
      x[i] = t;
      int kind = std::uniform_int_distribution<int>(0, 199)(rng);
      y[i] = kind == 0   ? k_nan
             : kind == 1 ? k_inf
             : kind == 2 ? -k_inf
                         : std::normal_distribution<double>(0, 1)(rng);
    }
    std::string what = "n=" + std::to_string(n) + " target=" + std::to_string(target);
    expect_invariants(lttb(x, y, target), y, target, "lttb " + what);
    expect_invariants(min_max(x, y, target), y, target, "min_max " + what);
  }
}

}  // namespace
}  // namespace gpuhost::metrics
