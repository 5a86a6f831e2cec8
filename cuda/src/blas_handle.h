#pragma once
// Internal: one cuBLAS handle bound to one stream with a workspace of its own (cublasSetWorkspace after
// cublasSetStream, which resets it), so that cuBLAS allocates nothing while a stream is captured into a CUDA
// graph (GruCellCuda's time loop). One per executor: QuantGruCuda shares its handle with every cell.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <utility>

#include "qgru_cuda/check.h"
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda {

// The workspace the cuBLAS API reference recommends for cublasSetWorkspace: 32 MiB on Hopper (compute capability
// 9.x) and later, 4 MiB before; a smaller one can keep cuBLAS from its fastest kernels on an H100/H200.
inline size_t blas_workspace_bytes_for(int compute_capability_major) {
  return compute_capability_major >= 9 ? size_t{32} << 20 : size_t{4} << 20;
}
inline size_t current_device_blas_workspace_bytes() {
  int device = 0, major = 0;
  QGRU_CUDA_CHECK(cudaGetDevice(&device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return blas_workspace_bytes_for(major);
}

class BlasHandle {
 public:
  BlasHandle() = default;
  explicit BlasHandle(cudaStream_t stream) : workspace_(current_device_blas_workspace_bytes()) {
    QGRU_CUBLAS_CHECK(blas::cublasCreate(&handle_));
    QGRU_CUBLAS_CHECK(blas::cublasSetStream(handle_, stream));
    QGRU_CUBLAS_CHECK(blas::cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()));
  }
  ~BlasHandle() {
    if (handle_ != nullptr) blas::cublasDestroy(handle_);  // destructor: nothing to report to
  }
  BlasHandle(BlasHandle&& other) noexcept : handle_(other.handle_), workspace_(std::move(other.workspace_)) {
    other.handle_ = nullptr;
  }
  BlasHandle& operator=(BlasHandle&& other) noexcept {
    if (this != &other) {
      if (handle_ != nullptr) blas::cublasDestroy(handle_);
      handle_ = other.handle_;
      other.handle_ = nullptr;
      workspace_ = std::move(other.workspace_);
    }
    return *this;
  }
  BlasHandle(const BlasHandle&) = delete;
  BlasHandle& operator=(const BlasHandle&) = delete;
  cublasHandle_t get() const { return handle_; }
  // Moves the handle to another stream, keeping its own workspace (cublasSetStream resets it).
  void bind(cudaStream_t stream) {
    QGRU_CUBLAS_CHECK(blas::cublasSetStream(handle_, stream));
    QGRU_CUBLAS_CHECK(blas::cublasSetWorkspace(handle_, workspace_.data(), workspace_.bytes()));
  }

 private:
  cublasHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
};

}  // namespace qgru::cuda
