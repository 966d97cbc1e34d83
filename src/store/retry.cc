#include "store/retry.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <thread>

namespace gpuhost::store {

std::chrono::milliseconds RetryPolicy::delay(int retry, double unit_draw) const {
  double cap = static_cast<double>(max_delay.count());
  double ceiling =
      std::min(cap, static_cast<double>(base_delay.count()) * std::ldexp(1.0, std::max(0, retry - 1)));
  double draw = std::clamp(unit_draw, 0.0, 1.0);
  return std::chrono::milliseconds(static_cast<long long>(ceiling * draw));
}

double random_unit() {
  thread_local std::mt19937_64 generator{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(generator);
}

bool transport_error_is_transient(const Error& error) {
  return error.code == ErrorCode::io_error || error.code == ErrorCode::timeout ||
         error.code == ErrorCode::unavailable;
}

bool sleep_unless_cancelled(std::chrono::milliseconds duration, const std::atomic<bool>* cancel) {
  auto end = std::chrono::steady_clock::now() + duration;
  for (;;) {
    if (cancel && cancel->load()) return false;
    auto left = end - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return true;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(left, std::chrono::milliseconds(50)));
  }
}

}  // namespace gpuhost::store
