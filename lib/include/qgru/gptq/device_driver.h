#pragma once
// GPTQ on the GPU, device-free: the algorithm of qgru/gptq/gptq.h run against DeviceOps (qgru/gptq/device_ops.h).
// The CUDA library calls it with its kernels, cuBLAS and cuSOLVER (qgru_cuda/gptq_device.h); the CPU tests with
// an emulation of them. Steps and their reasons: docs/GPTQ.md, "On the GPU".
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/gptq/device_ops.h"
#include "qgru/gptq/gptq.h"

namespace qgru::gptq {

struct DeviceGptqOutput {
  GptqResult result;               // as gptq_quantize returns it (codes only when want_codes)
  std::vector<int32_t> qweight;    // [K·bits/32, N], packed on the device (pack.h); empty unless K·bits % 32 == 0
  std::vector<double> tie_margin;  // [N, K] original order: rounding_margin of each code (when want_tie_margin)
  double seconds = 0.0;            // the driver's wall clock, setup to the packed words on the host
};

struct DeviceGptqRequest {
  bool want_codes = true;        // result.codes ([N, K])
  bool want_tie_margin = false;  // tie_margin (checks)
};

// GPTQ of W [N, K] (host, row-major float64) with H (device memory of `ops`, symmetric K×K float64; not
// modified). Throws qgru::Error on bad options, a non-finite H, too little device memory, and when H stays not
// positive definite (the CPU path's messages).
DeviceGptqOutput device_gptq(DeviceOps& ops, const std::vector<double>& W, int64_t N, int64_t K, const double* H,
                             const GptqOptions& options, const DeviceGptqRequest& request = {});

// How a chunk's product is formed: dsyrk on one triangle (half the flops), or dgemm on the whole matrix (twice
// the flops, but the routine libraries tune hardest; which is faster on a GPU is for the benchmark to say).
enum class HessianProduct { kSyrk, kGemm };
// "syrk" / "gemm"; parse throws qgru::Error naming `what` for another name.
const char* hessian_product_name(HessianProduct product);
HessianProduct parse_hessian_product(const std::string& name, const std::string& what);

// H = 2·XᵀX accumulated in device memory of `ops` in float64: float32 rows widened, the product on the upper
// triangle (row-major) or the whole matrix, the lower triangle mirrored from the upper when read (so H is
// exactly symmetric either way).
class DeviceHessianSum {
 public:
  DeviceHessianSum(DeviceOps& ops, int64_t K, uint64_t staging_bytes, HessianProduct product = HessianProduct::kSyrk);
  ~DeviceHessianSum();
  DeviceHessianSum(const DeviceHessianSum&) = delete;
  DeviceHessianSum& operator=(const DeviceHessianSum&) = delete;

  void add_device_rows(const float* rows, int64_t M, int64_t ld);  // device rows [M, K], row stride ld
  // Device rows written elsewhere (a framework's tensor), checked as the host paths check theirs: refused whole,
  // before any is accumulated (qgru::Error naming `source`), when ld < K or a value is not finite; then
  // add_device_rows.
  void add_checked_device_rows(const float* rows, int64_t M, int64_t ld, const std::string& source);
  void add_token_major(const float* rows, int64_t M);              // host rows [M, K]
  void add_feature_major(const float* X, int64_t M);               // host [K, M]
  int64_t K() const { return K_; }
  int64_t tokens() const { return tokens_; }
  const double* device_hessian();  // symmetric, valid until the next add
  std::vector<double> hessian();

 private:
  // H += 2·Aᵀ·A (column-major) for the widened chunk of `count` tokens: A = op(widened_) is [count, K] with
  // widened_'s leading dimension ld; Op::N when widened_ is [K, count] column-major (token-major rows), Op::T when
  // it is [count, K] (feature-major). dsyrk fills the lower triangle, dgemm all of H.
  void accumulate_widened(DeviceOps::Op tokens_op, int64_t count, int64_t ld);

  DeviceOps& ops_;
  HessianProduct product_;
  int64_t K_, chunk_rows_, tokens_ = 0;
  double* H_ = nullptr;
  float* staging_ = nullptr;
  double* widened_ = nullptr;
  bool mirrored_ = true;
};

}  // namespace qgru::gptq
