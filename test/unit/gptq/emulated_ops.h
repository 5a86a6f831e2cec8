#pragma once
// gptq::DeviceOps on host memory with plain loops, for running the device driver (qgru/gptq/device_driver.h) on
// the CPU: each kernel as its documented semantics (device_ops.h), row_block through the very gptq_row_block the
// CUDA kernel calls, and dgemm / dsyrk / dpotrf / dtrtri as textbook loops on column-major matrices with
// cuBLAS's and cuSOLVER's argument conventions (so a wrong transpose, fill mode or leading dimension in the
// driver shows here). "Device" memory is host memory; free_bytes is settable.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>
#include <vector>

#include "qgru/gptq/device_ops.h"
#include "qgru/gptq/row_block.h"

namespace gptq_test {

class EmulatedOps final : public qgru::gptq::DeviceOps {
 public:
  uint64_t free = uint64_t{1} << 40;
  std::set<void*> live;  // allocations not yet released (a test checks none is left)

  void* allocate(size_t bytes) override {
    void* p = std::malloc(bytes);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0xA5, bytes);  // as uninitialized device memory: never zero by luck
    live.insert(p);
    return p;
  }
  void release(void* device) noexcept override {
    if (device == nullptr) return;
    live.erase(device);
    std::free(device);
  }
  void upload(void* device, const void* host, size_t bytes) override { std::memcpy(device, host, bytes); }
  void download(void* host, const void* device, size_t bytes) override { std::memcpy(host, device, bytes); }
  void fill_zero(void* device, size_t bytes) override { std::memset(device, 0, bytes); }
  void download_diagonal(double* host, const double* matrix, int64_t K) override {
    for (int64_t i = 0; i < K; ++i) host[i] = matrix[i * K + i];
  }
  uint64_t free_bytes() override { return free; }

  bool any_nonfinite(const double* values, int64_t count) override {
    for (int64_t i = 0; i < count; ++i) {
      if (!std::isfinite(values[i])) return true;
    }
    return false;
  }
  bool any_nonfinite_rows(const float* src, int64_t ld, int64_t rows, int64_t cols) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        if (!std::isfinite(src[r * ld + c])) return true;
    return false;
  }
  void widen_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, double* dst) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[r * ld + c];
  }
  void mirror_upper(double* H, int64_t K) override {
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < i; ++j) H[i * K + j] = H[j * K + i];
  }
  void grid_params_rows(const double* values, int64_t rows, int64_t row_stride, int64_t elem_stride, int64_t count,
                        int64_t maxq, bool sym, double* scale, double* zero) override {
    for (int64_t r = 0; r < rows; ++r) {
      const auto p = qgru::gptq::grid_params(values + r * row_stride, elem_stride, count, maxq, sym);
      scale[r] = p.scale;
      zero[r] = p.zero;
    }
  }
  void zero_columns(double* W, int64_t N, int64_t K, const int64_t* dead, int64_t dead_count) override {
    for (int64_t d = 0; d < dead_count; ++d)
      for (int64_t n = 0; n < N; ++n) W[n * K + dead[d]] = 0.0;
  }
  void gather_transposed(const double* W, int64_t N, int64_t K, const int64_t* perm, double* Wt) override {
    for (int64_t p = 0; p < K; ++p)
      for (int64_t n = 0; n < N; ++n) Wt[p * N + n] = W[n * K + perm[p]];
  }
  void gather_hessian(const double* H, int64_t K, const int64_t* perm, double* Hp) override {
    for (int64_t p = 0; p < K; ++p) {
      for (int64_t q = 0; q < K; ++q) {
        const double h = H[perm[p] * K + perm[q]];
        Hp[p * K + q] = p == q && h == 0.0 ? 1.0 : h;
      }
    }
  }
  void reverse_shifted(const double* Hp, int64_t K, double shift, double* R) override {
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j) R[(K - 1 - i) * K + (K - 1 - j)] = Hp[i * K + j] + (i == j ? shift : 0.0);
  }
  void upper_from_reversed(const double* R, int64_t K, double* V) override {
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j) V[i * K + j] = j >= i ? R[(K - 1 - i) * K + (K - 1 - j)] : 0.0;
  }
  void row_block(const double* Wt, int64_t N, int64_t K, int64_t i1, int64_t count, const double* U, const int32_t* slot,
                 const double* scale_table, const double* zero_table, int64_t maxq, double* err, int32_t* codes,
                 double* tie_margin) override {
    for (int64_t n = 0; n < N; ++n) {
      qgru::gptq::gptq_row_block<qgru::gptq::kRowBlockTile>(
          Wt + i1 * N + n, N, err + n, N, codes + i1 * N + n, N, U + i1 * K + i1, K, count, slot + i1, scale_table + n,
          zero_table + n, N, maxq, tie_margin != nullptr ? tie_margin + i1 * N + n : nullptr, N);
    }
  }
  void gather_code_rows(const int32_t* src, int64_t K, int64_t N, const int64_t* inverse, int32_t* dst) override {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) dst[k * N + n] = src[inverse[k] * N + n];
  }
  void gather_double_rows(const double* src, int64_t K, int64_t N, const int64_t* inverse, double* dst) override {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) dst[k * N + n] = src[inverse[k] * N + n];
  }
  void pack_qweight(const int32_t* codes, int64_t K, int64_t N, int bits, int32_t* qweight) override {
    for (int64_t w = 0; w < K * bits / 32; ++w)
      for (int64_t n = 0; n < N; ++n)
        qweight[w * N + n] = static_cast<int32_t>(qgru::gptq::stream_word(codes + n, N, K, w, bits));
  }

  // Column-major: element (i, j) of a matrix with leading dimension ld is at i + j·ld.
  static double at(const double* A, int64_t ld, Op op, int64_t i, int64_t j) {
    return op == Op::N ? A[i + j * ld] : A[j + i * ld];
  }
  void dgemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, double alpha, const double* A, int64_t lda,
             const double* B, int64_t ldb, double beta, double* C, int64_t ldc) override {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < m; ++i) {
        double sum = 0.0;
        for (int64_t l = 0; l < k; ++l) sum += at(A, lda, op_a, i, l) * at(B, ldb, op_b, l, j);
        C[i + j * ldc] = alpha * sum + beta * C[i + j * ldc];
      }
    }
  }
  void dsyrk(Fill fill, Op op, int64_t n, int64_t k, double alpha, const double* A, int64_t lda, double beta, double* C,
             int64_t ldc) override {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < n; ++i) {
        if (fill == Fill::Lower ? i < j : i > j) continue;
        double sum = 0.0;
        for (int64_t l = 0; l < k; ++l) sum += at(A, lda, op, i, l) * at(A, lda, op, j, l);
        C[i + j * ldc] = alpha * sum + beta * C[i + j * ldc];
      }
    }
  }
  int dpotrf(Fill fill, int64_t n, double* A, int64_t lda) override {
    // Upper: A = UᵀU with U(i, j), i <= j; Lower: A = L·Lᵀ with L(i, j), i >= j. F(a, b) reads the factor's
    // entry for the pair (min, max) as the chosen triangle stores it.
    auto F = [&](int64_t a, int64_t b) -> double& { return fill == Fill::Upper ? A[a + b * lda] : A[b + a * lda]; };
    for (int64_t j = 0; j < n; ++j) {
      double d = F(j, j);
      for (int64_t p = 0; p < j; ++p) d -= F(p, j) * F(p, j);
      if (!(d > 0.0)) return static_cast<int>(j + 1);
      F(j, j) = std::sqrt(d);
      for (int64_t i = j + 1; i < n; ++i) {
        double s = F(j, i);
        for (int64_t p = 0; p < j; ++p) s -= F(p, j) * F(p, i);
        F(j, i) = s / F(j, j);
      }
    }
    return 0;
  }
  int dtrtri(Fill fill, int64_t n, double* A, int64_t lda) override {
    // T(a, b), a <= b: the triangle's entry (Upper: row a, column b; Lower: row b, column a); the inverse of
    // an upper triangular U is upper, of a lower L lower, and L = Uᵀ gives L⁻¹ = (U⁻¹)ᵀ: one loop for both.
    auto T = [&](int64_t a, int64_t b) -> double& { return fill == Fill::Upper ? A[a + b * lda] : A[b + a * lda]; };
    for (int64_t i = 0; i < n; ++i) {
      if (T(i, i) == 0.0) return static_cast<int>(i + 1);
    }
    std::vector<double> X(static_cast<size_t>(n * n), 0.0);  // X[a·n + b] = inverse's (a, b), a <= b
    for (int64_t j = 0; j < n; ++j) {
      X[static_cast<size_t>(j * n + j)] = 1.0 / T(j, j);
      for (int64_t i = j - 1; i >= 0; --i) {
        double s = 0.0;
        for (int64_t p = i + 1; p <= j; ++p) s += T(i, p) * X[static_cast<size_t>(p * n + j)];
        X[static_cast<size_t>(i * n + j)] = -s / T(i, i);
      }
    }
    for (int64_t a = 0; a < n; ++a)
      for (int64_t b = a; b < n; ++b) T(a, b) = X[static_cast<size_t>(a * n + b)];
    return 0;
  }
};

}  // namespace gptq_test
