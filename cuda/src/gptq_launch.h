#pragma once
// Internal: the launchers of GPTQ's device kernels (gptq_kernels.cu) and its cuSOLVER steps (gptq_solver.cu),
// called by the host driver gptq_device.cpp. Layouts: W row-major [N, K] as uploaded; Wt [K, N] (row n of W is
// column n of Wt); H, Hp, R, U row-major [K, K]; codes and Err [columns, N]; parameter tables [T, N].
#include <cuda_runtime.h>

#include <cstdint>

namespace qgru::cuda::gptq_launch {

// dst[i] = src[r · ld + c] widened to float64, dst [rows, cols] packed (i = r · cols + c).
void widen_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, double* dst, cudaStream_t stream);
// *flag = 1 when one of values[0, count) is NaN or ±Inf (flag zeroed by the caller).
void count_nonfinite(const double* values, int64_t count, int* flag, cudaStream_t stream);
// *flag = 1 when any src[r · ld + c] (r < rows, c < cols) is NaN or ±Inf (flag zeroed by the caller).
void count_nonfinite_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, int* flag, cudaStream_t stream);
// H[j, i] = H[i, j] for j > i: fills the lower triangle (row-major) from the upper.
void mirror_upper(double* H, int64_t K, cudaStream_t stream);
// Grid parameters (row_block.h grid_params) of `rows` rows: row r's values at values[r · row_stride +
// c · elem_stride], c < count; results to scale[r], zero[r].
void grid_params_rows(const double* values, int64_t rows, int64_t row_stride, int64_t elem_stride, int64_t count,
                      int64_t maxq, bool sym, double* scale, double* zero, cudaStream_t stream);
// W[n, dead[d]] = 0 for every n, d < dead_count (W row-major [N, K]).
void zero_columns(double* W, int64_t N, int64_t K, const int64_t* dead, int64_t dead_count, cudaStream_t stream);
// Wt[p, n] = W[n, perm[p]].
void gather_transposed(const double* W, int64_t N, int64_t K, const int64_t* perm, double* Wt, cudaStream_t stream);
// Hp[p, q] = H[perm[p], perm[q]], a zero diagonal entry (a dead column) replaced by 1.
void gather_hessian(const double* H, int64_t K, const int64_t* perm, double* Hp, cudaStream_t stream);
// R[K−1−i, K−1−j] = Hp[i, j] + (i == j ? shift : 0): J·(Hp + shift·I)·J.
void reverse_shifted(const double* Hp, int64_t K, double shift, double* R, cudaStream_t stream);
// V[i, j] = j >= i ? R[K−1−i, K−1−j] : 0 (the upper factor V of H = V·Vᵀ from J·H·J = L'·L'ᵀ).
void upper_from_reversed(const double* R, int64_t K, double* V, cudaStream_t stream);
// One thread per output row n < N: gptq_row_block over `count` columns starting at processed column i1.
void row_block(const double* Wt, int64_t N, int64_t K, int64_t i1, int64_t count, const double* U, const int32_t* slot,
               const double* scale_table, const double* zero_table, int64_t maxq, double* err, int32_t* codes,
               double* tie_margin, cudaStream_t stream);
// dst[k, n] = src[inverse[k], n] for k < K (int32 [K, N]).
void gather_code_rows(const int32_t* src, int64_t K, int64_t N, const int64_t* inverse, int32_t* dst,
                      cudaStream_t stream);
// dst[k, n] = src[inverse[k], n] for k < K (float64 [K, N]).
void gather_double_rows(const double* src, int64_t K, int64_t N, const int64_t* inverse, double* dst,
                        cudaStream_t stream);
// qweight[w, n] = stream_word(codes[·, n] along K, w, bits), w < K·bits/32 (codes [K, N], original order).
void pack_qweight(const int32_t* codes, int64_t K, int64_t N, int bits, int32_t* qweight, cudaStream_t stream);

// cuSOLVER (gptq_solver.cu): dpotrf and dtrtri (non-unit) on column-major matrices, on one stream; each returns
// the info after synchronizing the stream. Workspaces are queried for each call's size and kept.
class Solver {
 public:
  explicit Solver(cudaStream_t stream);
  ~Solver();
  Solver(const Solver&) = delete;
  Solver& operator=(const Solver&) = delete;
  int dpotrf(bool upper, int64_t n, double* A, int64_t lda);
  int dtrtri(bool upper, int64_t n, double* A, int64_t lda);

 private:
  struct State;
  State* state_;
};

}  // namespace qgru::cuda::gptq_launch
