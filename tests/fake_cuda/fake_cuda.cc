// A test double of the CUDA runtime and cuBLAS C ABI (the functions gpuhost calls; see
// src/gpu/cuda_types.h for their sources). Built twice: as the runtime (FAKE_CUDA_RUNTIME) and as
// cuBLAS, which calls into the runtime's exported gpuhost_fake_cuda_* hooks the way real cuBLAS
// depends on cudart. It checks that calls are made correctly and answers from a scenario file
// ($GPUHOST_FAKE_CUDA_SCENARIO, format in README.md) with simulated timings: every enqueued
// operation advances its device's virtual clock by bytes / bandwidth or flops / TFLOPS, and CUDA
// events read that clock. A misuse is printed to stderr as "fake_cuda: <problem>" and answered
// with an error status, so gpuhost's error path and the test both see it.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "base/json.h"

#if defined(_WIN32)
#define FAKE_EXPORT extern "C" __declspec(dllexport)
#else
#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))
#endif

namespace {

constexpr int k_success = 0;
constexpr int k_invalid_value = 1;
constexpr int k_memory_allocation = 2;
constexpr int k_invalid_device = 101;
constexpr int k_invalid_resource_handle = 400;
constexpr int k_not_ready = 600;
constexpr int k_no_device = 100;

}  // namespace

#if defined(FAKE_CUDA_RUNTIME)
namespace {

struct Device {
  std::string pci_bus_id;
  double h2d_pinned = 25, d2h_pinned = 26, h2d_pageable = 10, d2h_pageable = 9, d2d = 1500;  // GB/s
  double fp32 = 19, tf32 = 150, fp16 = 290, bf16 = 290;                                        // TFLOPS
  double memory_gb = 80;
  double clock_s = 0;  // virtual time
  std::uint64_t next_address = 0;
};

struct Allocation {
  int device = -1;  // -1: pinned host memory
  std::size_t size = 0;
};

struct Event {
  int device = -1;
  bool recorded = false;
  bool synchronized = false;
  double time_s = 0;
};

struct State {
  std::mutex mutex;
  bool loaded = false;
  std::string load_error;
  int device_count_error = 0;  // the scenario's cudaGetDeviceCount answer, e.g. 35 (no driver)
  std::vector<Device> devices;
  int current = -1;  // no cudaSetDevice yet
  std::map<std::uintptr_t, Allocation> allocations;
  std::map<void*, Event> events;
};

State& state() {
  static State s;
  return s;
}

int fail(int status, const std::string& problem) {
  std::fprintf(stderr, "fake_cuda: %s\n", problem.c_str());
  return status;
}

void load(State& s) {
  if (s.loaded) return;
  s.loaded = true;
  const char* path = std::getenv("GPUHOST_FAKE_CUDA_SCENARIO");
  if (!path) {
    s.load_error = "GPUHOST_FAKE_CUDA_SCENARIO is not set";
    return;
  }
  std::FILE* f = std::fopen(path, "rb");
  if (!f) {
    s.load_error = std::string("cannot open scenario ") + path;
    return;
  }
  std::string text;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, f)) > 0;) text.append(buffer, n);
  std::fclose(f);
  auto doc = gpuhost::json::parse(text);
  if (!doc || !doc->find("devices")) {
    s.load_error = std::string("malformed scenario ") + path;
    return;
  }
  s.device_count_error = static_cast<int>(doc->get_int("device_count_error", 0));
  int index = 0;
  for (const auto& d : doc->find("devices")->items()) {
    Device dev;
    dev.pci_bus_id = d.get_string("pci_bus_id");
    dev.h2d_pinned = d.get_number("h2d_pinned_gbps", dev.h2d_pinned);
    dev.d2h_pinned = d.get_number("d2h_pinned_gbps", dev.d2h_pinned);
    dev.h2d_pageable = d.get_number("h2d_pageable_gbps", dev.h2d_pageable);
    dev.d2h_pageable = d.get_number("d2h_pageable_gbps", dev.d2h_pageable);
    dev.d2d = d.get_number("d2d_gbps", dev.d2d);
    dev.memory_gb = d.get_number("memory_gb", dev.memory_gb);
    if (const auto* t = d.find("tflops")) {
      dev.fp32 = t->get_number("fp32", dev.fp32);
      dev.tf32 = t->get_number("tf32", dev.tf32);
      dev.fp16 = t->get_number("fp16", dev.fp16);
      dev.bf16 = t->get_number("bf16", dev.bf16);
    }
    // Device memory lives at fake addresses that fault if gpuhost ever dereferences them.
    dev.next_address = 0x7e0000000000ull + static_cast<std::uint64_t>(index++) * 0x10000000000ull;
    s.devices.push_back(dev);
  }
}

// The allocation containing [p, p + bytes), or nullptr.
const Allocation* find(State& s, const void* p, std::size_t bytes) {
  auto address = reinterpret_cast<std::uintptr_t>(p);
  auto it = s.allocations.upper_bound(address);
  if (it == s.allocations.begin()) return nullptr;
  --it;
  if (address < it->first || address + bytes > it->first + it->second.size) return nullptr;
  return &it->second;
}

int require_device(State& s, const char* call) {
  load(s);
  if (!s.load_error.empty()) return fail(k_no_device, s.load_error);
  if (s.current < 0) return fail(k_invalid_device, std::string(call) + " before cudaSetDevice");
  return k_success;
}

void advance(State& s, double seconds) {
  s.devices[static_cast<std::size_t>(s.current)].clock_s += seconds;
  // New work makes every event recorded before it "not yet synchronised" again only for events
  // recorded after it; earlier ones stay complete.
}

}  // namespace

FAKE_EXPORT int cudaRuntimeGetVersion(int* v) {
  if (!v) return k_invalid_value;
  *v = 12040;
  return k_success;
}

FAKE_EXPORT int cudaDriverGetVersion(int* v) {
  if (!v) return k_invalid_value;
  *v = 12040;
  return k_success;
}

FAKE_EXPORT int cudaGetDeviceCount(int* count) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  load(s);
  if (!s.load_error.empty()) return fail(k_no_device, s.load_error);
  if (!count) return fail(k_invalid_value, "cudaGetDeviceCount(nullptr)");
  if (s.device_count_error != 0) {
    *count = 0;
    return s.device_count_error;  // an answer of the real runtime, not a misuse
  }
  *count = static_cast<int>(s.devices.size());
  return k_success;
}

FAKE_EXPORT int cudaSetDevice(int device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  load(s);
  if (device < 0 || device >= static_cast<int>(s.devices.size()))
    return fail(k_invalid_device, "cudaSetDevice(" + std::to_string(device) + "): no such device");
  s.current = device;
  return k_success;
}

FAKE_EXPORT int cudaDeviceGetPCIBusId(char* out, int length, int device) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  load(s);
  if (device < 0 || device >= static_cast<int>(s.devices.size())) return fail(k_invalid_device, "cudaDeviceGetPCIBusId: bad device");
  if (!out || length < 13) return fail(k_invalid_value, "cudaDeviceGetPCIBusId: buffer too small");
  std::snprintf(out, static_cast<std::size_t>(length), "%s", s.devices[static_cast<std::size_t>(device)].pci_bus_id.c_str());
  return k_success;
}

FAKE_EXPORT int cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (int rc = require_device(s, "cudaMemGetInfo")) return rc;
  auto bytes = static_cast<std::size_t>(s.devices[static_cast<std::size_t>(s.current)].memory_gb * 1e9);
  if (free_bytes) *free_bytes = bytes;
  if (total) *total = bytes;
  return k_success;
}

FAKE_EXPORT int cudaMalloc(void** p, std::size_t bytes) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (int rc = require_device(s, "cudaMalloc")) return rc;
  if (!p || bytes == 0) return fail(k_invalid_value, "cudaMalloc: null pointer or zero size");
  Device& d = s.devices[static_cast<std::size_t>(s.current)];
  std::uint64_t address = d.next_address;
  d.next_address += (bytes + 0xfffff) & ~0xfffffull;  // 1 MiB granularity keeps allocations apart
  s.allocations[static_cast<std::uintptr_t>(address)] = {s.current, bytes};
  *p = reinterpret_cast<void*>(address);
  return k_success;
}

FAKE_EXPORT int cudaFree(void* p) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == s.allocations.end() || it->second.device < 0) return fail(k_invalid_value, "cudaFree of a pointer cudaMalloc did not return");
  s.allocations.erase(it);
  return k_success;
}

FAKE_EXPORT int cudaMallocHost(void** p, std::size_t bytes) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (int rc = require_device(s, "cudaMallocHost")) return rc;
  if (!p || bytes == 0) return fail(k_invalid_value, "cudaMallocHost: null pointer or zero size");
  void* memory = std::malloc(bytes);
  if (!memory) return k_memory_allocation;
  s.allocations[reinterpret_cast<std::uintptr_t>(memory)] = {-1, bytes};
  *p = memory;
  return k_success;
}

FAKE_EXPORT int cudaFreeHost(void* p) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.find(reinterpret_cast<std::uintptr_t>(p));
  if (it == s.allocations.end() || it->second.device >= 0) return fail(k_invalid_value, "cudaFreeHost of a pointer cudaMallocHost did not return");
  s.allocations.erase(it);
  std::free(p);
  return k_success;
}

FAKE_EXPORT int cudaMemset(void* p, int, std::size_t bytes) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (int rc = require_device(s, "cudaMemset")) return rc;
  const Allocation* a = find(s, p, bytes);
  if (!a || a->device != s.current) return fail(k_invalid_value, "cudaMemset outside a device allocation of the current device");
  advance(s, static_cast<double>(bytes) / (s.devices[static_cast<std::size_t>(s.current)].d2d * 1e9));
  return k_success;
}

namespace {

int copy(const char* call, void* dst, const void* src, std::size_t bytes, int kind) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (int rc = require_device(s, call)) return rc;
  if (bytes == 0 || !dst || !src) return fail(k_invalid_value, std::string(call) + ": null pointer or zero size");
  const Allocation* d = find(s, dst, bytes);
  const Allocation* r = find(s, src, bytes);
  bool dst_device = d && d->device >= 0, src_device = r && r->device >= 0;
  Device& dev = s.devices[static_cast<std::size_t>(s.current)];
  double gbps = 0;
  switch (kind) {
    case 1:  // host to device
      if (!dst_device || d->device != s.current || src_device)
        return fail(k_invalid_value, std::string(call) + " HostToDevice: destination must be current-device memory, source host memory");
      gbps = r ? dev.h2d_pinned : dev.h2d_pageable;
      break;
    case 2:
      if (!src_device || r->device != s.current || dst_device)
        return fail(k_invalid_value, std::string(call) + " DeviceToHost: source must be current-device memory, destination host memory");
      gbps = d ? dev.d2h_pinned : dev.d2h_pageable;
      break;
    case 3:
      if (!src_device || !dst_device || r->device != s.current || d->device != s.current)
        return fail(k_invalid_value, std::string(call) + " DeviceToDevice: both pointers must be current-device memory");
      gbps = dev.d2d / 2;  // d2d_gbps counts read + write
      break;
    default:
      return fail(k_invalid_value, std::string(call) + ": unexpected cudaMemcpyKind " + std::to_string(kind));
  }
  advance(s, static_cast<double>(bytes) / (gbps * 1e9));
  return k_success;
}

}  // namespace

FAKE_EXPORT int cudaMemcpy(void* dst, const void* src, std::size_t bytes, int kind) {
  return copy("cudaMemcpy", dst, src, bytes, kind);
}

FAKE_EXPORT int cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, int kind, void* stream) {
  if (stream) return fail(k_invalid_resource_handle, "cudaMemcpyAsync: the fake knows only the default stream");
  return copy("cudaMemcpyAsync", dst, src, bytes, kind);
}

FAKE_EXPORT int cudaDeviceSynchronize() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (int rc = require_device(s, "cudaDeviceSynchronize")) return rc;
  for (auto& [_, e] : s.events)
    if (e.recorded && e.device == s.current) e.synchronized = true;
  return k_success;
}

FAKE_EXPORT int cudaEventCreate(void** event) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (int rc = require_device(s, "cudaEventCreate")) return rc;
  if (!event) return fail(k_invalid_value, "cudaEventCreate(nullptr)");
  *event = std::malloc(1);
  s.events[*event] = Event{s.current};
  return k_success;
}

FAKE_EXPORT int cudaEventDestroy(void* event) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.events.erase(event)) return fail(k_invalid_resource_handle, "cudaEventDestroy of an unknown event");
  std::free(event);
  return k_success;
}

FAKE_EXPORT int cudaEventRecord(void* event, void* stream) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (int rc = require_device(s, "cudaEventRecord")) return rc;
  auto it = s.events.find(event);
  if (it == s.events.end()) return fail(k_invalid_resource_handle, "cudaEventRecord of an unknown event");
  if (stream) return fail(k_invalid_resource_handle, "cudaEventRecord: the fake knows only the default stream");
  if (it->second.device != s.current) return fail(k_invalid_resource_handle, "cudaEventRecord on another device's event");
  it->second.recorded = true;
  it->second.synchronized = false;
  it->second.time_s = s.devices[static_cast<std::size_t>(s.current)].clock_s;
  return k_success;
}

FAKE_EXPORT int cudaEventSynchronize(void* event) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.events.find(event);
  if (it == s.events.end()) return fail(k_invalid_resource_handle, "cudaEventSynchronize of an unknown event");
  if (!it->second.recorded) return fail(k_invalid_resource_handle, "cudaEventSynchronize of an event never recorded");
  // Stream order: every event recorded earlier on this device is complete too.
  for (auto& [_, e] : s.events)
    if (e.recorded && e.device == it->second.device && e.time_s <= it->second.time_s) e.synchronized = true;
  return k_success;
}

FAKE_EXPORT int cudaEventElapsedTime(float* ms, void* start, void* stop) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto a = s.events.find(start), b = s.events.find(stop);
  if (!ms || a == s.events.end() || b == s.events.end()) return fail(k_invalid_resource_handle, "cudaEventElapsedTime: unknown event");
  if (!a->second.recorded || !b->second.recorded) return fail(k_invalid_resource_handle, "cudaEventElapsedTime: event not recorded");
  if (!b->second.synchronized) return fail(k_not_ready, "cudaEventElapsedTime before the stop event was synchronised (unsynchronised timing)");
  *ms = static_cast<float>((b->second.time_s - a->second.time_s) * 1000);
  return k_success;
}

FAKE_EXPORT const char* cudaGetErrorString(int status) {
  switch (status) {
    case k_success: return "no error";
    case k_invalid_value: return "invalid argument";
    case k_memory_allocation: return "out of memory";
    case k_no_device: return "no CUDA-capable device is detected";
    case k_invalid_device: return "invalid device ordinal";
    case k_invalid_resource_handle: return "invalid resource handle";
    case k_not_ready: return "device not ready";
    default: return "unknown error";
  }
}

// Hooks for the fake cuBLAS. Returns 0 or a CUDA status.
FAKE_EXPORT int gpuhost_fake_cuda_current_device() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return require_device(s, "cublas call") == k_success ? s.current : -1;
}

FAKE_EXPORT int gpuhost_fake_cuda_check_device_pointer(const void* p, std::size_t bytes) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  const Allocation* a = find(s, p, bytes);
  return a && a->device == s.current ? k_success : k_invalid_value;
}

FAKE_EXPORT void gpuhost_fake_cuda_run_gemm(double flops, int kind) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  Device& d = s.devices[static_cast<std::size_t>(s.current)];
  double tflops = kind == 0 ? d.fp32 : kind == 1 ? d.tf32 : kind == 2 ? d.fp16 : d.bf16;
  d.clock_s += flops / (tflops * 1e12);
}

#else  // cuBLAS

extern "C" int gpuhost_fake_cuda_current_device();
extern "C" int gpuhost_fake_cuda_check_device_pointer(const void* p, std::size_t bytes);
extern "C" void gpuhost_fake_cuda_run_gemm(double flops, int kind);

namespace {

constexpr int k_status_not_initialized = 1;
constexpr int k_status_invalid_value = 7;
constexpr int k_status_not_supported = 15;

std::mutex g_mutex;
std::map<void*, int> g_handles;  // handle -> device

int fail_blas(int status, const std::string& problem) {
  std::fprintf(stderr, "fake_cuda: %s\n", problem.c_str());
  return status;
}

}  // namespace

FAKE_EXPORT int cublasCreate_v2(void** handle) {
  int device = gpuhost_fake_cuda_current_device();
  if (device < 0) return fail_blas(k_status_not_initialized, "cublasCreate before cudaSetDevice");
  if (!handle) return fail_blas(k_status_invalid_value, "cublasCreate(nullptr)");
  std::lock_guard lock(g_mutex);
  *handle = std::malloc(1);
  g_handles[*handle] = device;
  return 0;
}

FAKE_EXPORT int cublasDestroy_v2(void* handle) {
  std::lock_guard lock(g_mutex);
  if (!g_handles.erase(handle)) return fail_blas(k_status_not_initialized, "cublasDestroy of an unknown handle");
  std::free(handle);
  return 0;
}

FAKE_EXPORT int cublasGemmEx(void* handle, int transa, int transb, int m, int n, int k, const void* alpha, const void* a,
                             int a_type, int lda, const void* b, int b_type, int ldb, const void* beta, void* c, int c_type,
                             int ldc, int compute_type, int algo) {
  {
    std::lock_guard lock(g_mutex);
    auto it = g_handles.find(handle);
    if (it == g_handles.end()) return fail_blas(k_status_not_initialized, "cublasGemmEx: unknown handle");
    if (it->second != gpuhost_fake_cuda_current_device())
      return fail_blas(k_status_invalid_value, "cublasGemmEx: handle created on another device than the current one");
  }
  if (transa != 0 || transb != 0) return fail_blas(k_status_invalid_value, "cublasGemmEx: the fake expects CUBLAS_OP_N");
  if (m <= 0 || n <= 0 || k <= 0 || lda < m || ldb < k || ldc < m)
    return fail_blas(k_status_invalid_value, "cublasGemmEx: bad sizes or leading dimensions");
  if (!alpha || !beta) return fail_blas(k_status_invalid_value, "cublasGemmEx: alpha/beta must be host pointers");
  if (a_type != b_type || a_type != c_type)
    return fail_blas(k_status_not_supported, "cublasGemmEx: mixed A/B/C types are not what gpuhost asks for");
  int element = 0, kind = 0;
  if (a_type == 0 && compute_type == 68) element = 4, kind = 0;        // CUDA_R_32F, CUBLAS_COMPUTE_32F
  else if (a_type == 0 && compute_type == 77) element = 4, kind = 1;   // CUBLAS_COMPUTE_32F_FAST_TF32
  else if (a_type == 2 && compute_type == 68) element = 2, kind = 2;   // CUDA_R_16F
  else if (a_type == 14 && compute_type == 68) element = 2, kind = 3;  // CUDA_R_16BF
  else
    return fail_blas(k_status_not_supported, "cublasGemmEx: unsupported type " + std::to_string(a_type) + " with compute type " +
                                                 std::to_string(compute_type));
  if (algo != -1 && algo != 99 && (algo < 0 || algo > 23))
    return fail_blas(k_status_invalid_value, "cublasGemmEx: bad cublasGemmAlgo_t " + std::to_string(algo));
  auto bytes = [&](int rows, int cols, int ld) { return static_cast<std::size_t>(ld) * static_cast<std::size_t>(cols - 1) * element + static_cast<std::size_t>(rows) * element; };
  if (gpuhost_fake_cuda_check_device_pointer(a, bytes(m, k, lda)) != 0 ||
      gpuhost_fake_cuda_check_device_pointer(b, bytes(k, n, ldb)) != 0 ||
      gpuhost_fake_cuda_check_device_pointer(c, bytes(m, n, ldc)) != 0)
    return fail_blas(k_status_invalid_value, "cublasGemmEx: A, B or C is not current-device memory large enough for the shape");
  gpuhost_fake_cuda_run_gemm(2.0 * m * static_cast<double>(n) * k, kind);
  return 0;
}

#endif
