#include "gpu/cuda_runtime.h"

#include "base/strings.h"
#include "platform/environment.h"

namespace gpuhost::gpu {
namespace {

// The first candidate that loads, or `unavailable` naming every attempt.
Result<platform::SharedLibrary> load_first(const std::vector<std::string>& candidates, const char* what) {
  std::vector<std::string> tried;
  for (const auto& name : candidates) {
    auto library = platform::SharedLibrary::open(name);
    if (library) return std::move(*library);
    tried.push_back(library.error().message);
  }
  return make_error(ErrorCode::unavailable, std::string("loading the ") + what + ": " + join(tried, "; "));
}

template <typename Fn>
bool resolve(const platform::SharedLibrary& library, Fn& slot, const char* name, std::vector<std::string>& missing) {
  slot = reinterpret_cast<Fn>(library.symbol(name));
  if (!slot) missing.emplace_back(name);
  return slot != nullptr;
}

std::vector<std::string> with_override(const char* env, std::vector<std::string> defaults) {
  if (auto value = platform::get_env(env); value && !value->empty()) return {*value};
  return defaults;
}

}  // namespace

std::vector<std::string> cudart_library_candidates(platform::OsFamily os) {
  if (os == platform::OsFamily::windows)
    return with_override(k_cudart_library_env, {"cudart64_13.dll", "cudart64_12.dll", "cudart64_110.dll"});
  return with_override(k_cudart_library_env,
                       {"libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so"});
}

std::vector<std::string> cublas_library_candidates(platform::OsFamily os) {
  if (os == platform::OsFamily::windows)
    return with_override(k_cublas_library_env, {"cublas64_13.dll", "cublas64_12.dll", "cublas64_11.dll"});
  return with_override(k_cublas_library_env, {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"});
}

Result<CudaLibraries> CudaLibraries::open() {
  auto os = platform::current_os();
  return open(cudart_library_candidates(os), cublas_library_candidates(os));
}

Result<CudaLibraries> CudaLibraries::open(const std::vector<std::string>& cudart_candidates,
                                          const std::vector<std::string>& cublas_candidates) {
  CudaLibraries libs;
  libs.m_cudart = GPUHOST_TRY(load_first(cudart_candidates, "CUDA runtime"));
  libs.m_cublas = GPUHOST_TRY(load_first(cublas_candidates, "cuBLAS library"));
  std::vector<std::string> missing;
  auto& f = libs.m_functions;
  const auto& rt = libs.m_cudart;
  resolve(rt, f.runtime_get_version, "cudaRuntimeGetVersion", missing);
  resolve(rt, f.driver_get_version, "cudaDriverGetVersion", missing);
  resolve(rt, f.get_device_count, "cudaGetDeviceCount", missing);
  resolve(rt, f.set_device, "cudaSetDevice", missing);
  resolve(rt, f.device_get_pci_bus_id, "cudaDeviceGetPCIBusId", missing);
  resolve(rt, f.mem_get_info, "cudaMemGetInfo", missing);
  resolve(rt, f.malloc, "cudaMalloc", missing);
  resolve(rt, f.free, "cudaFree", missing);
  resolve(rt, f.malloc_host, "cudaMallocHost", missing);
  resolve(rt, f.free_host, "cudaFreeHost", missing);
  resolve(rt, f.memset, "cudaMemset", missing);
  resolve(rt, f.memcpy, "cudaMemcpy", missing);
  resolve(rt, f.memcpy_async, "cudaMemcpyAsync", missing);
  resolve(rt, f.device_synchronize, "cudaDeviceSynchronize", missing);
  resolve(rt, f.event_create, "cudaEventCreate", missing);
  resolve(rt, f.event_destroy, "cudaEventDestroy", missing);
  resolve(rt, f.event_record, "cudaEventRecord", missing);
  resolve(rt, f.event_synchronize, "cudaEventSynchronize", missing);
  resolve(rt, f.event_elapsed_time, "cudaEventElapsedTime", missing);
  resolve(rt, f.get_error_string, "cudaGetErrorString", missing);
  const auto& bl = libs.m_cublas;
  resolve(bl, f.cublas_create, "cublasCreate_v2", missing);
  resolve(bl, f.cublas_destroy, "cublasDestroy_v2", missing);
  resolve(bl, f.cublas_gemm_ex, "cublasGemmEx", missing);
  if (!missing.empty())
    return make_error(ErrorCode::unavailable, "the CUDA runtime (" + rt.name() + ") or cuBLAS (" + bl.name() +
                                                  ") lacks " + join(missing, ", "));
  return libs;
}

std::string CudaLibraries::describe(const char* call, cuda::cudaError_t status) const {
  std::string text = std::string(call) + " failed";
  if (m_functions.get_error_string) {
    if (const char* s = m_functions.get_error_string(status)) text += std::string(": ") + s;
  }
  return text + " (" + std::to_string(status) + ")";
}

}  // namespace gpuhost::gpu
