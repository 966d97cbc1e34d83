#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "gpu/snapshot.h"

namespace gpuhost::gpu {

// NVML kept open across collections, for a long-running reader such as `gpuhost serve`, with the
// readings one instant cannot give (GpuDevice::xid, ::gpm, ::nvlink_bandwidth):
//   - an XidWatcher thread listening for Xid events since the session opened NVML;
//   - per GPU, the GPM sample of the previous collection (nvmlGpmMetricsGet needs two);
//   - per GPU, the previous NVLink byte counters, for DCGM's bandwidth rate.
// The first collection therefore has no GPM or NVLink rate (NVML_ERROR_NO_DATA, saying so).
//
// NVML is opened (NvmlLibrary::open(), so $GPUHOST_NVML_LIBRARY applies) on the first collect()
// and opened again on a later one while it is unusable; the state above starts over then.
// Not thread-safe: one collect() at a time (the Xid thread is internal). Move-only; the
// destructor stops the Xid thread (within XidWatcher::k_wait_timeout) and frees the GPM samples
// before NVML shuts down.
class NvmlSession {
 public:
  NvmlSession();
  NvmlSession(NvmlSession&&) noexcept;
  NvmlSession& operator=(NvmlSession&&) noexcept;
  ~NvmlSession();

  // collect_snapshot() plus the session readings. Never fails (see collect_snapshot).
  [[nodiscard]] GpuSnapshot collect();

  // Blocks until the Xid thread has seen `count` events in total or `limit` has passed; false
  // when NVML is not open or no GPU could be watched. For tests.
  [[nodiscard]] bool wait_for_xid_events(std::uint64_t count, std::chrono::milliseconds limit) const;

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

}  // namespace gpuhost::gpu
