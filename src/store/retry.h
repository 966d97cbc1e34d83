#pragma once

#include <atomic>
#include <chrono>

#include "base/error.h"

namespace gpuhost::store {

// How S3 calls retry transient failures: 5xx, SlowDown, RequestTimeout, and transport failures
// (connection refused or reset, stalls, truncated bodies). Every call the store makes is
// idempotent, so each may be repeated: PUT and UploadPart rewrite the same bytes, GET/HEAD/LIST
// read, DELETE and AbortMultipartUpload of a missing thing succeed, a repeated
// CompleteMultipartUpload is recognised (s3_store.cc), a repeated CreateMultipartUpload leaves at
// most an orphan upload that abort_stale_uploads removes.
struct RetryPolicy {
  int max_attempts = 6;  // the first try included
  std::chrono::milliseconds base_delay{200};
  std::chrono::milliseconds max_delay{std::chrono::seconds(20)};

  // The wait before retry number `retry` (1 for the first retry) given a uniform draw in [0, 1):
  // "full jitter", uniform in [0, min(max_delay, base_delay * 2^(retry-1))] (Marc Brooker,
  // "Exponential Backoff And Jitter", AWS Architecture Blog, 2015). Pure.
  [[nodiscard]] std::chrono::milliseconds delay(int retry, double unit_draw) const;
};

// A uniform draw in [0, 1) from a per-thread generator seeded from std::random_device.
[[nodiscard]] double random_unit();

// Whether a transport error (platform::https_request) is worth another try: io_error, timeout,
// unavailable. parse_error (not HTTP, body over the limit) and argument errors are not.
[[nodiscard]] bool transport_error_is_transient(const Error& error);

// Sleeps for `duration`, waking every 50 ms to look at *cancel; false when cancelled.
[[nodiscard]] bool sleep_unless_cancelled(std::chrono::milliseconds duration,
                                          const std::atomic<bool>* cancel);

}  // namespace gpuhost::store
