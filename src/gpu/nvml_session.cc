#include "gpu/nvml_session.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/collector.h"
#include "gpu/nvml_hold.h"
#include "gpu/nvml_library.h"
#include "gpu/xid_watcher.h"
#include "platform/process.h"

namespace gpuhost::gpu {
namespace {

using namespace nvml;
using Clock = std::chrono::steady_clock;

constexpr unsigned k_max_devices = 256;  // as collect_snapshot

// The GPM metrics gpuhost reads, in GpmActivity order. DCGM maps its profiling fields to the same
// ones when a GPU supports GPM (repo NVIDIA/DCGM dcgmlib/src/dcgm_fields.cpp
// DcgmFieldIdToNvmlGpmMetricId): GR_ENGINE_ACTIVE, PIPE_TENSOR_ACTIVE, DRAM_ACTIVE, PCIE_TX/RX_BYTES.
constexpr unsigned k_gpm_metrics[] = {NVML_GPM_METRIC_GRAPHICS_UTIL, NVML_GPM_METRIC_ANY_TENSOR_UTIL,
                                      NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_GPM_METRIC_PCIE_TX_PER_SEC,
                                      NVML_GPM_METRIC_PCIE_RX_PER_SEC};
constexpr unsigned k_gpm_metric_count = sizeof k_gpm_metrics / sizeof k_gpm_metrics[0];

// One GPU's or MIG GPU instance's GPM samples: `previous` is the baseline of the next
// nvmlGpmMetricsGet.
struct GpmSamples {
  std::string uuid;  // the GPU's, or the instance's first MIG device's (new when it is made again)
  bool checked = false;                  // support decided (once per GPU and session)
  std::optional<NvmlIssue> unsupported;  // why GPM cannot be read on this GPU
  nvmlGpmSample_t previous = nullptr;
  nvmlGpmSample_t current = nullptr;
  bool has_previous = false;
  Clock::time_point previous_time;
};

struct NvlinkBaseline {
  std::string uuid;
  bool set = false;
  std::uint64_t sum_kib = 0;
  std::int64_t timestamp_us = 0;
};

}  // namespace

struct NvmlSession::State {
  // Declared first so it is destroyed last: everything below uses it.
  std::optional<NvmlLibrary> nvml;
  std::vector<nvmlDevice_t> handles;
  std::unique_ptr<XidWatcher> xid;
  std::vector<GpmSamples> gpm;
  std::vector<GpmSamples> instance_gpm;  // MIG GPU instances seen in the last collection
  std::vector<NvlinkBaseline> nvlink;
  std::unique_ptr<nvmlGpmMetricsGet_t> gpm_request;  // 13 KB; kept to avoid reallocating

  // Stepping aside for a MIG mode change (gpu/nvml_hold.h): the hold is checked before each
  // collection and, while NVML is open, by `watcher` every k_hold_poll.
  static constexpr std::chrono::milliseconds k_hold_poll{250};
  std::filesystem::path hold_dir = nvml_hold_directory();
  std::optional<NvmlReaderRegistration> registration;
  std::mutex mutex;  // collect() and the watcher
  std::condition_variable wake;
  bool stopping = false;  // guarded by mutex
  std::thread watcher;

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    {
      std::lock_guard lock(mutex);
      stopping = true;
    }
    wake.notify_all();
    if (watcher.joinable()) watcher.join();
    reset();
  }

  // NVML shut down and this reader unregistered; open() starts again.
  void close() {
    reset();
    nvml.reset();
    registration.reset();
  }

  void watch_hold() {
    std::unique_lock lock(mutex);
    while (!stopping) {
      wake.wait_for(lock, k_hold_poll, [&] { return stopping; });
      if (stopping || !nvml || !nvml->initialized()) continue;
      lock.unlock();
      const bool held = nvml_hold_holder(hold_dir).has_value();
      lock.lock();
      if (held && !stopping) close();
    }
  }

  NvmlIssue issue(int status, std::string message = {}) const {
    NvmlIssue out = nvml->issue(status);
    if (!message.empty()) out.message = std::move(message);
    return out;
  }

  // Stops the listener and frees the samples while NVML is still initialised.
  void reset() {
    xid.reset();
    if (nvml && nvml->initialized()) {
      const NvmlFunctions& f = nvml->functions();
      for (auto* list : {&gpm, &instance_gpm})
        for (auto& g : *list) free_samples(f, g);
    }
    gpm.clear();
    instance_gpm.clear();
    nvlink.clear();
    handles.clear();
  }

  void open() {
    if (nvml && nvml->initialized()) return;
    reset();
    nvml.reset();  // shut the old one down before loading again
    nvml.emplace(NvmlLibrary::open());
    if (!nvml->initialized()) return;
    const NvmlFunctions& f = nvml->functions();
    unsigned count = 0;
    if (!f.device_get_count || f.device_get_count(&count) != NVML_SUCCESS) count = 0;
    handles.assign(std::min(count, k_max_devices), nullptr);
    for (unsigned i = 0; i < handles.size(); ++i)
      if (!f.device_get_handle_by_index || f.device_get_handle_by_index(i, &handles[i]) != NVML_SUCCESS)
        handles[i] = nullptr;
    xid = std::make_unique<XidWatcher>(*nvml, handles);
    registration.reset();
    if (auto taken = NvmlReaderRegistration::take(
            hold_dir, "gpuhost pid " + std::to_string(platform::current_process_id()) +
                          " (serve, top, advise or a run)"))
      registration.emplace(std::move(*taken));
    if (!watcher.joinable()) watcher = std::thread([this] { watch_hold(); });
  }

  // The handle the session holds for GPU `index`, or nullptr.
  nvmlDevice_t handle(unsigned index) const { return index < handles.size() ? handles[index] : nullptr; }

  void decide_gpm_support(GpmSamples& g, nvmlDevice_t h) {
    g.checked = true;
    const NvmlFunctions& f = nvml->functions();
    if (!f.gpm_query_device_support || !f.gpm_sample_alloc || !f.gpm_sample_free || !f.gpm_sample_get ||
        !f.gpm_metrics_get) {
      g.unsupported = issue(NVML_ERROR_FUNCTION_NOT_FOUND,
                            "this NVML has no GPM functions (nvmlGpm*, drivers R520 and later)");
      return;
    }
    nvmlGpmSupport_t support{};
    support.version = NVML_GPM_SUPPORT_VERSION;
    if (nvmlReturn_t status = f.gpm_query_device_support(h, &support); status != NVML_SUCCESS) {
      g.unsupported = issue(status);
      return;
    }
    if (support.isSupportedDevice == 0) {
      g.unsupported =
          issue(NVML_ERROR_NOT_SUPPORTED,
                "GPM (GPU Performance Monitoring) needs a Hopper or newer GPU "
                "(nvmlGpmQueryDeviceSupport); DCGM's profiling module is the only source before that");
      return;
    }
    for (nvmlGpmSample_t* sample : {&g.previous, &g.current}) {
      if (nvmlReturn_t status = f.gpm_sample_alloc(sample); status != NVML_SUCCESS) {
        *sample = nullptr;
        g.unsupported = issue(status);
        return;
      }
    }
  }

  Reading<double> gpm_metric(const nvmlGpmMetric_t& m) const {
    Reading<double> out;
    if (m.nvmlReturn != NVML_SUCCESS)
      out.issue = issue(m.nvmlReturn);
    else if (std::isnan(m.value))
      out.issue = issue(NVML_ERROR_NO_DATA, "NVML computed no value for this GPM metric");
    else
      out.value = m.value;
    return out;
  }

  static void free_samples(const NvmlFunctions& f, GpmSamples& g) {
    for (nvmlGpmSample_t s : {g.previous, g.current})
      if (s && f.gpm_sample_free) f.gpm_sample_free(s);
    g.previous = g.current = nullptr;
  }

  // Takes the next sample with `take` (nvmlGpmSampleGet or nvmlGpmMigSampleGet into the given
  // sample) and gives the activity since the previous one.
  template <typename Take>
  Reading<GpmActivity> next_activity(GpmSamples& g, Take take) {
    Reading<GpmActivity> out;
    const NvmlFunctions& f = nvml->functions();
    nvmlReturn_t status = take(g.current);
    const Clock::time_point now = Clock::now();
    if (status != NVML_SUCCESS) {
      out.issue = issue(status);  // the previous sample stays the baseline
      return out;
    }
    if (!g.has_previous) {
      out.issue = issue(NVML_ERROR_NO_DATA,
                        "first GPM sample: the metrics are averages between two collections, so they "
                        "start with the next one");
    } else {
      if (!gpm_request) gpm_request = std::make_unique<nvmlGpmMetricsGet_t>();
      nvmlGpmMetricsGet_t& request = *gpm_request;
      request = nvmlGpmMetricsGet_t{};
      request.version = NVML_GPM_METRICS_GET_VERSION;
      request.numMetrics = k_gpm_metric_count;
      request.sample1 = g.previous;
      request.sample2 = g.current;
      for (unsigned k = 0; k < k_gpm_metric_count; ++k) request.metrics[k].metricId = k_gpm_metrics[k];
      status = f.gpm_metrics_get(&request);
      if (status != NVML_SUCCESS) {
        out.issue = issue(status);
      } else {
        GpmActivity a;
        a.interval_s = std::chrono::duration<double>(now - g.previous_time).count();
        a.graphics_util_percent = gpm_metric(request.metrics[0]);
        a.tensor_util_percent = gpm_metric(request.metrics[1]);
        a.dram_bw_util_percent = gpm_metric(request.metrics[2]);
        a.pcie_tx_mib_per_s = gpm_metric(request.metrics[3]);
        a.pcie_rx_mib_per_s = gpm_metric(request.metrics[4]);
        out.value = std::move(a);
      }
    }
    std::swap(g.previous, g.current);
    g.previous_time = now;
    g.has_previous = true;
    return out;
  }

  void fill_gpm(unsigned index, GpuDevice& d) {
    nvmlDevice_t h = handle(index);
    if (d.lost) {
      d.gpm.issue = issue(NVML_ERROR_GPU_IS_LOST);
      return;
    }
    if (!h) {
      d.gpm.issue = issue(NVML_ERROR_NOT_FOUND, "this GPU appeared after gpuhost opened NVML");
      return;
    }
    if (gpm.size() <= index) gpm.resize(index + 1);
    GpmSamples& g = gpm[index];
    const NvmlFunctions& f = nvml->functions();
    if (g.uuid != d.uuid) {
      free_samples(f, g);
      g = GpmSamples{};
      g.uuid = d.uuid;
    }
    if (!g.checked) decide_gpm_support(g, h);
    if (g.unsupported) {
      d.gpm.issue = g.unsupported;
      return;
    }
    d.gpm = next_activity(g, [&](nvmlGpmSample_t s) { return f.gpm_sample_get(h, s); });
  }

  // Each GPU instance's activity, sampled on its parent GPU (as DCGM's per-instance profiling
  // fields): kept on each of the instance's MIG devices.
  void fill_instance_gpm(unsigned index, GpuDevice& d, std::vector<GpmSamples>& seen) {
    if (!d.mig_devices.value) return;
    const GpmSamples* parent = index < gpm.size() ? &gpm[index] : nullptr;
    const NvmlFunctions& f = nvml->functions();
    std::optional<NvmlIssue> unavailable;
    if (!parent || !parent->checked)
      unavailable = d.gpm.issue ? d.gpm.issue : issue(NVML_ERROR_NOT_FOUND);
    else if (parent->unsupported)
      unavailable = parent->unsupported;
    else if (!f.gpm_mig_sample_get)
      unavailable = issue(NVML_ERROR_FUNCTION_NOT_FOUND,
                          "this NVML has no nvmlGpmMigSampleGet, which GPM per MIG instance needs");
    std::vector<MigDevice>& devices = *d.mig_devices.value;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      MigDevice& m = devices[i];
      if (unavailable || !m.gpu_instance_id) {
        m.gpm.issue = unavailable
                          ? unavailable
                          : issue(NVML_ERROR_NOT_FOUND, "NVML gave no GPU instance id for this MIG device");
        continue;
      }
      const MigDevice* first = &m;
      for (std::size_t j = 0; j < i; ++j)
        if (devices[j].gpu_instance_id == m.gpu_instance_id) {
          first = &devices[j];
          break;
        }
      if (first != &m) {
        m.gpm = first->gpm;  // one GPU instance, one sample
        continue;
      }
      GpmSamples g;
      auto old = std::find_if(instance_gpm.begin(), instance_gpm.end(),
                              [&](const GpmSamples& o) { return o.uuid == m.uuid; });
      if (old != instance_gpm.end()) {
        g = std::exchange(*old, GpmSamples{});
      } else {
        g.uuid = m.uuid;
        g.checked = true;
        for (nvmlGpmSample_t* sample : {&g.previous, &g.current})
          if (nvmlReturn_t status = f.gpm_sample_alloc(sample); status != NVML_SUCCESS) {
            *sample = nullptr;
            g.unsupported = issue(status);
          }
      }
      if (g.unsupported)
        m.gpm.issue = g.unsupported;
      else
        m.gpm = next_activity(
            g, [&](nvmlGpmSample_t s) { return f.gpm_mig_sample_get(handle(index), *m.gpu_instance_id, s); });
      seen.push_back(std::move(g));
    }
  }

  // DCGM's DCGM_FI_DEV_NVLINK_THROUGHPUT_TOTAL (dcgmlib/src/DcgmCacheManager.cpp
  // ReadAndCacheNvLinkBandwidth): 0 while the counter sum is 0, else the sum's growth per second
  // since the previous reading, divided by 1000.
  void fill_nvlink(unsigned index, GpuDevice& d) {
    if (!d.nvlink_traffic.value) {
      d.nvlink_bandwidth.issue = d.nvlink_traffic.issue;
      return;
    }
    if (nvlink.size() <= index) nvlink.resize(index + 1);
    NvlinkBaseline& b = nvlink[index];
    const NvlinkTraffic& t = *d.nvlink_traffic.value;
    const std::uint64_t sum = t.tx_kib + t.rx_kib;
    if (b.set && b.uuid == d.uuid && sum == 0) {
      d.nvlink_bandwidth.value = 0.0;
    } else if (!b.set || b.uuid != d.uuid) {
      d.nvlink_bandwidth.issue =
          issue(NVML_ERROR_NO_DATA, "first NVLink counter reading: the rate starts with the next collection");
    } else if (sum < b.sum_kib || t.timestamp_us <= b.timestamp_us) {
      d.nvlink_bandwidth.issue = issue(NVML_ERROR_NO_DATA,
                                       "the NVLink counters went back (driver reloaded?): the rate restarts "
                                       "with the next collection");
    } else {
      const double seconds = static_cast<double>(t.timestamp_us - b.timestamp_us) / 1e6;
      d.nvlink_bandwidth.value = static_cast<double>(sum - b.sum_kib) / seconds / 1000.0;
    }
    b = NvlinkBaseline{d.uuid, true, sum, t.timestamp_us};
  }

  void fill(GpuSnapshot& s) {
    std::vector<GpmSamples> seen;
    for (GpuDevice& d : s.devices) {
      if (d.handle_error) continue;
      d.xid = xid->reading(d.index);
      fill_gpm(d.index, d);
      fill_instance_gpm(d.index, d, seen);
      fill_nvlink(d.index, d);
    }
    // Instances gone since the last collection free their samples.
    for (GpmSamples& g : instance_gpm) free_samples(nvml->functions(), g);
    instance_gpm = std::move(seen);
  }
};

NvmlSession::NvmlSession() : m_state(std::make_unique<State>()) {}
NvmlSession::NvmlSession(NvmlSession&&) noexcept = default;
NvmlSession& NvmlSession::operator=(NvmlSession&&) noexcept = default;
NvmlSession::~NvmlSession() = default;

GpuSnapshot NvmlSession::collect() {
  if (!m_state) m_state = std::make_unique<State>();
  std::lock_guard lock(m_state->mutex);
  if (auto holder = nvml_hold_holder(m_state->hold_dir)) {
    m_state->close();
    GpuSnapshot paused;
    paused.error =
        NvmlIssue{NVML_ERROR_IN_USE, "NVML_ERROR_IN_USE",
                  "NVML is closed while " + *holder +
                      " changes a GPU's MIG mode (a GPU reset needs every process off it); readings "
                      "resume when it is done"};
    return paused;
  }
  m_state->open();
  GpuSnapshot snapshot = collect_snapshot(*m_state->nvml);
  if (snapshot.available) m_state->fill(snapshot);
  return snapshot;
}

bool NvmlSession::wait_for_xid_events(std::uint64_t count, std::chrono::milliseconds limit) const {
  return m_state && m_state->xid && m_state->xid->wait_for_events(count, limit);
}

}  // namespace gpuhost::gpu
