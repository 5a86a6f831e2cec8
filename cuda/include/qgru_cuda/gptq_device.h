#pragma once
// GPTQ on the GPU (docs/GPTQ.md, "On the GPU"): the device-free driver qgru/gptq/device_driver.h run on this
// library's kernels (gptq_kernels.cu), cuBLAS (dsyrk, dgemm) and cuSOLVER (dpotrf, Xtrtri) on a caller's stream.
// Host-only API without CUDA headers. Never run on a GPU where it was written: test/cuda's `gptq` check and
// bench_cuda_gptq measure it (scripts/gpu_session.sh).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qgru/gptq/device_driver.h"
#include "qgru/gptq/gptq.h"

namespace qgru::cuda {

using gptq::DeviceGptqOutput;
using gptq::DeviceGptqRequest;

// H = 2·XᵀX of K-feature activation rows, accumulated on the device in float64 (gptq::DeviceHessianSum).
// `stream` is a cudaStream_t (nullptr: the default stream); the object's work is ordered on it.
class DeviceHessian {
 public:
  // product: dsyrk or dgemm per chunk (gptq::HessianProduct); default_hessian_product() unless given.
  explicit DeviceHessian(int64_t K, void* stream = nullptr);
  DeviceHessian(int64_t K, void* stream, gptq::HessianProduct product);
  ~DeviceHessian();
  DeviceHessian(const DeviceHessian&) = delete;
  DeviceHessian& operator=(const DeviceHessian&) = delete;

  void add_token_major(const float* rows, int64_t M);              // host rows [M, K]
  void add_feature_major(const float* X, int64_t M);               // host [K, M]
  void add_device_rows(const float* rows, int64_t M, int64_t ld);  // device rows [M, K], row stride ld
  // Rows a framework wrote into device memory ([M, K] float32, row stride ld; a PyTorch tensor's data), with the
  // stream that wrote them in __cuda_array_interface__'s convention: 0 nothing to wait for, 1 the legacy default
  // stream, 2 the per-thread default stream, otherwise a cudaStream_t. Refused (qgru::Error naming `source`,
  // nothing accumulated) unless the rows lie in the memory of the GPU this accumulator was made on and are all
  // finite; the accumulation is ordered after the producer stream's work so far, and the call returns once the
  // rows have been read (the caller may then free or overwrite them).
  void add_stream_rows(const float* rows, int64_t M, int64_t ld, uintptr_t producer_stream, const std::string& source);

  int64_t K() const;
  int64_t tokens() const;
  const double* device_hessian();  // symmetric K×K float64 on the device, valid until the next add
  std::vector<double> hessian();   // downloaded

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// The environment's QGRU_CUDA_GPTQ_HESSIAN (syrk or gemm; unset or empty: syrk); another value throws qgru::Error.
gptq::HessianProduct default_hessian_product();

// GPTQ of W [N, K] (host, row-major float64) with H on the device (symmetric K×K float64, as DeviceHessian gives
// it; not modified) on `stream` (synchronized: the plan needs diag(H) and the factorization's status on the
// host). qgru::Error on bad options, too little device memory and an H that stays not positive definite (the
// CPU path's messages); NoDevice without a usable GPU; CudaFailure when a CUDA call fails.
DeviceGptqOutput gptq_quantize_device(const std::vector<double>& W, int64_t N, int64_t K, const double* device_H,
                                      const gptq::GptqOptions& options, const DeviceGptqRequest& request = {},
                                      void* stream = nullptr);
// The same from a host H (checked as gptq_quantize checks it, then uploaded).
DeviceGptqOutput gptq_quantize_device(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                                      const gptq::GptqOptions& options, const DeviceGptqRequest& request = {},
                                      void* stream = nullptr);
// Its result: what `qgru gptq --device cuda` runs.
gptq::GptqResult gptq_quantize_cuda(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                                    const gptq::GptqOptions& options);

}  // namespace qgru::cuda
