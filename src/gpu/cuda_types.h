#pragma once
// The CUDA runtime and cuBLAS types and functions gpuhost calls, declared by hand (the libraries
// are loaded at run time, never linked, and no CUDA header is needed to build). Values and
// signatures from the CUDA Toolkit 12 headers as documented in docs.nvidia.com/cuda/
// cuda-runtime-api (driver_types.h, library_types.h) and docs.nvidia.com/cuda/cublas
// (cublas_api.h: cublasGemmEx, cublasComputeType_t).

#include <cstddef>

namespace gpuhost::gpu::cuda {

using cudaError_t = int;
inline constexpr cudaError_t cudaSuccess = 0;
inline constexpr cudaError_t cudaErrorInsufficientDriver = 35;
inline constexpr cudaError_t cudaErrorNoDevice = 100;
inline constexpr cudaError_t cudaErrorNotReady = 600;

using cudaEvent_t = struct CUevent_st*;
using cudaStream_t = struct CUstream_st*;

// cudaMemcpyKind
inline constexpr int cudaMemcpyHostToDevice = 1;
inline constexpr int cudaMemcpyDeviceToHost = 2;
inline constexpr int cudaMemcpyDeviceToDevice = 3;

// cudaDataType_t (library_types.h)
inline constexpr int CUDA_R_32F = 0;
inline constexpr int CUDA_R_16F = 2;
inline constexpr int CUDA_R_16BF = 14;

using cublasStatus_t = int;
inline constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
using cublasHandle_t = struct cublasContext*;
inline constexpr int CUBLAS_OP_N = 0;
// cublasComputeType_t
inline constexpr int CUBLAS_COMPUTE_32F = 68;
inline constexpr int CUBLAS_COMPUTE_32F_FAST_TF32 = 77;
// cublasGemmAlgo_t
inline constexpr int CUBLAS_GEMM_DEFAULT = -1;

extern "C" {
using cudaRuntimeGetVersion_fn = cudaError_t (*)(int*);
using cudaDriverGetVersion_fn = cudaError_t (*)(int*);
using cudaGetDeviceCount_fn = cudaError_t (*)(int*);
using cudaSetDevice_fn = cudaError_t (*)(int);
using cudaDeviceGetPCIBusId_fn = cudaError_t (*)(char*, int, int);
using cudaMemGetInfo_fn = cudaError_t (*)(std::size_t*, std::size_t*);
using cudaMalloc_fn = cudaError_t (*)(void**, std::size_t);
using cudaFree_fn = cudaError_t (*)(void*);
using cudaMallocHost_fn = cudaError_t (*)(void**, std::size_t);
using cudaFreeHost_fn = cudaError_t (*)(void*);
using cudaMemset_fn = cudaError_t (*)(void*, int, std::size_t);
using cudaMemcpyAsync_fn = cudaError_t (*)(void*, const void*, std::size_t, int, cudaStream_t);
using cudaMemcpy_fn = cudaError_t (*)(void*, const void*, std::size_t, int);
using cudaDeviceSynchronize_fn = cudaError_t (*)();
using cudaEventCreate_fn = cudaError_t (*)(cudaEvent_t*);
using cudaEventDestroy_fn = cudaError_t (*)(cudaEvent_t);
using cudaEventRecord_fn = cudaError_t (*)(cudaEvent_t, cudaStream_t);
using cudaEventSynchronize_fn = cudaError_t (*)(cudaEvent_t);
using cudaEventElapsedTime_fn = cudaError_t (*)(float*, cudaEvent_t, cudaEvent_t);
using cudaGetErrorString_fn = const char* (*)(cudaError_t);

using cublasCreate_fn = cublasStatus_t (*)(cublasHandle_t*);
using cublasDestroy_fn = cublasStatus_t (*)(cublasHandle_t);
using cublasGemmEx_fn = cublasStatus_t (*)(cublasHandle_t, int transa, int transb, int m, int n, int k,
                                           const void* alpha, const void* a, int a_type, int lda, const void* b,
                                           int b_type, int ldb, const void* beta, void* c, int c_type, int ldc,
                                           int compute_type, int algo);
}

}  // namespace gpuhost::gpu::cuda
