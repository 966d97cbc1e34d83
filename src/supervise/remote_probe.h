#pragma once

#include <chrono>

#include "base/error.h"
#include "supervise/job.h"

namespace gpuhost::supervise {

// What `gpuhost run` checks of a job's remote before anything exists (no job directory, no
// lock, no trainer), so a typo costs nothing and an unusable remote is known before training.

// The settings alone: the URL parses into a store, an encryption suite exists on this build, a
// key file or key variable given is readable and holds a key. invalid_argument or unsupported
// (exit 2), with the setting named. A spec with no remote passes.
[[nodiscard]] Result<void> check_remote_settings(const JobSpec& spec);

// The store itself: it can be listed, and a small probe object can be written and deleted at
// its prefix (a bucket that is missing, credentials that are refused, an endpoint that does not
// answer). Retries are few and short, so an unreachable endpoint is reported within about
// `budget`. Errors say what failed (unavailable / permission_denied / io_error / timeout), with
// secrets of the URL redacted. A spec with no remote passes.
[[nodiscard]] Result<void> probe_remote(const JobSpec& spec, std::chrono::milliseconds budget);

}  // namespace gpuhost::supervise
