#include "bench/gpu_bench.h"

#include <cctype>
#include <cstring>
#include <memory>
#include <vector>

#include "base/strings.h"
#include "bench/verdict.h"
#include "gpu/collector.h"
#include "gpu/cuda_runtime.h"
#include "platform/interrupt.h"

namespace gpuhost::bench {
namespace {

using namespace gpu::cuda;

// "0000:3B:00.0" (CUDA) and "00000000:3B:00.0" (NVML) name the same device: compare the
// bus:device.function part, case-insensitively, and the domain as a number.
std::string normalize_bus_id(const std::string& id) {
  auto colon = id.find(':');
  if (colon == std::string::npos) return id;
  unsigned long domain = std::strtoul(id.substr(0, colon).c_str(), nullptr, 16);
  std::string rest = id.substr(colon + 1);
  for (auto& ch : rest) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return std::to_string(domain) + ":" + rest;
}

// One device's measurements; errors from the runtime become Error values.
class DeviceBench {
 public:
  DeviceBench(const gpu::CudaLibraries& cuda, const GpuOptions& options, ProgressSink& progress, std::string label)
      : m_cuda(cuda), m_f(cuda.functions()), m_options(options), m_progress(progress), m_label(std::move(label)) {}

  Result<void> check(const char* call, cudaError_t status) const {
    if (status != cudaSuccess) return make_error(ErrorCode::io_error, m_label + ": " + m_cuda.describe(call, status));
    return {};
  }

  // Milliseconds between two events around `body` (which enqueues work on the default stream).
  template <typename Body>
  Result<double> time(const Body& body) {
    cudaEvent_t start = nullptr, stop = nullptr;
    if (auto step_ = check("cudaEventCreate", m_f.event_create(&start)); !step_) return std::unexpected(step_.error());
    if (auto step_ = check("cudaEventCreate", m_f.event_create(&stop)); !step_) return std::unexpected(step_.error());
    auto destroy = [&] {
      m_f.event_destroy(start);
      m_f.event_destroy(stop);
    };
    Result<void> ran = check("cudaEventRecord", m_f.event_record(start, nullptr));
    if (ran) ran = body();
    if (ran) ran = check("cudaEventRecord", m_f.event_record(stop, nullptr));
    if (ran) ran = check("cudaEventSynchronize", m_f.event_synchronize(stop));
    float ms = 0;
    if (ran) ran = check("cudaEventElapsedTime", m_f.event_elapsed_time(&ms, start, stop));
    destroy();
    if (!ran) return std::unexpected(ran.error());
    if (ms <= 0) return make_error(ErrorCode::io_error, m_label + ": the CUDA events measured no time");
    return static_cast<double>(ms);
  }

  // GB/s of `repeats` copies of `bytes` (cudaMemcpyAsync for pinned/device memory, cudaMemcpy
  // for pageable, which the runtime stages through its own pinned buffers).
  Result<double> copy(void* dst, const void* src, std::size_t bytes, int kind, bool async) {
    auto once = [&]() -> Result<void> {
      return async ? check("cudaMemcpyAsync", m_f.memcpy_async(dst, src, bytes, kind, nullptr))
                   : check("cudaMemcpy", m_f.memcpy(dst, src, bytes, kind));
    };
    if (auto step_ = once(); !step_) return std::unexpected(step_.error());  // warm-up
    double ms = GPUHOST_TRY(time([&]() -> Result<void> {
      for (int i = 0; i < m_options.copy_repeats; ++i) {
        if (auto again_ = once(); !again_) return std::unexpected(again_.error());
      }
      return {};
    }));
    return static_cast<double>(bytes) * m_options.copy_repeats / (ms / 1000) / 1e9;
  }

  Result<double> gemm(cublasHandle_t handle, void* a, void* b, void* c, int data_type, int compute_type) {
    int n = m_options.gemm_size;
    float alpha = 1.0f, beta = 0.0f;
    auto once = [&]() -> Result<void> {
      cublasStatus_t status = m_f.cublas_gemm_ex(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, data_type, n, b,
                                                 data_type, n, &beta, c, data_type, n, compute_type, CUBLAS_GEMM_DEFAULT);
      if (status != CUBLAS_STATUS_SUCCESS)
        return make_error(ErrorCode::io_error, m_label + ": cublasGemmEx failed with cuBLAS status " + std::to_string(status));
      return {};
    };
    if (auto step_ = once(); !step_) return std::unexpected(step_.error());
    double ms = GPUHOST_TRY(time([&]() -> Result<void> {
      for (int i = 0; i < m_options.gemm_repeats; ++i) {
        if (auto again_ = once(); !again_) return std::unexpected(again_.error());
      }
      return {};
    }));
    double flops = 2.0 * n * static_cast<double>(n) * n * m_options.gemm_repeats;
    return flops / (ms / 1000) / 1e12;
  }

  Result<void> run(GpuSummary& summary) {
    std::size_t bytes = m_options.copy_bytes;
    void* device_a = nullptr;
    void* device_b = nullptr;
    void* pinned = nullptr;
    if (auto step_ = check("cudaMalloc", m_f.malloc(&device_a, bytes)); !step_) return std::unexpected(step_.error());
    auto free_all = [&] {
      if (device_a) m_f.free(device_a);
      if (device_b) m_f.free(device_b);
      if (pinned) m_f.free_host(pinned);
    };
    auto result = [&]() -> Result<void> {
      if (auto step_ = check("cudaMalloc", m_f.malloc(&device_b, bytes)); !step_) return std::unexpected(step_.error());
      if (auto step_ = check("cudaMallocHost", m_f.malloc_host(&pinned, bytes)); !step_) return std::unexpected(step_.error());
      std::memset(pinned, 1, bytes);
      std::unique_ptr<unsigned char[]> pageable(new unsigned char[bytes]);
      std::memset(pageable.get(), 1, bytes);
      if (auto step_ = check("cudaMemset", m_f.memset(device_a, 0, bytes)); !step_) return std::unexpected(step_.error());
      m_progress.report(m_label + ": host-device copies", 0.05);
      summary.h2d_pinned_gbps = GPUHOST_TRY(copy(device_a, pinned, bytes, cudaMemcpyHostToDevice, true));
      summary.d2h_pinned_gbps = GPUHOST_TRY(copy(pinned, device_a, bytes, cudaMemcpyDeviceToHost, true));
      m_progress.report(m_label + ": pageable copies", 0.15);
      summary.h2d_pageable_gbps = GPUHOST_TRY(copy(device_a, pageable.get(), bytes, cudaMemcpyHostToDevice, false));
      summary.d2h_pageable_gbps = GPUHOST_TRY(copy(pageable.get(), device_a, bytes, cudaMemcpyDeviceToHost, false));
      m_progress.report(m_label + ": device-to-device copy", 0.25);
      // Read plus write, the way CUDA's bandwidthTest counts device-to-device traffic.
      summary.d2d_gbps = 2 * GPUHOST_TRY(copy(device_b, device_a, bytes, cudaMemcpyDeviceToDevice, true));
      return {};
    }();
    free_all();
    if (auto step_ = std::move(result); !step_) return std::unexpected(step_.error());
    if (platform::interrupt_requested()) return {};

    std::size_t n = static_cast<std::size_t>(m_options.gemm_size);
    void* a = nullptr;
    void* b = nullptr;
    void* c = nullptr;
    cublasHandle_t handle = nullptr;
    if (m_f.cublas_create(&handle) != CUBLAS_STATUS_SUCCESS)
      return make_error(ErrorCode::io_error, m_label + ": cublasCreate failed");
    auto gemms = [&]() -> Result<void> {
      if (auto step_ = check("cudaMalloc", m_f.malloc(&a, n * n * 4)); !step_) return std::unexpected(step_.error());
      if (auto step_ = check("cudaMalloc", m_f.malloc(&b, n * n * 4)); !step_) return std::unexpected(step_.error());
      if (auto step_ = check("cudaMalloc", m_f.malloc(&c, n * n * 4)); !step_) return std::unexpected(step_.error());
      if (auto step_ = check("cudaMemset", m_f.memset(a, 0, n * n * 4)); !step_) return std::unexpected(step_.error());
      if (auto step_ = check("cudaMemset", m_f.memset(b, 0, n * n * 4)); !step_) return std::unexpected(step_.error());
      struct Kind {
        const char* step;
        int data_type;
        int compute_type;
        std::optional<double> GpuSummary::*slot;
      };
      const Kind kinds[] = {
          {"FP32 GEMM", CUDA_R_32F, CUBLAS_COMPUTE_32F, &GpuSummary::fp32_tflops},
          {"TF32 GEMM", CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32, &GpuSummary::tf32_tflops},
          {"FP16 GEMM", CUDA_R_16F, CUBLAS_COMPUTE_32F, &GpuSummary::fp16_tflops},
          {"BF16 GEMM", CUDA_R_16BF, CUBLAS_COMPUTE_32F, &GpuSummary::bf16_tflops},
      };
      double fraction = 0.35;
      for (const auto& kind : kinds) {
        if (platform::interrupt_requested()) return {};
        m_progress.report(m_label + ": " + kind.step + " " + std::to_string(n) + "^3", fraction);
        fraction += 0.15;
        summary.*kind.slot = GPUHOST_TRY(gemm(handle, a, b, c, kind.data_type, kind.compute_type));
      }
      return {};
    }();
    for (void* p : {a, b, c})
      if (p) m_f.free(p);
    m_f.cublas_destroy(handle);
    return gemms;
  }

 private:
  const gpu::CudaLibraries& m_cuda;
  const gpu::CudaFunctions& m_f;
  const GpuOptions& m_options;
  ProgressSink& m_progress;
  std::string m_label;
};

std::string link_text(int gen, int width) { return "Gen" + std::to_string(gen) + " x" + std::to_string(width); }

void add(std::vector<Measurement>& out, const std::string& subject, const char* id, std::string title,
         const std::optional<double>& value, const char* unit) {
  if (!value) return;
  Measurement m;
  m.id = id;
  m.subject = subject;
  m.title = std::move(title);
  m.value = *value;
  m.unit = unit;
  out.push_back(std::move(m));
}

}  // namespace

void judge_gpu(std::vector<Measurement>& measurements, const GpuContext& context) {
  const knowledge::GpuSpec* spec = context.model && context.model->spec ? &*context.model->spec : nullptr;
  std::string spec_basis = spec ? context.model->name + " spec sheet: " + spec->source : "";
  // Why a number may be low, from NVML during the load.
  std::vector<std::string> link_reasons, clock_reasons;
  if (context.link && context.link->current_generation > 0 &&
      (context.link->current_generation < context.link->max_generation ||
       context.link->current_width < context.link->max_width))
    link_reasons.push_back("PCIe link trained at " +
                           link_text(static_cast<int>(context.link->current_generation), static_cast<int>(context.link->current_width)) +
                           ", capable of " +
                           link_text(static_cast<int>(context.link->max_generation), static_cast<int>(context.link->max_width)) +
                           " (NVML, read during the load): reseat the card or check the slot/riser and BIOS link settings");
  std::uint64_t throttle = context.clocks_event_reasons.value_or(0) & ~(gpu::clocks_event::gpu_idle |
                                                                        gpu::clocks_event::applications_clocks_setting);
  if (throttle)
    clock_reasons.push_back("clocks held down during the load by " + join(gpu::clocks_event_reason_names(throttle), ", ") +
                            " (NVML clocks event reasons): check cooling, power limit (nvidia-smi -q -d PERFORMANCE)");

  // The link the card should have: its own capability, else the spec sheet.
  int gen = 0, width = 0;
  if (context.link && context.link->max_generation > 0) {
    gen = static_cast<int>(context.link->max_generation);
    width = static_cast<int>(context.link->max_width);
  }
  if (gen == 0 && spec && spec->pcie_generation) {
    gen = *spec->pcie_generation;
    width = spec->pcie_width.value_or(16);
  }

  for (auto& m : measurements) {
    if (m.id == "gpu.d2h_pinned_gbps" || m.id == "gpu.h2d_pinned_gbps") {
      auto theoretical = pcie_theoretical_gbps(gen, width);
      if (!theoretical) continue;
      double threshold = *theoretical * k_pinned_d2h_fraction;
      std::string text = ">= " + format_fixed(threshold, 1) + " GB/s (75% of " + link_text(gen, width) + ")";
      std::string basis = "PCIe bandwidth per direction; pinned copies reach about 75-85% of it (NVIDIA/nvbandwidth issues #24 and #50, ZaidQureshi/bam issue #54)";
      if (m.id == "gpu.d2h_pinned_gbps") {
        judge_at_least(m, threshold, text, basis);
        if (m.status != Status::pass) m.notes.insert(m.notes.end(), link_reasons.begin(), link_reasons.end());
      } else {
        // H2D can read lower than D2H on healthy Gen5 hosts (nvbandwidth #24): a hint, not a verdict.
        m.expected = threshold;
        m.expected_text = text + ", informational";
        m.basis = basis + "; H2D is informational (NVIDIA/nvbandwidth #24)";
        m.ratio = m.value / threshold;
        if (m.value < threshold) m.notes.insert(m.notes.end(), link_reasons.begin(), link_reasons.end());
      }
    } else if (m.id == "gpu.d2d_gbps" && spec && spec->memory_bandwidth_gbps) {
      m.expected = *spec->memory_bandwidth_gbps;
      m.expected_text = format_fixed(*spec->memory_bandwidth_gbps, 0) + " GB/s memory bandwidth, informational";
      m.basis = spec_basis;
      m.ratio = m.value / *spec->memory_bandwidth_gbps;
    } else if (spec && m.id.starts_with("gpu.gemm_")) {
      std::optional<double> peak;
      bool banded = false;
      if (m.id == "gpu.gemm_bf16_tflops") peak = spec->bf16_dense_tflops, banded = true;
      if (m.id == "gpu.gemm_fp16_tflops") peak = spec->fp16_dense_tflops, banded = true;
      if (m.id == "gpu.gemm_tf32_tflops") peak = spec->tf32_dense_tflops;
      if (m.id == "gpu.gemm_fp32_tflops") peak = spec->fp32_tflops;
      if (!peak) continue;
      if (banded) {
        double threshold = *peak * k_gemm_peak_fraction;
        judge_at_least(m, threshold,
                       ">= " + format_fixed(threshold, 1) + " TFLOPS (80% of the dense peak " + format_fixed(*peak, 1) + ")",
                       spec_basis + "; band: 80% of the dense peak, gpuhost's acceptance band from measured maximum achievable matmul TFLOPS (stas00/ml-engineering mamf-finder; BF16, applied to FP16 too)");
        if (m.status != Status::pass) m.notes.insert(m.notes.end(), clock_reasons.begin(), clock_reasons.end());
      } else {
        m.expected = *peak;
        m.expected_text = format_fixed(*peak, 1) + " TFLOPS peak, informational";
        m.basis = spec_basis;
        m.ratio = m.value / *peak;
      }
    }
  }
}

void judge_gpu_spread(BenchReport& report) {
  for (const char* id : {"gpu.gemm_bf16_tflops", "gpu.gemm_fp16_tflops", "gpu.gemm_fp32_tflops"}) {
    std::vector<double> values;
    for (const auto& m : report.measurements)
      if (m.id == id) values.push_back(m.value);
    auto s = spread(values);
    if (!s) continue;
    Measurement m;
    m.id = "gpu.gemm_spread";
    m.title = std::string("spread of ") + (id + 9) + " between " + std::to_string(values.size()) + " GPUs, (max-min)/max";
    m.value = *s * 100;
    m.unit = "%";
    m.expected = k_gpu_spread_limit * 100;
    m.expected_text = "<= 5%";
    m.basis = "per-GPU spread in one node within 5% (stas00/ml-engineering)";
    m.ratio = *s / k_gpu_spread_limit;
    m.status = *s <= k_gpu_spread_limit ? Status::pass : (*s <= 2 * k_gpu_spread_limit ? Status::warn : Status::fail);
    if (m.status != Status::pass) m.notes.push_back("one GPU is slower than its peers: see its GEMM notes");
    report.measurements.push_back(std::move(m));
    return;
  }
}

Result<void> run_gpu(const GpuOptions& options, const knowledge::GpuTable& gpus, BenchReport& report, ProgressSink& progress) {
  auto cuda = gpu::CudaLibraries::open();
  if (!cuda) {
    report.unavailable.push_back({"gpu", cuda.error().message});
    return {};
  }
  const auto& f = cuda->functions();
  int count = 0;
  if (auto status = f.get_device_count(&count); status != cudaSuccess || count == 0) {
    std::string reason = status != cudaSuccess ? cuda->describe("cudaGetDeviceCount", status) : "the CUDA runtime sees no GPU";
    // The two answers of a host without a usable GPU: say what to check, not only the code.
    if (status == cudaErrorInsufficientDriver) {
      // The runtime says this also where there is no driver because there is no NVIDIA GPU at
      // all; NVML (what doctor reads) tells the two apart.
      const gpu::GpuSnapshot nvml = gpu::take_snapshot();
      if (!nvml.available || nvml.devices.empty())
        reason = "no NVIDIA GPU or driver on this host (the CUDA runtime found no driver, NVML " +
                 std::string(nvml.available ? "lists no GPU" : "cannot be loaded") +
                 "): `gpuhost doctor` says which, and what to install if a GPU is there";
      else
        reason += "; the NVIDIA driver is older than this CUDA runtime needs: `gpuhost doctor` names the driver to install";
    }
    else if (status == cudaErrorNoDevice || count == 0)
      reason += "; check that `nvidia-smi` lists a GPU and that CUDA_VISIBLE_DEVICES does not hide it";
    report.unavailable.push_back({"gpu", std::move(reason)});
    return {};
  }
  progress.report("reading the GPUs through NVML", -1);
  gpu::GpuSnapshot before = gpu::take_snapshot();
  std::vector<GpuSummary> summaries;
  for (int i = 0; i < count && !platform::interrupt_requested(); ++i) {
    GpuSummary summary;
    summary.cuda_index = i;
    if (auto status = f.set_device(i); status != cudaSuccess)
      return make_error(ErrorCode::io_error, "GPU " + std::to_string(i) + ": " + cuda->describe("cudaSetDevice", status));
    char bus[64] = {};
    if (f.device_get_pci_bus_id(bus, sizeof bus, i) == cudaSuccess) summary.pci_bus_id = bus;
    const gpu::GpuDevice* nvml_device = nullptr;
    for (const auto& d : before.devices)
      if (!summary.pci_bus_id.empty() && normalize_bus_id(d.pci_bus_id) == normalize_bus_id(summary.pci_bus_id)) nvml_device = &d;
    if (nvml_device) summary.name = nvml_device->name;
    GpuContext context;
    if (!summary.name.empty())
      if (auto match = gpus.match(summary.name)) {
        context.model = match->model;
        summary.model_key = match->model->key;
      }
    std::string label = "GPU " + std::to_string(i) + (summary.name.empty() ? "" : " (" + summary.name + ")");
    DeviceBench bench(*cuda, options, progress, label);
    if (auto step_ = bench.run(summary); !step_) return std::unexpected(step_.error());
    // NVML right after the load: link state and clock reasons as they were under it.
    gpu::GpuSnapshot during = gpu::take_snapshot();
    for (const auto& d : during.devices) {
      if (summary.pci_bus_id.empty() || normalize_bus_id(d.pci_bus_id) != normalize_bus_id(summary.pci_bus_id)) continue;
      if (d.pcie.has_value()) context.link = *d.pcie;
      if (d.clocks_event_reasons.has_value()) context.clocks_event_reasons = *d.clocks_event_reasons;
    }
    std::vector<Measurement> ms;
    std::string copy = std::to_string(options.copy_bytes >> 20) + " MiB x " + std::to_string(options.copy_repeats);
    std::string gemm = std::to_string(options.gemm_size) + "^3 x " + std::to_string(options.gemm_repeats);
    add(ms, label, "gpu.h2d_pinned_gbps", "host to device, pinned, " + copy, summary.h2d_pinned_gbps, "GB/s");
    add(ms, label, "gpu.d2h_pinned_gbps", "device to host, pinned, " + copy, summary.d2h_pinned_gbps, "GB/s");
    add(ms, label, "gpu.h2d_pageable_gbps", "host to device, pageable, " + copy, summary.h2d_pageable_gbps, "GB/s");
    add(ms, label, "gpu.d2h_pageable_gbps", "device to host, pageable, " + copy, summary.d2h_pageable_gbps, "GB/s");
    add(ms, label, "gpu.d2d_gbps", "device to device (read + write), " + copy, summary.d2d_gbps, "GB/s");
    add(ms, label, "gpu.gemm_fp32_tflops", "GEMM FP32, " + gemm, summary.fp32_tflops, "TFLOPS");
    add(ms, label, "gpu.gemm_tf32_tflops", "GEMM TF32 (FP32 accumulate), " + gemm, summary.tf32_tflops, "TFLOPS");
    add(ms, label, "gpu.gemm_fp16_tflops", "GEMM FP16 (FP32 accumulate), " + gemm, summary.fp16_tflops, "TFLOPS");
    add(ms, label, "gpu.gemm_bf16_tflops", "GEMM BF16 (FP32 accumulate), " + gemm, summary.bf16_tflops, "TFLOPS");
    judge_gpu(ms, context);
    if (!context.model && !ms.empty())
      ms.front().notes.push_back(summary.name.empty() ? "no NVML name for this GPU: no spec sheet to compare with"
                                               : "\"" + summary.name + "\" is not in data/gpus.json: no spec sheet to compare with");
    report.measurements.insert(report.measurements.end(), ms.begin(), ms.end());
    summaries.push_back(std::move(summary));
  }
  report.gpus = std::move(summaries);
  judge_gpu_spread(report);
  if (platform::interrupt_requested()) report.interrupted = true;
  return {};
}

}  // namespace gpuhost::bench
