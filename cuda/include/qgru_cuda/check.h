#pragma once
// Checked CUDA runtime and cuBLAS calls (internal to cuda/src). Every call goes through one of these; a
// failure throws CudaFailure "CUDA error <name> (<text>) in `<call>` at <file>:<line>"; cuBLAS's
// CUBLAS_STATUS_NOT_SUPPORTED throws NotSupported instead, with the same call text and place.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "qgru_cuda/status.h"

namespace qgru::cuda {

void check_cuda_status(cudaError_t status, const char* call, const char* file, int line);
void check_cublas_status(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace qgru::cuda

#define QGRU_CUDA_CHECK(call) ::qgru::cuda::check_cuda_status((call), #call, __FILE__, __LINE__)
#define QGRU_CUBLAS_CHECK(call) ::qgru::cuda::check_cublas_status((call), #call, __FILE__, __LINE__)
// After a kernel launch: `what` names the kernel and its configuration.
#define QGRU_CUDA_CHECK_LAUNCH(what) ::qgru::cuda::check_cuda_status(cudaGetLastError(), what, __FILE__, __LINE__)
