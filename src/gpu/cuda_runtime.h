#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "gpu/cuda_types.h"
#include "platform/shared_library.h"
#include "platform/system_info.h"

namespace gpuhost::gpu {

// Test or unusual installs can name one library file each; when set it is the only candidate.
inline constexpr const char* k_cudart_library_env = "GPUHOST_CUDART_LIBRARY";
inline constexpr const char* k_cublas_library_env = "GPUHOST_CUBLAS_LIBRARY";

// The resolved CUDA runtime and cuBLAS functions; every pointer is set once open() succeeded.
struct CudaFunctions {
  cuda::cudaRuntimeGetVersion_fn runtime_get_version = nullptr;
  cuda::cudaDriverGetVersion_fn driver_get_version = nullptr;
  cuda::cudaGetDeviceCount_fn get_device_count = nullptr;
  cuda::cudaSetDevice_fn set_device = nullptr;
  cuda::cudaDeviceGetPCIBusId_fn device_get_pci_bus_id = nullptr;
  cuda::cudaMemGetInfo_fn mem_get_info = nullptr;
  cuda::cudaMalloc_fn malloc = nullptr;
  cuda::cudaFree_fn free = nullptr;
  cuda::cudaMallocHost_fn malloc_host = nullptr;
  cuda::cudaFreeHost_fn free_host = nullptr;
  cuda::cudaMemset_fn memset = nullptr;
  cuda::cudaMemcpy_fn memcpy = nullptr;
  cuda::cudaMemcpyAsync_fn memcpy_async = nullptr;
  cuda::cudaDeviceSynchronize_fn device_synchronize = nullptr;
  cuda::cudaEventCreate_fn event_create = nullptr;
  cuda::cudaEventDestroy_fn event_destroy = nullptr;
  cuda::cudaEventRecord_fn event_record = nullptr;
  cuda::cudaEventSynchronize_fn event_synchronize = nullptr;
  cuda::cudaEventElapsedTime_fn event_elapsed_time = nullptr;
  cuda::cudaGetErrorString_fn get_error_string = nullptr;
  cuda::cublasCreate_fn cublas_create = nullptr;    // cublasCreate_v2
  cuda::cublasDestroy_fn cublas_destroy = nullptr;  // cublasDestroy_v2
  cuda::cublasGemmEx_fn cublas_gemm_ex = nullptr;
};

// The CUDA runtime (cudart) and cuBLAS, loaded at run time (never linked), with their function
// table. Move-only; immutable after open(). The libraries themselves are thread-safe, but the
// current device is per host thread: callers set it on the thread that uses it.
class CudaLibraries {
 public:
  // Tries cudart_library_candidates() and cublas_library_candidates(); `unavailable` with every
  // attempt named when either library cannot be loaded or lacks a function.
  [[nodiscard]] static Result<CudaLibraries> open();
  [[nodiscard]] static Result<CudaLibraries> open(const std::vector<std::string>& cudart_candidates,
                                                  const std::vector<std::string>& cublas_candidates);

  [[nodiscard]] const CudaFunctions& functions() const { return m_functions; }
  [[nodiscard]] const std::string& cudart_path() const { return m_cudart.name(); }
  [[nodiscard]] const std::string& cublas_path() const { return m_cublas.name(); }
  // "cudaMalloc failed: out of memory (2)".
  [[nodiscard]] std::string describe(const char* call, cuda::cudaError_t status) const;

 private:
  platform::SharedLibrary m_cudart;
  platform::SharedLibrary m_cublas;
  CudaFunctions m_functions;
};

// Candidates, newest major version first, then the unversioned development name: Linux
// libcudart.so.13/.12/.11.0 and libcublas.so.13/.12/.11 (sonames of the CUDA 11-13 toolkits and
// the nvidia-cuda-runtime-cu12 / nvidia-cublas-cu12 wheels); Windows cudart64_13.dll,
// cudart64_12.dll, cudart64_110.dll and cublas64_13.dll, cublas64_12.dll, cublas64_11.dll
// (toolkit bin/ names). An environment override is the only candidate when set.
[[nodiscard]] std::vector<std::string> cudart_library_candidates(platform::OsFamily os);
[[nodiscard]] std::vector<std::string> cublas_library_candidates(platform::OsFamily os);

}  // namespace gpuhost::gpu
