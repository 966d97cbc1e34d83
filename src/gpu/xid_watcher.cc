#include "gpu/xid_watcher.h"

#include <algorithm>

namespace gpuhost::gpu {

using namespace nvml;

XidWatcher::XidWatcher(const NvmlLibrary& nvml, std::vector<nvmlDevice_t> handles)
    : m_nvml(nvml), m_handles(std::move(handles)) {
  const NvmlFunctions& f = nvml.functions();
  m_registration_error.resize(m_handles.size());
  m_states.resize(m_handles.size());
  if (!f.event_set_create || !f.device_register_events || !f.event_set_wait || !f.event_set_free) {
    m_setup_error = m_nvml.issue(NVML_ERROR_FUNCTION_NOT_FOUND);
    return;
  }
  if (nvmlReturn_t status = f.event_set_create(&m_set); status != NVML_SUCCESS) {
    m_set = nullptr;
    m_setup_error = m_nvml.issue(status);
    return;
  }
  bool any = false;
  for (std::size_t i = 0; i < m_handles.size(); ++i) {
    nvmlReturn_t status = m_handles[i]
                              ? f.device_register_events(m_handles[i], nvmlEventTypeXidCriticalError, m_set)
                              : NVML_ERROR_INVALID_ARGUMENT;
    if (status != NVML_SUCCESS)
      m_registration_error[i] = m_nvml.issue(status);
    else
      any = true;
  }
  if (any) m_thread = std::thread([this] { run(); });
}

XidWatcher::~XidWatcher() {
  {
    std::lock_guard lock(m_mutex);
    m_stop = true;
  }
  m_changed.notify_all();
  if (m_thread.joinable()) m_thread.join();
  if (m_set) m_nvml.functions().event_set_free(m_set);
}

void XidWatcher::run() {
  const NvmlFunctions& f = m_nvml.functions();
  const auto timeout_ms = static_cast<unsigned>(k_wait_timeout.count());
  for (;;) {
    {
      std::lock_guard lock(m_mutex);
      if (m_stop) return;
    }
    nvmlEventData_t data{};
    nvmlReturn_t status = f.event_set_wait(m_set, &data, timeout_ms);
    std::unique_lock lock(m_mutex);
    if (status == NVML_SUCCESS) {
      m_wait_error.reset();
      auto it = std::find(m_handles.begin(), m_handles.end(), data.device);
      if (it != m_handles.end() && (data.eventType & nvmlEventTypeXidCriticalError) != 0) {
        XidState& state = m_states[static_cast<std::size_t>(it - m_handles.begin())];
        state.last_xid = static_cast<unsigned>(data.eventData);
        ++state.count;
        state.last_unix = std::chrono::duration_cast<std::chrono::seconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
        ++m_total;
        m_changed.notify_all();
      }
    } else if (status == NVML_ERROR_TIMEOUT || status == NVML_ERROR_GPU_IS_LOST) {
      // A lost GPU shows in its own readings; the other GPUs' events still arrive.
      m_wait_error.reset();
    } else {
      // Do not spin on a wait that fails at once; try again after a pause unless stopped.
      m_wait_error = m_nvml.issue(status);
      m_changed.wait_for(lock, k_wait_timeout, [this] { return m_stop; });
    }
  }
}

Reading<XidState> XidWatcher::reading(unsigned index) const {
  Reading<XidState> out;
  if (m_setup_error) {
    out.issue = m_setup_error;
    return out;
  }
  if (index >= m_handles.size()) {
    out.issue = m_nvml.issue(NVML_ERROR_NOT_FOUND);
    out.issue->message = "this GPU appeared after the Xid listener started; restart gpuhost to watch it";
    return out;
  }
  if (m_registration_error[index]) {
    out.issue = m_registration_error[index];
    return out;
  }
  std::lock_guard lock(m_mutex);
  if (m_wait_error)
    out.issue = m_wait_error;
  else
    out.value = m_states[index];
  return out;
}

bool XidWatcher::wait_for_events(std::uint64_t count, std::chrono::milliseconds limit) const {
  std::unique_lock lock(m_mutex);
  return m_changed.wait_for(lock, limit, [&] { return m_total >= count; });
}

}  // namespace gpuhost::gpu
