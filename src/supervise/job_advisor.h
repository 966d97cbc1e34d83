#pragma once

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "advise/judge.h"
#include "advise/watch.h"
#include "gpu/nvml_session.h"

namespace gpuhost::supervise {

// `gpuhost run`'s advisor: while an attempt's trainer runs, watches it window after window
// (advise::watch: NVML every second, the group's threads at the window's ends) on a thread of
// its own and keeps the newest judgement for the supervisor's loop to journal (an `advice`
// record, doc/advise.md). It reads; it never touches the trainer.
struct AdvisorOptions {
  std::chrono::milliseconds window{std::chrono::seconds(60)};
  std::chrono::milliseconds sample_interval{std::chrono::seconds(1)};
  unsigned local_processes = 1;
  std::vector<std::string> visible_devices;  // the job's CUDA_VISIBLE_DEVICES entries
};

struct AdvisorReport {
  advise::Watched watched;
  std::vector<advise::Finding> findings;
};

class JobAdvisor {
 public:
  explicit JobAdvisor(AdvisorOptions options) : m_options(std::move(options)) {}
  JobAdvisor(const JobAdvisor&) = delete;
  JobAdvisor& operator=(const JobAdvisor&) = delete;
  ~JobAdvisor() { stop(); }

  // Starts watching the trainer whose process group is `group` (a started attempt).
  void watch(long group);
  // Stops watching (the attempt ended): returns within one sample interval.
  void stop();
  // The newest window judged since the last call, if one was.
  [[nodiscard]] std::optional<AdvisorReport> take();

 private:
  void loop(const std::stop_token& stop, long group);

  AdvisorOptions m_options;
  gpu::NvmlSession m_nvml;  // used by the watching thread only, one attempt after the other
  std::mutex m_mutex;
  std::optional<AdvisorReport> m_newest;  // guarded by m_mutex
  std::jthread m_thread;
};

}  // namespace gpuhost::supervise
