// GPTQ on the GPU against DeviceOps (qgru/gptq/device_driver.h). The order of the steps is gptq.cpp's; the
// choices that depend on diag(H) and the options only come from plan_columns, the per-row work from
// gptq_row_block (through DeviceOps::row_block).
#include "qgru/gptq/device_driver.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/gptq/column_plan.h"
#include "qgru/gptq/device_plan.h"
#include "qgru/gptq/quantizer.h"

namespace qgru::gptq {

namespace {

using Op = DeviceOps::Op;
using Fill = DeviceOps::Fill;

// A device allocation of `count` T, released with the driver's scope.
template <typename T>
class DeviceArray {
 public:
  DeviceArray(DeviceOps& ops, int64_t count)
      : ops_(ops), bytes_(static_cast<size_t>(std::max<int64_t>(count, 1)) * sizeof(T)),
        data_(static_cast<T*>(ops.allocate(bytes_))) {}
  ~DeviceArray() { ops_.release(data_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return data_; }
  void upload(const std::vector<T>& host) { ops_.upload(data_, host.data(), host.size() * sizeof(T)); }
  std::vector<T> download(int64_t count) const {
    std::vector<T> host(static_cast<size_t>(count));
    ops_.download(host.data(), data_, host.size() * sizeof(T));
    return host;
  }

 private:
  DeviceOps& ops_;
  size_t bytes_;
  T* data_;
};

// [rows, cols] → [cols, rows].
template <typename T>
std::vector<T> transposed(const std::vector<T>& source, int64_t rows, int64_t cols) {
  std::vector<T> out(source.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = source[static_cast<size_t>(r * cols + c)];
  }
  return out;
}

// U = upper Cholesky factor of the inverse of the matrix whose reversal R holds (gptq.cpp's
// upper_cholesky_of_inverse): row-major K×K matrices are column-major transposes, so the CPU's row-major
// lower potrf is the column-major upper one, and its row-major upper trtri the column-major lower one.
bool upper_cholesky_of_inverse(DeviceOps& ops, double* R, double* U, int64_t K) {
  if (ops.dpotrf(Fill::Upper, K, R, K) != 0) return false;  // J·H·J = L'·L'ᵀ
  ops.upper_from_reversed(R, K, U);                          // V
  if (ops.dtrtri(Fill::Lower, K, U, K) != 0) return false;   // U = V⁻¹
  std::vector<double> diagonal(static_cast<size_t>(K));
  ops.download_diagonal(diagonal.data(), U, K);
  for (double u : diagonal) {
    if (!(u > 0.0) || !std::isfinite(u)) return false;
  }
  return true;
}

}  // namespace

DeviceGptqOutput device_gptq(DeviceOps& ops, const std::vector<double>& W, int64_t N, int64_t K, const double* H,
                             const GptqOptions& options, const DeviceGptqRequest& request) {
  check_gptq_options(options);
  check_gptq_weight(W, N, K);
  const auto start = std::chrono::steady_clock::now();
  const int64_t maxq = max_code(options.bits);
  const bool grouped = options.group_size != -1;
  const int64_t gs = grouped ? std::min(options.group_size, K) : K;
  const int64_t tables = group_count(K, options.group_size);
  const int64_t B = std::min(options.block_size, K);
  const std::string refusal = device_memory_refusal(
      N, K, device_gptq_bytes(N, K, B, tables, options.bits, request.want_tie_margin).total, ops.free_bytes());
  if (!refusal.empty()) throw Error(refusal);

  // diag(H) on the host: dead columns and the plan. Non-finite entries anywhere are refused as on the CPU.
  if (ops.any_nonfinite(H, K * K)) throw Error("gptq: Hessian has a non-finite entry (NaN or Inf in the activations?)");
  std::vector<double> diagonal(static_cast<size_t>(K));
  ops.download_diagonal(diagonal.data(), H, K);
  std::vector<int64_t> dead;
  for (int64_t i = 0; i < K; ++i) {
    if (diagonal[static_cast<size_t>(i)] == 0.0) {
      diagonal[static_cast<size_t>(i)] = 1.0;
      dead.push_back(i);
    }
  }
  const ColumnPlan plan = plan_columns(diagonal, options);
  std::vector<int64_t> inverse(static_cast<size_t>(K));
  for (int64_t p = 0; p < K; ++p) inverse[static_cast<size_t>(plan.perm[static_cast<size_t>(p)])] = p;

  // 1–3: parameters from the original W (no groups), dead columns zeroed, static groups' parameters.
  DeviceArray<double> dW(ops, N * K);
  dW.upload(W);
  DeviceArray<double> scale_table(ops, tables * N), zero_table(ops, tables * N);
  if (!grouped) {
    ops.grid_params_rows(dW.get(), N, K, 1, K, maxq, options.sym, scale_table.get(), zero_table.get());
  }
  DeviceArray<int64_t> dead_columns(ops, static_cast<int64_t>(dead.size()));
  if (!dead.empty()) {
    dead_columns.upload(dead);
    ops.zero_columns(dW.get(), N, K, dead_columns.get(), static_cast<int64_t>(dead.size()));
  }
  if (grouped && options.static_groups) {
    for (int64_t g = 0; g < tables; ++g) {
      ops.grid_params_rows(dW.get() + g * gs, N, K, 1, std::min(gs, K - g * gs), maxq, options.sym,
                           scale_table.get() + g * N, zero_table.get() + g * N);
    }
  }
  // 4: the permutation (the identity included) into Wt [K, N] and Hp.
  DeviceArray<int64_t> perm(ops, K), inverse_perm(ops, K);
  DeviceArray<int32_t> slot(ops, K);
  perm.upload(plan.perm);
  inverse_perm.upload(inverse);
  slot.upload(plan.slot);
  DeviceArray<double> Wt(ops, K * N);
  ops.gather_transposed(dW.get(), N, K, perm.get(), Wt.get());
  DeviceArray<double> Hp(ops, K * K), R(ops, K * K), U(ops, K * K);
  ops.gather_hessian(H, K, perm.get(), Hp.get());

  // 5: damping (the mean of the permuted diagonal, summed in processing order as gptq.cpp does) and U.
  double mean_diag = 0.0;
  for (int64_t p = 0; p < K; ++p) mean_diag += diagonal[static_cast<size_t>(plan.perm[static_cast<size_t>(p)])];
  mean_diag /= static_cast<double>(K);
  double damp = options.damp;
  for (int attempt = 0;; ++attempt) {
    ops.reverse_shifted(Hp.get(), K, damp * mean_diag, R.get());
    if (upper_cholesky_of_inverse(ops, R.get(), U.get(), K)) break;
    if (attempt >= options.max_damp_retries) throw_not_positive_definite(damp, attempt + 1);
    log()->warn("gptq: H + {}·mean(diag H)·I is not positive definite; retrying with damp = {}", damp, damp * 10.0);
    damp *= 10.0;
  }

  // 6: blocks.
  DeviceArray<double> err(ops, B * N);
  DeviceArray<int32_t> codes_perm(ops, K * N), codes(ops, K * N);
  DeviceArray<double> tie(ops, request.want_tie_margin ? K * N : 1);
  for (const PlanBlock& block : plan_blocks(plan, B)) {
    const int64_t i1 = block.begin, i2 = block.end, count = i2 - i1;
    for (size_t f = block.find_begin; f < block.find_end; ++f) {
      const int64_t col = plan.find_at[f];
      const int64_t row = plan.find_slot[f];
      ops.grid_params_rows(Wt.get() + col * N, N, 1, N, std::min(gs, K - col), maxq, options.sym,
                           scale_table.get() + row * N, zero_table.get() + row * N);
    }
    ops.row_block(Wt.get(), N, K, i1, count, U.get(), slot.get(), scale_table.get(), zero_table.get(), maxq, err.get(),
                  codes_perm.get(), request.want_tie_margin ? tie.get() : nullptr);
    if (i2 < K) {
      // Wt[i2:, :] −= (Err · U[i1:i2, i2:])ᵀ. Column-major: C = Wt + i2·N is [N, K − i2] (ld N), E = err is
      // [N, count] (ld N), and U + i1·K + i2 (ld K) is S = [K − i2, count] with S[a, b] = U[i1 + b, i2 + a]:
      // C −= E · Sᵀ.
      ops.dgemm(Op::N, Op::T, N, K - i2, count, -1.0, err.get(), N, U.get() + i1 * K + i2, K, 1.0, Wt.get() + i2 * N, N);
    }
  }

  // Codes back to the original order, packed on the device.
  ops.gather_code_rows(codes_perm.get(), K, N, inverse_perm.get(), codes.get());
  DeviceGptqOutput out;
  const int64_t words = K * options.bits % 32 == 0 ? K * options.bits / 32 : 0;
  if (words > 0) {
    DeviceArray<int32_t> qweight(ops, words * N);
    ops.pack_qweight(codes.get(), K, N, options.bits, qweight.get());
    out.qweight = qweight.download(words * N);
  }
  GptqResult& result = out.result;
  result.N = N;
  result.K = K;
  result.G = tables;
  result.bits = options.bits;
  result.scales = scale_table.download(tables * N);
  const std::vector<double> zeros = zero_table.download(tables * N);
  result.zeros.assign(zeros.begin(), zeros.end());  // integral values in [0, maxq]
  result.g_idx = plan.g_idx;
  result.perm = plan.perm;
  result.damp_used = damp;
  result.dead_columns = static_cast<int64_t>(dead.size());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (request.want_codes) result.codes = transposed(codes.download(K * N), K, N);
  if (request.want_tie_margin) {  // Wt is free now: the margins in original order
    ops.gather_double_rows(tie.get(), K, N, inverse_perm.get(), Wt.get());
    out.tie_margin = transposed(Wt.download(K * N), K, N);
  }
  return out;
}

const char* hessian_product_name(HessianProduct product) { return product == HessianProduct::kGemm ? "gemm" : "syrk"; }

HessianProduct parse_hessian_product(const std::string& name, const std::string& what) {
  if (name == "syrk") return HessianProduct::kSyrk;
  if (name == "gemm") return HessianProduct::kGemm;
  throw Error(what + ": '" + name + "' is not a Hessian product, expected syrk or gemm");
}

DeviceHessianSum::DeviceHessianSum(DeviceOps& ops, int64_t K, uint64_t staging_bytes, HessianProduct product)
    : ops_(ops), product_(product), K_(K), chunk_rows_(hessian_chunk_rows(K, int64_t{1} << 40, staging_bytes)) {
  if (K <= 0) throw Error("gptq: Hessian needs K > 0, got " + std::to_string(K));
  H_ = static_cast<double*>(ops_.allocate(static_cast<size_t>(K) * static_cast<size_t>(K) * sizeof(double)));
  try {
    staging_ = static_cast<float*>(ops_.allocate(static_cast<size_t>(chunk_rows_ * K) * sizeof(float)));
    widened_ = static_cast<double*>(ops_.allocate(static_cast<size_t>(chunk_rows_ * K) * sizeof(double)));
    ops_.fill_zero(H_, static_cast<size_t>(K) * static_cast<size_t>(K) * sizeof(double));
  } catch (...) {
    ops_.release(widened_);
    ops_.release(staging_);
    ops_.release(H_);
    throw;
  }
}

DeviceHessianSum::~DeviceHessianSum() {
  ops_.release(widened_);
  ops_.release(staging_);
  ops_.release(H_);
}

void DeviceHessianSum::accumulate_widened(Op tokens_op, int64_t count, int64_t ld) {
  // dsyrk on the column-major lower triangle (the row-major upper one), or dgemm on all of it; the second
  // operand of dgemm is the first transposed.
  if (product_ == HessianProduct::kGemm) {
    const Op other = tokens_op == Op::N ? Op::T : Op::N;
    ops_.dgemm(tokens_op, other, K_, K_, count, 2.0, widened_, ld, widened_, ld, 1.0, H_, K_);
  } else {
    ops_.dsyrk(Fill::Lower, tokens_op, K_, count, 2.0, widened_, ld, 1.0, H_, K_);
  }
}

void DeviceHessianSum::add_device_rows(const float* rows, int64_t M, int64_t ld) {
  for (int64_t t0 = 0; t0 < M; t0 += chunk_rows_) {
    const int64_t count = std::min(chunk_rows_, M - t0);
    ops_.widen_rows(rows + t0 * ld, ld, count, K_, widened_);
    // Column-major, the widened [count, K] rows are A = [K, count] (ld K): H += 2·A·Aᵀ.
    accumulate_widened(Op::N, count, K_);
  }
  tokens_ += M;
  mirrored_ = false;
}

void DeviceHessianSum::add_checked_device_rows(const float* rows, int64_t M, int64_t ld, const std::string& source) {
  if (M < 0 || ld < K_) {
    throw Error(source + ": " + std::to_string(M) + " rows of stride " + std::to_string(ld) + ", expected rows of " +
                std::to_string(K_) + " features (stride >= " + std::to_string(K_) + ")");
  }
  if (M == 0) return;
  // One pass over all the rows first, so a refused call leaves H as it was.
  if (ops_.any_nonfinite_rows(rows, ld, M, K_)) {
    throw Error(source + ": an element is NaN or infinite (as float32); activations must be finite");
  }
  add_device_rows(rows, M, ld);
}

void DeviceHessianSum::add_token_major(const float* rows, int64_t M) {
  for (int64_t t0 = 0; t0 < M; t0 += chunk_rows_) {
    const int64_t count = std::min(chunk_rows_, M - t0);
    ops_.upload(staging_, rows + t0 * K_, static_cast<size_t>(count * K_) * sizeof(float));
    add_device_rows(staging_, count, K_);
  }
}

void DeviceHessianSum::add_feature_major(const float* X, int64_t M) {
  std::vector<float> chunk;
  for (int64_t t0 = 0; t0 < M; t0 += chunk_rows_) {
    const int64_t count = std::min(chunk_rows_, M - t0);
    chunk.resize(static_cast<size_t>(K_ * count));  // [K, count]: this chunk's tokens of every feature
    for (int64_t k = 0; k < K_; ++k) std::copy(X + k * M + t0, X + k * M + t0 + count, chunk.begin() + k * count);
    ops_.upload(staging_, chunk.data(), chunk.size() * sizeof(float));
    ops_.widen_rows(staging_, count, K_, count, widened_);
    // The widened [K, count] is, column-major, B = [count, K] (ld count): H += 2·Bᵀ·B.
    accumulate_widened(Op::T, count, count);
  }
  tokens_ += M;
  mirrored_ = false;
}

const double* DeviceHessianSum::device_hessian() {
  if (!mirrored_) {
    ops_.mirror_upper(H_, K_);
    mirrored_ = true;
  }
  return H_;
}

std::vector<double> DeviceHessianSum::hessian() {
  const double* H = device_hessian();
  std::vector<double> host(static_cast<size_t>(K_ * K_));
  ops_.download(host.data(), H, host.size() * sizeof(double));
  return host;
}

}  // namespace qgru::gptq
