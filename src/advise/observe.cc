#include "advise/observe.h"

#include <algorithm>
#include <map>
#include <utility>

namespace gpuhost::advise {

namespace {

struct Mean {
  double sum = 0;
  unsigned count = 0;
  void add(double value) {
    sum += value;
    ++count;
  }
  [[nodiscard]] std::optional<double> value() const {
    return count ? std::optional<double>(sum / count) : std::nullopt;
  }
};

constexpr std::uint64_t k_thermal_bits =
    gpu::clocks_event::sw_thermal_slowdown | gpu::clocks_event::hw_thermal_slowdown;
constexpr std::uint64_t k_power_bits =
    gpu::clocks_event::sw_power_cap | gpu::clocks_event::hw_power_brake_slowdown;

}  // namespace

std::vector<GpuWindow> summarize_gpus(const std::vector<gpu::GpuSnapshot>& samples) {
  struct Accumulator {
    GpuWindow window;
    Mean busy, tensor, graphics, pcie_rx;
    std::optional<double> memory;
    unsigned clock_samples = 0, thermal = 0, power = 0;
  };
  std::map<unsigned, Accumulator> by_index;
  for (const gpu::GpuSnapshot& snapshot : samples) {
    if (!snapshot.available) continue;
    for (const gpu::GpuDevice& d : snapshot.devices) {
      if (d.handle_error || d.lost) continue;
      Accumulator& a = by_index[d.index];
      a.window.index = d.index;
      a.window.name = d.name;
      if (d.cc_major.has_value()) a.window.cc_major = *d.cc_major;
      ++a.window.samples;
      // In MIG mode NVML gives no utilisation; a slice's GPU instance's GPM graphics activity (the
      // share of time its graphics engine was active) stands in for it.
      if (d.utilization.has_value())
        a.busy.add((*d.utilization).gpu_percent);
      else if (d.gpm.has_value() && d.mig.has_value() && (*d.mig).current &&
               (*d.gpm).graphics_util_percent.has_value())
        a.busy.add(*(*d.gpm).graphics_util_percent);
      if (d.memory.has_value() && (*d.memory).total_bytes > 0) {
        const double share =
            static_cast<double>((*d.memory).used_bytes) / static_cast<double>((*d.memory).total_bytes);
        a.memory = std::max(a.memory.value_or(0), share);
      }
      // An idle GPU drops its clocks (GpuIdle, 0x1): only busy samples say whether it is held back.
      if (d.clocks_event_reasons.has_value() && !(*d.clocks_event_reasons & gpu::clocks_event::gpu_idle)) {
        ++a.clock_samples;
        if (*d.clocks_event_reasons & k_thermal_bits) ++a.thermal;
        if (*d.clocks_event_reasons & k_power_bits) ++a.power;
      }
      if (d.gpm.has_value()) {
        const gpu::GpmActivity& g = *d.gpm;
        if (g.tensor_util_percent.has_value()) a.tensor.add(*g.tensor_util_percent);
        if (g.graphics_util_percent.has_value()) a.graphics.add(*g.graphics_util_percent);
        if (g.pcie_rx_mib_per_s.has_value()) a.pcie_rx.add(*g.pcie_rx_mib_per_s);
      }
    }
  }
  std::vector<GpuWindow> out;
  for (auto& [index, a] : by_index) {
    a.window.busy_percent = a.busy.value();
    a.window.memory_used_share = a.memory;
    if (a.clock_samples) {
      a.window.thermal_share = static_cast<double>(a.thermal) / a.clock_samples;
      a.window.power_share = static_cast<double>(a.power) / a.clock_samples;
    }
    a.window.tensor_percent = a.tensor.value();
    a.window.graphics_percent = a.graphics.value();
    a.window.pcie_rx_mib_per_s = a.pcie_rx.value();
    out.push_back(std::move(a.window));
  }
  return out;
}

std::vector<long> loader_worker_pids(const platform::GroupActivity& group) {
  std::map<long, const platform::GroupProcess*> by_pid;
  for (const auto& p : group.processes) by_pid[p.pid] = &p;
  std::vector<long> workers;
  for (const auto& p : group.processes) {
    bool worker = p.name == "pt_data_worker" ||
                  p.command_line.find("multiprocessing.spawn") != std::string::npos ||
                  p.command_line.find("multiprocessing.forkserver") != std::string::npos;
    if (const auto parent = by_pid.find(p.ppid); !worker && parent != by_pid.end())
      worker = !p.command_line.empty() && p.command_line == parent->second->command_line;
    if (worker) workers.push_back(p.pid);
  }
  return workers;
}

HostWindow summarize_host(const HostReadings& before, const HostReadings& after, double seconds,
                          unsigned cpus) {
  HostWindow h;
  h.seconds = seconds;
  h.cpus = std::max(cpus, 1u);
  if (seconds <= 0) return h;
  std::map<long, const platform::ThreadTimes*> start;
  for (const auto& t : before.group.threads) start[t.tid] = &t;
  // Per loader worker process: the CPU its threads used, and its busiest thread's
  // running-or-runnable share (a worker is one process; its main thread does the work).
  struct Worker {
    double cores = 0;
    double busy = 0;
  };
  std::map<long, Worker> workers;
  for (long pid : loader_worker_pids(after.group)) workers[pid] = Worker{};
  for (const auto& t : after.group.threads) {
    const auto was = start.find(t.tid);
    const platform::ThreadTimes* old = was == start.end() ? nullptr : was->second;
    const double cores = std::max(0.0, t.cpu_seconds - (old ? old->cpu_seconds : 0.0)) / seconds;
    double waited = 0;
    if (t.runqueue_seconds)
      waited = std::max(0.0, *t.runqueue_seconds - (old && old->runqueue_seconds ? *old->runqueue_seconds : 0.0));
    const double busy = std::min(1.0, cores + waited / seconds);
    if (t.name == "pt_data_pin") h.pin_thread = true;
    if (const auto worker = workers.find(t.pid); worker != workers.end()) {
      worker->second.cores += cores;
      worker->second.busy = std::max(worker->second.busy, busy);
      continue;
    }
    if (h.main_thread_name.empty() || busy > h.main_thread_busy) {
      h.main_thread_cores = cores;
      h.main_thread_busy = busy;
      h.main_thread_name = t.name;
    }
  }
  h.loader_workers = static_cast<unsigned>(workers.size());
  if (!workers.empty()) {
    for (const auto& [pid, w] : workers) {
      h.loader_cores_mean += w.cores;
      h.loader_busy_mean += w.busy;
    }
    h.loader_cores_mean /= static_cast<double>(workers.size());
    h.loader_busy_mean /= static_cast<double>(workers.size());
  }
  if (before.group.io_visible && after.group.io_visible && after.group.read_bytes >= before.group.read_bytes)
    h.read_mib_per_s =
        static_cast<double>(after.group.read_bytes - before.group.read_bytes) / (1024.0 * 1024.0) / seconds;
  if (before.group.faults_visible && after.group.faults_visible && after.group.major_faults >= before.group.major_faults)
    h.major_faults_per_s =
        static_cast<double>(after.group.major_faults - before.group.major_faults) / seconds;
  if (before.swapped_in_pages && after.swapped_in_pages &&
      *after.swapped_in_pages >= *before.swapped_in_pages)
    h.swap_in_pages_per_s = static_cast<double>(*after.swapped_in_pages - *before.swapped_in_pages) / seconds;
  h.io_pressure_percent = after.io_pressure_percent;
  h.cpu_pressure_percent = after.cpu_pressure_percent;
  return h;
}

}  // namespace gpuhost::advise
