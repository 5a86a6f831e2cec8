#pragma once
// GPTQ's device steps as an interface. The driver (qgru/gptq/device_driver.h) runs GPTQ on the GPU against it:
// every buffer layout, kernel order and BLAS / LAPACK argument is the driver's. The CUDA library implements it
// with kernels, cuBLAS and cuSOLVER (cuda/src/gptq_device.cpp); the CPU tests implement it with plain loops over
// host memory that follow cuBLAS's and cuSOLVER's column-major conventions (test/unit/gptq/emulated_ops.h), so
// the driver's whole sequence runs and is checked without a GPU.
// Layouts: W row-major [N, K]; Wt [K, N] (row n of W is column n of Wt); H, Hp, R, U row-major [K, K]; codes,
// Err and rounding margins [columns, N]; parameter tables [T, N]. "Device" pointers come from allocate().
#include <cstddef>
#include <cstdint>

namespace qgru::gptq {

class DeviceOps {
 public:
  virtual ~DeviceOps() = default;

  // Memory. download / download_diagonal return when the data is on the host (after all earlier work).
  virtual void* allocate(size_t bytes) = 0;  // bytes > 0; throws on failure
  virtual void release(void* device) noexcept = 0;
  virtual void upload(void* device, const void* host, size_t bytes) = 0;
  virtual void download(void* host, const void* device, size_t bytes) = 0;
  virtual void fill_zero(void* device, size_t bytes) = 0;
  // The K diagonal entries of a row-major K×K matrix.
  virtual void download_diagonal(double* host, const double* matrix, int64_t K) = 0;
  virtual uint64_t free_bytes() = 0;

  // Kernels.
  virtual bool any_nonfinite(const double* values, int64_t count) = 0;
  // Whether any src[r · ld + c], r < rows, c < cols, is NaN or infinite.
  virtual bool any_nonfinite_rows(const float* src, int64_t ld, int64_t rows, int64_t cols) = 0;
  // dst[r · cols + c] = src[r · ld + c] widened to float64.
  virtual void widen_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, double* dst) = 0;
  // H[j, i] = H[i, j] for j > i (row-major): the lower triangle from the upper.
  virtual void mirror_upper(double* H, int64_t K) = 0;
  // row_block.h grid_params of rows r < rows over values[r · row_stride + c · elem_stride], c < count.
  virtual void grid_params_rows(const double* values, int64_t rows, int64_t row_stride, int64_t elem_stride,
                                int64_t count, int64_t maxq, bool sym, double* scale, double* zero) = 0;
  // W[n, dead[d]] = 0 for all n, d < dead_count.
  virtual void zero_columns(double* W, int64_t N, int64_t K, const int64_t* dead, int64_t dead_count) = 0;
  // Wt[p, n] = W[n, perm[p]].
  virtual void gather_transposed(const double* W, int64_t N, int64_t K, const int64_t* perm, double* Wt) = 0;
  // Hp[p, q] = H[perm[p], perm[q]], a zero diagonal entry replaced by 1.
  virtual void gather_hessian(const double* H, int64_t K, const int64_t* perm, double* Hp) = 0;
  // R[K−1−i, K−1−j] = Hp[i, j] + (i == j ? shift : 0).
  virtual void reverse_shifted(const double* Hp, int64_t K, double shift, double* R) = 0;
  // V[i, j] = j >= i ? R[K−1−i, K−1−j] : 0.
  virtual void upper_from_reversed(const double* R, int64_t K, double* V) = 0;
  // For every row n < N: gptq_row_block<kRowBlockTile> over `count` columns from processed column i1 with
  // w = Wt + i1·N + n (stride N), err + n (stride N), codes + i1·N + n (stride N), U + i1·K + i1 (ld K),
  // slot + i1, tables + n (stride N), tie_margin + i1·N + n (stride N) when not null.
  virtual void row_block(const double* Wt, int64_t N, int64_t K, int64_t i1, int64_t count, const double* U,
                         const int32_t* slot, const double* scale_table, const double* zero_table, int64_t maxq,
                         double* err, int32_t* codes, double* tie_margin) = 0;
  // dst[k, n] = src[inverse[k], n], k < K.
  virtual void gather_code_rows(const int32_t* src, int64_t K, int64_t N, const int64_t* inverse, int32_t* dst) = 0;
  virtual void gather_double_rows(const double* src, int64_t K, int64_t N, const int64_t* inverse, double* dst) = 0;
  // qweight[w, n] = stream_word(codes[·, n] along K, w, bits), w < K·bits/32.
  virtual void pack_qweight(const int32_t* codes, int64_t K, int64_t N, int bits, int32_t* qweight) = 0;

  // Column-major BLAS / LAPACK with cuBLAS's and cuSOLVER's argument conventions.
  enum class Op { N, T };
  enum class Fill { Lower, Upper };
  // C = alpha · op(A) · op(B) + beta · C; C m×n, op(A) m×k, op(B) k×n.
  virtual void dgemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, double alpha, const double* A, int64_t lda,
                     const double* B, int64_t ldb, double beta, double* C, int64_t ldc) = 0;
  // C = alpha · op(A) · op(A)ᵀ + beta · C on the `fill` triangle of the n×n C; op(A) n×k (N: A n×k, T: A k×n).
  virtual void dsyrk(Fill fill, Op op, int64_t n, int64_t k, double alpha, const double* A, int64_t lda, double beta,
                     double* C, int64_t ldc) = 0;
  // Cholesky of the n×n A from its `fill` triangle, in place (Upper: A = UᵀU; Lower: A = LLᵀ); the info
  // (0, or the order of the first non-positive leading minor).
  virtual int dpotrf(Fill fill, int64_t n, double* A, int64_t lda) = 0;
  // Inverse of the triangular (non-unit) n×n A on its `fill` triangle, in place; 0, or i when A[i−1, i−1] = 0.
  virtual int dtrtri(Fill fill, int64_t n, double* A, int64_t lda) = 0;
};

}  // namespace qgru::gptq
