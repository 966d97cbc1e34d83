// The advisor's rules: each threshold is an anchor's (research 08 §A1-A8), named in the finding
// it produces; "(derived)" marks the few that are ours.

#include "advise/judge.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace gpuhost::advise {

namespace {

// PyTorch Profiler TensorBoard plugin: a GPU under 50 % utilisation is reported (kineto
// tb_plugin profiler/data.py, _analyze_gpu_metrics). DCGM: SM active under 0.5 "likely indicates
// ineffective GPU usage" (DCGM feature overview, profiling metrics).
constexpr double k_low_busy_percent = 50;
// A thread running or waiting for a CPU 85 % of the time or more counts as saturated (derived: a
// Python loop that also waits on the GIL and the allocator rarely shows a full 100 %). Waiting
// counts: a loader starved of CPU by other load still has the work and still holds the GPU up.
constexpr double k_saturated_busy = 0.85;
// PyTorch Profiler TensorBoard plugin: peak memory above 90 % of the device's (data.py).
constexpr double k_memory_full_share = 0.9;
// Storage stalls: PSI io "some" avg10 at 10 % or more while the GPU waits (derived).
constexpr double k_io_pressure_percent = 10;
// A main thread that loads and also reads its samples from storage: busy half the window or more
// (its waits on the disk are not counted as busy: /proc has no per-thread I/O wait without delay
// accounting, off by default since Linux 5.14) while the trainer reads 1 MiB/s or takes 100
// major faults a second (derived: a cached dataset takes neither).
constexpr double k_loading_with_reads_busy = 0.5;
constexpr double k_storage_read_mib_per_s = 1;
constexpr double k_storage_major_faults_per_s = 100;
// Throttling or capping in a fifth of the busy samples (derived).
constexpr double k_throttle_share = 0.2;
// Swap-in that lasts: 10 pages a second over the window (derived; any sustained swap-in hurts).
constexpr double k_swap_in_pages_per_s = 10;
// Tensor cores idle: GPM ANY_TENSOR_UTIL under 1 % while the SMs are busy (derived from the
// TensorBoard plugin's rule: compute capability >= 7 and no tensor-core kernel time).
constexpr double k_tensor_idle_percent = 1;

std::string percent(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.0f %%", value);
  return text;
}

std::string number(double value, const char* unit) {
  char text[48];
  std::snprintf(text, sizeof text, value < 10 ? "%.2f %s" : "%.0f %s", value, unit);
  return text;
}

// "running or waiting for a CPU 97 % of the time (0.51 cores used; >= 85 %: saturated)"
std::string busy_text(double busy, double cores) {
  return "running or waiting for a CPU " + percent(busy * 100) + " of the time (" + number(cores, "cores") +
         " used; >= 85 %: saturated)";
}

std::string gpu_label(const GpuWindow& gpu) {
  return "GPU " + std::to_string(gpu.index);
}

// How much faster a step could be once the GPU no longer waits (derived: the GPU computes in
// busy % of the step now, so a step that hides the loading behind compute takes that share).
std::string expected_from_busy(double busy) {
  if (busy <= 0) return "the GPU does nothing now: any step time the fix gives is a gain";
  char text[160];
  std::snprintf(
      text, sizeof text,
      "step time down towards %.0f %% of now (the GPU's busy share) once loading hides behind compute: up to "
      "%.1fx faster (derived)",
      busy, 100.0 / std::max(busy, 1.0));
  return text;
}

void judge_input(const Observation& o, const GpuWindow& gpu, std::vector<Finding>& out) {
  if (!gpu.busy_percent || *gpu.busy_percent >= k_low_busy_percent) return;
  const double busy = *gpu.busy_percent;
  std::vector<std::string> gpu_evidence{gpu_label(gpu) + " busy " + percent(busy) +
                                        " of the time (< 50 %: the PyTorch Profiler's low-utilisation rule)"};
  if (gpu.graphics_percent && *gpu.graphics_percent < k_low_busy_percent)
    gpu_evidence.push_back("GPM graphics activity " + percent(*gpu.graphics_percent) +
                           " (< 50 %: DCGM calls this likely ineffective GPU usage)");
  const std::vector<std::string> sources{
      "PyTorch Profiler TensorBoard plugin: GPU utilisation < 50 % (kineto tb_plugin, profiler/data.py)",
      "Lightning: num_workers = max(1, cpus / processes - 1) (fabric/utilities/data.py "
      "suggested_max_num_workers)",
      "PyTorch Performance Tuning Guide: num_workers > 0, pin_memory=True (recipes/tuning_guide.py)"};

  if (!o.host) {
    Finding f{"gpu_waiting",
              Strength::hint,
              gpu.index,
              "the GPU waits most of the time; the cause cannot be seen here",
              gpu_evidence,
              "",
              expected_from_busy(busy),
              sources};
    f.evidence.push_back("the trainer's threads: " + o.host_unseen);
    f.fix =
        "check the input pipeline first: DataLoader(num_workers=N, pin_memory=True, persistent_workers=True)";
    out.push_back(std::move(f));
    return;
  }
  const HostWindow& h = *o.host;
  const unsigned workers = suggested_workers(h.cpus, o.local_processes);
  const std::string pin = h.pin_thread ? "" : ", pin_memory=True";
  auto finding = [&](std::string limit, std::string evidence, std::string fix, std::string more = {}) {
    Finding f{"input_bound",  Strength::verdict,        gpu.index, std::move(limit), gpu_evidence,
              std::move(fix), expected_from_busy(busy), sources};
    f.evidence.push_back(std::move(evidence));
    if (!more.empty()) f.evidence.push_back(std::move(more));
    if (!h.pin_thread)
      f.evidence.push_back("no pt_data_pin thread: batches are not pinned (pin_memory=False)");
    return f;
  };

  const bool faults = h.major_faults_per_s && *h.major_faults_per_s >= k_storage_major_faults_per_s;
  const bool from_storage = faults || (h.read_mib_per_s && *h.read_mib_per_s >= k_storage_read_mib_per_s);
  if (h.loader_workers == 0 &&
      (h.main_thread_busy >= k_saturated_busy || (from_storage && h.main_thread_busy >= k_loading_with_reads_busy))) {
    std::string storage;
    if (from_storage) {
      storage = "the trainer reads its samples from storage";
      if (h.read_mib_per_s) storage += ": " + number(*h.read_mib_per_s, "MiB/s");
      if (faults) storage += ", " + number(*h.major_faults_per_s, "major faults/s") + " (memmap pages read from disk)";
      storage += "; the main thread waits on those reads too";
    }
    out.push_back(finding("the input pipeline: the main thread loads every batch itself (num_workers=0)",
                          "no DataLoader worker process, and the main thread (" + h.main_thread_name + ") is " +
                              busy_text(h.main_thread_busy, h.main_thread_cores),
                          "DataLoader(..., num_workers=" + std::to_string(workers) + pin +
                              ", persistent_workers=True): loading moves to " + std::to_string(workers) +
                              " worker processes that run while the GPU computes" +
                              (from_storage ? std::string(", and their reads overlap; keep the dataset in the page cache "
                                                   "(RAM to spare, nothing dropping it) or on local NVMe")
                                     : std::string()),
                          storage));
    return;
  }
  if (h.loader_workers > 0 && h.loader_busy_mean >= k_saturated_busy) {
    std::string fix =
        h.loader_workers < workers
            ? "more DataLoader workers: num_workers=" + std::to_string(workers) + pin +
                  " (this host's suggestion); then cheaper decoding (DALI or FFCV decode on the GPU or "
                  "from pre-decoded shards)"
            : "the workers are as many as this host's CPUs allow: make each sample cheaper (decode on "
              "the GPU with DALI, FFCV or pre-decoded memmap shards, smaller augmentations)";
    out.push_back(finding("the input pipeline: every DataLoader worker is saturated",
                          std::to_string(h.loader_workers) + " DataLoader worker processes, each " +
                              busy_text(h.loader_busy_mean, h.loader_cores_mean),
                          std::move(fix)));
    return;
  }
  if (h.io_pressure_percent && *h.io_pressure_percent >= k_io_pressure_percent) {
    std::string reads;
    if (h.read_mib_per_s)
      reads = "; the trainer reads " + number(*h.read_mib_per_s, "MiB/s") + " from storage";
    if (h.major_faults_per_s && *h.major_faults_per_s > 0)
      reads += ", " + number(*h.major_faults_per_s, "major faults/s") + " (memmap pages read from disk)";
    out.push_back(finding(
        "the input pipeline: reads from storage",
        "io pressure " + percent(*h.io_pressure_percent) + " of the time (PSI some avg10 >= 10 %, derived)" +
            reads,
        "keep the dataset in the page cache or on local NVMe (not network storage); read sequential "
        "shards (WebDataset, FFCV, np.memmap of one contiguous file) and more num_workers to overlap reads"));
    return;
  }
  Finding f{"gpu_waiting",
            Strength::hint,
            gpu.index,
            "the GPU waits, but neither the loader nor storage is saturated",
            gpu_evidence,
            "look for host synchronisation in the step (.item(), .cpu(), print of a CUDA tensor), many small "
            "kernels "
            "(torch.compile, CUDA graphs) or communication waits",
            expected_from_busy(busy),
            sources};
  f.evidence.push_back("the busiest thread (" + h.main_thread_name + ") is running or waiting for a CPU " +
                       percent(h.main_thread_busy * 100) + " of the time" +
                       (h.loader_workers ? "; " + std::to_string(h.loader_workers) + " DataLoader workers, " +
                                               percent(h.loader_busy_mean * 100) + " each"
                                         : std::string()));
  out.push_back(std::move(f));
}

void judge_memory(const GpuWindow& gpu, std::vector<Finding>& out) {
  if (!gpu.memory_used_share || *gpu.memory_used_share <= k_memory_full_share) return;
  out.push_back(Finding{
      "memory_full",
      Strength::verdict,
      gpu.index,
      "GPU memory: the job runs at the edge of out-of-memory",
      {gpu_label(gpu) + " memory " + percent(*gpu.memory_used_share * 100) + " used (> 90 %)"},
      "activation (gradient) checkpointing, mixed precision (bf16 / fp16 AMP), or a smaller micro-batch with "
      "gradient "
      "accumulation to keep the effective batch",
      "the same step time or slightly slower (checkpointing recomputes), with room for a larger batch",
      {"PyTorch Profiler TensorBoard plugin: peak memory > 90 % of the device (profiler/data.py)"}});
}

void judge_clocks(const GpuWindow& gpu, std::vector<Finding>& out) {
  if (gpu.thermal_share && *gpu.thermal_share >= k_throttle_share) {
    out.push_back(
        Finding{"thermal_throttling",
                Strength::verdict,
                gpu.index,
                "the GPU slows its clocks because it is too hot",
                {gpu_label(gpu) + " thermal slowdown in " + percent(*gpu.thermal_share * 100) +
                 " of its busy samples (clock-event reasons 0x20 / 0x40)"},
                "not a trainer fix: report the host to the provider (cooling), or choose another instance",
                "back to full clocks on a cooled GPU",
                {"NVML nvmlDeviceGetCurrentClocksEventReasons (nvml.h)"}});
  }
  if (gpu.power_share && *gpu.power_share >= k_throttle_share) {
    out.push_back(Finding{
        "power_capped",
        Strength::hint,
        gpu.index,
        "the GPU runs at its power limit",
        {gpu_label(gpu) + " power cap in " + percent(*gpu.power_share * 100) +
         " of its busy samples (clock-event reasons 0x4 / 0x80)"},
        "normal under full load; check that the enforced limit is the GPU's default (nvidia-smi -q -d POWER)",
        "none from the trainer",
        {"NVML nvmlDeviceGetCurrentClocksEventReasons (nvml.h)"}});
  }
}

void judge_precision(const GpuWindow& gpu, std::vector<Finding>& out) {
  if (!gpu.tensor_percent || !gpu.graphics_percent || !gpu.cc_major || *gpu.cc_major < 7) return;
  if (*gpu.tensor_percent >= k_tensor_idle_percent || *gpu.graphics_percent < k_low_busy_percent) return;
  out.push_back(
      Finding{"no_mixed_precision",
              Strength::verdict,
              gpu.index,
              "compute in fp32 on the CUDA cores: the tensor cores are idle",
              {gpu_label(gpu) + " GPM tensor activity " + percent(*gpu.tensor_percent) +
                   " while graphics activity is " + percent(*gpu.graphics_percent),
               "compute capability " + std::to_string(*gpu.cc_major) + ".x has tensor cores"},
              "torch.autocast(\"cuda\", dtype=torch.bfloat16) around the forward pass (bf16 on Ampere and "
              "later; fp16 with "
              "GradScaler before), or at least torch.set_float32_matmul_precision(\"high\") for TF32",
              "AMP gives up to 3x on Volta and later (PyTorch Performance Tuning Guide)",
              {"PyTorch Profiler TensorBoard plugin: tensor cores unused on compute capability >= 7 "
               "(profiler/data.py)",
               "NVML GPM ANY_TENSOR_UTIL (nvmlGpmMetricId_t)"}});
}

void judge_batch(const GpuWindow& gpu, std::vector<Finding>& out) {
  // High time-utilisation with idle SMs and free memory: many small kernels (research 08 §A8,
  // "batch too small", a hint: DCGM says low occupancy is not necessarily bad).
  if (!gpu.busy_percent || *gpu.busy_percent < k_low_busy_percent) return;
  if (!gpu.graphics_percent || *gpu.graphics_percent >= k_low_busy_percent) return;
  if (!gpu.memory_used_share || *gpu.memory_used_share >= 0.5) return;
  out.push_back(
      Finding{"batch_small",
              Strength::hint,
              gpu.index,
              "the GPU is busy in time but its SMs are mostly idle",
              {gpu_label(gpu) + " busy " + percent(*gpu.busy_percent) + ", GPM graphics activity " +
                   percent(*gpu.graphics_percent) + " (< 50 %)",
               "memory " + percent(*gpu.memory_used_share * 100) + " used: room for a larger batch"},
              "a larger batch (scale the learning rate with it), or fewer, larger kernels (torch.compile)",
              "more samples per second at a similar step time (not certain: occupancy is not necessarily the "
              "limit, DCGM)",
              {"NVIDIA DCGM profiling metrics: SM active < 0.5 likely indicates ineffective GPU usage"}});
}

void judge_host(const Observation& o, std::vector<Finding>& out) {
  if (!o.host) return;
  const HostWindow& h = *o.host;
  if (h.swap_in_pages_per_s && *h.swap_in_pages_per_s >= k_swap_in_pages_per_s) {
    out.push_back(Finding{"swapping",
                          Strength::verdict,
                          std::nullopt,
                          "host memory: pages are swapped in while the job runs",
                          {number(*h.swap_in_pages_per_s, "pages/s") + " swapped in (/proc/vmstat pswpin)"},
                          "fewer DataLoader workers or a smaller prefetch_factor, a memory-mapped dataset "
                          "(np.memmap) instead of one "
                          "loaded into each worker, or a host with more RAM",
                          "no swap waits in the step",
                          {"/proc/vmstat pswpin (proc(5))"}});
  }
}

}  // namespace

const char* strength_name(Strength strength) {
  return strength == Strength::verdict ? "verdict" : "hint";
}

unsigned suggested_workers(unsigned cpus, unsigned local_processes) {
  const unsigned per_process = cpus / std::max(local_processes, 1u);
  return std::max(1u, per_process > 0 ? per_process - 1 : 0u);
}

std::vector<Finding> judge(const Observation& observation) {
  std::vector<Finding> out;
  for (const GpuWindow& gpu : observation.gpus) {
    if (gpu.samples == 0) continue;
    judge_input(observation, gpu, out);
    judge_memory(gpu, out);
    judge_clocks(gpu, out);
    judge_precision(gpu, out);
    judge_batch(gpu, out);
  }
  judge_host(observation, out);
  return out;
}

json::Value to_json(const Finding& f) {
  json::Value v = json::Value::object();
  v["id"] = f.id;
  v["strength"] = strength_name(f.strength);
  v["gpu"] = f.gpu ? json::Value(*f.gpu) : json::Value(nullptr);
  v["limit"] = f.limit;
  json::Value evidence = json::Value::array();
  for (const auto& e : f.evidence) evidence.push_back(e);
  v["evidence"] = std::move(evidence);
  v["fix"] = f.fix;
  v["expected"] = f.expected;
  json::Value sources = json::Value::array();
  for (const auto& s : f.sources) sources.push_back(s);
  v["sources"] = std::move(sources);
  return v;
}

namespace {
json::Value optional_number(const std::optional<double>& value) {
  return value ? json::Value(*value) : json::Value(nullptr);
}
}  // namespace

json::Value to_json(const Observation& o) {
  json::Value v = json::Value::object();
  json::Value gpus = json::Value::array();
  for (const GpuWindow& g : o.gpus) {
    json::Value each = json::Value::object();
    each["index"] = g.index;
    each["name"] = g.name;
    each["samples"] = g.samples;
    each["busy_percent"] = optional_number(g.busy_percent);
    each["memory_used_share"] = optional_number(g.memory_used_share);
    each["thermal_share"] = optional_number(g.thermal_share);
    each["power_share"] = optional_number(g.power_share);
    each["tensor_percent"] = optional_number(g.tensor_percent);
    each["graphics_percent"] = optional_number(g.graphics_percent);
    each["pcie_rx_mib_per_s"] = optional_number(g.pcie_rx_mib_per_s);
    gpus.push_back(std::move(each));
  }
  v["gpus"] = std::move(gpus);
  if (o.host) {
    const HostWindow& h = *o.host;
    json::Value host = json::Value::object();
    host["seconds"] = h.seconds;
    host["main_thread"] = h.main_thread_name;
    host["main_thread_cores"] = h.main_thread_cores;
    host["main_thread_busy"] = h.main_thread_busy;
    host["loader_workers"] = h.loader_workers;
    host["loader_cores_mean"] = h.loader_cores_mean;
    host["loader_busy_mean"] = h.loader_busy_mean;
    host["pin_thread"] = h.pin_thread;
    host["cpus"] = h.cpus;
    host["read_mib_per_s"] = optional_number(h.read_mib_per_s);
    host["major_faults_per_s"] = optional_number(h.major_faults_per_s);
    host["io_pressure_percent"] = optional_number(h.io_pressure_percent);
    host["cpu_pressure_percent"] = optional_number(h.cpu_pressure_percent);
    host["swap_in_pages_per_s"] = optional_number(h.swap_in_pages_per_s);
    v["host"] = std::move(host);
  } else {
    v["host"] = nullptr;
    v["host_unseen"] = o.host_unseen;
  }
  v["local_processes"] = o.local_processes;
  return v;
}

}  // namespace gpuhost::advise
