#pragma once
// GPTQ on the GPU (docs/GPTQ.md, "On the GPU"): the algorithm of qgru/gptq/gptq.h with the same options,
// column plan (qgru/gptq/column_plan.h) and per-row arithmetic (qgru/gptq/row_block.h), split as
//   Hessian      H += 2·XᵀX per chunk of activation rows: float32 rows widened to float64 on the device (each
//                product of two float32 values is exact in float64), cublasDsyrk, float64 sums;
//   setup        diag(H) to the host (K values) for the plan; dead columns, the permutation and the parameter
//                tables on the device;
//   inverse      H + damp·mean(diag H)·I reversed, cusolverDnDpotrf, cusolverDnXtrtri: the CPU path's sequence
//                (one potrf of J·H·J, one trtri), retried with damp × 10 as it is;
//   blocks       per block: group parameters from W where groups start, one thread per output row runs
//                gptq_row_block over the block, then W[:, end:] −= Err·U[block, end:] by cublasDgemm;
//   packing      codes back to the original column order and packed into qweight words on the device.
// The weight lives transposed on the device (Wt [K, N]) so that a warp's threads, one per output row, read
// and write consecutive addresses. Host-only API without CUDA headers. Never run on a GPU where it was
// written: test/cuda's `gptq` check and bench_cuda_gptq measure it (scripts/gpu_session.sh).
#include <cstdint>
#include <memory>
#include <vector>

#include "qgru/gptq/gptq.h"

namespace qgru::cuda {

// H = 2·XᵀX of K-feature activation rows, accumulated on the device in float64 (upper and lower triangle
// filled by hessian()). `stream` is a cudaStream_t (nullptr: the default stream); the object's calls are
// ordered on it.
class DeviceHessian {
 public:
  DeviceHessian(int64_t K, void* stream = nullptr);
  ~DeviceHessian();
  DeviceHessian(const DeviceHessian&) = delete;
  DeviceHessian& operator=(const DeviceHessian&) = delete;

  // Host rows [M, K] float32 (token-major), uploaded a chunk at a time.
  void add_token_major(const float* rows, int64_t M);
  // Host columns [K, M] float32 (feature-major), uploaded a chunk of tokens at a time.
  void add_feature_major(const float* X, int64_t M);
  // Device rows [M, K] float32 with row stride `ld` (elements), already on this device.
  void add_device_rows(const float* rows, int64_t M, int64_t ld);

  int64_t K() const;
  int64_t tokens() const;
  // Device pointer to the symmetric K×K float64 H (both triangles; valid until the next add or destruction).
  const double* device_hessian();
  std::vector<double> hessian();  // downloaded

 private:
  struct State;
  std::unique_ptr<State> state_;
};

struct DeviceGptqOutput {
  gptq::GptqResult result;      // as gptq_quantize returns it (codes only when want_codes)
  std::vector<int32_t> qweight; // [K·bits/32, N], packed on the device (qgru/gptq/pack.h); empty if K·bits % 32
  std::vector<double> tie_margin;  // [N, K] original order, rounding_margin of each code (when want_tie_margin)
  double seconds = 0.0;         // GPTQ on the device (setup to packed words downloaded), host wall clock
};

struct DeviceGptqRequest {
  bool want_codes = true;        // download the codes into result.codes ([N, K], int32)
  bool want_tie_margin = false;  // and each code's rounding margin (checks)
};

// GPTQ of W [N, K] (host, row-major float64) with H (device, symmetric K×K float64, as DeviceHessian gives
// it; not modified) on `stream`. Synchronizes the stream (the plan needs diag(H) and the factorization's
// status on the host). Throws qgru::Error on bad options and when H stays not positive definite (the CPU
// path's messages), CudaFailure on a CUDA failure.
DeviceGptqOutput gptq_quantize_device(const std::vector<double>& W, int64_t N, int64_t K, const double* device_H,
                                      const gptq::GptqOptions& options, const DeviceGptqRequest& request = {},
                                      void* stream = nullptr);

// The same from a host H (checked as gptq_quantize checks it, then uploaded).
DeviceGptqOutput gptq_quantize_device(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                                      const gptq::GptqOptions& options, const DeviceGptqRequest& request = {},
                                      void* stream = nullptr);

// The result of the above: what `qgru gptq --device cuda` runs.
gptq::GptqResult gptq_quantize_cuda(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                                    const gptq::GptqOptions& options);

}  // namespace qgru::cuda
