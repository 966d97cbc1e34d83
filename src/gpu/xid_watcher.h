#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "gpu/nvml_library.h"
#include "gpu/snapshot.h"

namespace gpuhost::gpu {

// Listens for Xid critical-error events (nvmlEventTypeXidCriticalError) on every GPU, on a thread
// of its own, the way DCGM feeds dcgm-exporter's DCGM_FI_DEV_XID_ERRORS: nvmlEventSetCreate, then
// nvmlDeviceRegisterEvents per GPU, then nvmlEventSetWait_v2 in a loop (repo NVIDIA/DCGM
// dcgmlib/src/DcgmCacheManager.cpp). An Xid is only seen while the watcher runs: one from before
// it started is in the kernel log, which `gpuhost doctor` reads.
//
// REQUIRES: `nvml` is initialised and outlives the watcher; `handles[i]` is GPU i's handle from
// that library (null for a GPU without one). The destructor stops the thread, waiting at most one
// wait timeout (k_wait_timeout), and frees the event set. Not copyable or movable.
// Thread-safe: reading() and wait_for_events() may be called from any thread.
class XidWatcher {
 public:
  static constexpr std::chrono::milliseconds k_wait_timeout{250};

  XidWatcher(const NvmlLibrary& nvml, std::vector<nvml::nvmlDevice_t> handles);
  XidWatcher(const XidWatcher&) = delete;
  XidWatcher& operator=(const XidWatcher&) = delete;
  ~XidWatcher();

  // GPU `index`'s last Xid and count since the watcher started, or why its events cannot be
  // watched (the event functions' NVML status; NVML_ERROR_NOT_FOUND for a GPU the watcher was not
  // started with).
  [[nodiscard]] Reading<XidState> reading(unsigned index) const;

  // Blocks until `count` events have arrived in total or `limit` has passed; true in the first
  // case. For tests, which cannot know when the thread has delivered an event otherwise.
  [[nodiscard]] bool wait_for_events(std::uint64_t count, std::chrono::milliseconds limit) const;

 private:
  void run();

  // Fixed after construction.
  const NvmlLibrary& m_nvml;
  const std::vector<nvml::nvmlDevice_t> m_handles;
  nvml::nvmlEventSet_t m_set = nullptr;
  std::optional<NvmlIssue> m_setup_error;                      // the event set could not be created
  std::vector<std::optional<NvmlIssue>> m_registration_error;  // per GPU

  mutable std::mutex m_mutex;
  mutable std::condition_variable m_changed;
  // Guarded by m_mutex.
  std::vector<XidState> m_states;
  std::uint64_t m_total = 0;
  std::optional<NvmlIssue> m_wait_error;  // the last wait failed with this (not TIMEOUT)
  bool m_stop = false;

  std::thread m_thread;  // last: started once everything above is set
};

}  // namespace gpuhost::gpu
