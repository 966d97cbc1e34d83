#include "supervise/job_advisor.h"

#include <utility>

namespace gpuhost::supervise {

void JobAdvisor::watch(long group) {
  stop();
  m_thread = std::jthread([this, group](std::stop_token stop) { loop(stop, group); });
}

void JobAdvisor::stop() {
  if (!m_thread.joinable()) return;
  m_thread.request_stop();
  m_thread.join();
}

std::optional<AdvisorReport> JobAdvisor::take() {
  std::lock_guard lock(m_mutex);
  return std::exchange(m_newest, std::nullopt);
}

void JobAdvisor::loop(const std::stop_token& stop, long group) {
  advise::WatchOptions options;
  options.group = group;
  options.window = m_options.window;
  options.sample_interval = m_options.sample_interval;
  options.local_processes = m_options.local_processes;
  options.visible_devices = m_options.visible_devices;
  while (!stop.stop_requested()) {
    auto watched = advise::watch(options, m_nvml, stop);
    if (!watched) return;  // stopped, or the trainer ended: the attempt is over
    AdvisorReport report{std::move(*watched), {}};
    report.findings = advise::judge(report.watched.observation);
    std::lock_guard lock(m_mutex);
    m_newest = std::move(report);
  }
}

}  // namespace gpuhost::supervise
