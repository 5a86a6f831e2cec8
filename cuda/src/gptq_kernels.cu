// GPTQ's device kernels (launchers in gptq_launch.h). Element kernels are grid-stride loops with consecutive
// threads on consecutive addresses of the written array; the per-row work is qgru/gptq/row_block.h, the same
// functions the CPU path runs.
#include "gptq_launch.h"
#include "qgru/gptq/row_block.h"
#include "qgru_cuda/check.h"

namespace qgru::cuda::gptq_launch {

namespace {

constexpr int kThreads = 256;
// row_block: one warp per CTA, so that N = 4096 rows spread over 128 multiprocessors rather than 32 (each
// thread holds a tile of 32 doubles in registers).
constexpr int kRowThreads = 32;

int blocks_for(int64_t count) {
  const int64_t blocks = (count + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65535 * 32 ? (blocks > 0 ? blocks : 1) : 65535 * 32);
}

__device__ int64_t first_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ int64_t index_step() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__global__ void widen_rows_kernel(const float* src, int64_t ld, int64_t rows, int64_t cols, double* dst) {
  for (int64_t i = first_index(); i < rows * cols; i += index_step()) {
    dst[i] = static_cast<double>(src[(i / cols) * ld + i % cols]);
  }
}

__global__ void nonfinite_kernel(const double* values, int64_t count, int* flag) {
  for (int64_t i = first_index(); i < count; i += index_step()) {
    if (!isfinite(values[i])) *flag = 1;  // every writer writes 1: no ordering needed
  }
}

__global__ void nonfinite_rows_kernel(const float* src, int64_t ld, int64_t rows, int64_t cols, int* flag) {
  for (int64_t i = first_index(); i < rows * cols; i += index_step()) {
    if (!isfinite(src[(i / cols) * ld + i % cols])) *flag = 1;  // every writer writes 1: no ordering needed
  }
}

__global__ void mirror_upper_kernel(double* H, int64_t K) {
  for (int64_t i = first_index(); i < K * K; i += index_step()) {
    const int64_t r = i / K, c = i % K;
    if (r > c) H[i] = H[c * K + r];
  }
}

__global__ void grid_params_kernel(const double* values, int64_t rows, int64_t row_stride, int64_t elem_stride,
                                   int64_t count, int64_t maxq, bool sym, double* scale, double* zero) {
  for (int64_t r = first_index(); r < rows; r += index_step()) {
    const qgru::gptq::GridParams p = qgru::gptq::grid_params(values + r * row_stride, elem_stride, count, maxq, sym);
    scale[r] = p.scale;
    zero[r] = p.zero;
  }
}

__global__ void zero_columns_kernel(double* W, int64_t N, int64_t K, const int64_t* dead, int64_t dead_count) {
  for (int64_t i = first_index(); i < N * dead_count; i += index_step()) {
    W[(i % N) * K + dead[i / N]] = 0.0;
  }
}

__global__ void gather_transposed_kernel(const double* W, int64_t N, int64_t K, const int64_t* perm, double* Wt) {
  for (int64_t i = first_index(); i < K * N; i += index_step()) {
    const int64_t p = i / N, n = i % N;
    Wt[i] = W[n * K + perm[p]];
  }
}

__global__ void gather_hessian_kernel(const double* H, int64_t K, const int64_t* perm, double* Hp) {
  for (int64_t i = first_index(); i < K * K; i += index_step()) {
    const int64_t p = i / K, q = i % K;
    const double h = H[perm[p] * K + perm[q]];
    Hp[i] = p == q && h == 0.0 ? 1.0 : h;
  }
}

__global__ void reverse_shifted_kernel(const double* Hp, int64_t K, double shift, double* R) {
  for (int64_t i = first_index(); i < K * K; i += index_step()) {
    const int64_t r = i / K, c = i % K;  // R[r, c] = Hp[K−1−r, K−1−c]
    const double h = Hp[(K - 1 - r) * K + (K - 1 - c)];
    R[i] = r == c ? h + shift : h;
  }
}

__global__ void upper_from_reversed_kernel(const double* R, int64_t K, double* V) {
  for (int64_t i = first_index(); i < K * K; i += index_step()) {
    const int64_t r = i / K, c = i % K;
    V[i] = c >= r ? R[(K - 1 - r) * K + (K - 1 - c)] : 0.0;
  }
}

// Thread n runs output row n; its values of column i are Wt[i, n], Err[i, n], codes[i, n]: a warp's 32 rows
// touch 32 consecutive doubles. U's row segment is the same address for every thread (a broadcast).
__global__ void __launch_bounds__(kRowThreads) row_block_kernel(const double* Wt, int64_t N, int64_t K, int64_t i1,
                                                                 int64_t count, const double* U, const int32_t* slot,
                                                                 const double* scale_table, const double* zero_table,
                                                                 int64_t maxq, double* err, int32_t* codes,
                                                                 double* tie_margin) {
  const int64_t n = first_index();
  if (n >= N) return;
  qgru::gptq::gptq_row_block<qgru::gptq::kRowBlockTile>(
      Wt + i1 * N + n, N, err + n, N, codes + i1 * N + n, N, U + i1 * K + i1, K, count, slot + i1, scale_table + n,
      zero_table + n, N, maxq, tie_margin != nullptr ? tie_margin + i1 * N + n : nullptr, N);
}

__global__ void gather_code_rows_kernel(const int32_t* src, int64_t K, int64_t N, const int64_t* inverse, int32_t* dst) {
  for (int64_t i = first_index(); i < K * N; i += index_step()) dst[i] = src[inverse[i / N] * N + i % N];
}

__global__ void gather_double_rows_kernel(const double* src, int64_t K, int64_t N, const int64_t* inverse, double* dst) {
  for (int64_t i = first_index(); i < K * N; i += index_step()) dst[i] = src[inverse[i / N] * N + i % N];
}

__global__ void pack_qweight_kernel(const int32_t* codes, int64_t K, int64_t N, int bits, int32_t* qweight) {
  const int64_t words = K * bits / 32;
  for (int64_t i = first_index(); i < words * N; i += index_step()) {
    const int64_t w = i / N, n = i % N;
    qweight[i] = static_cast<int32_t>(qgru::gptq::stream_word(codes + n, N, K, w, bits));
  }
}

}  // namespace

void widen_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, double* dst, cudaStream_t stream) {
  widen_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(src, ld, rows, cols, dst);
  QGRU_CUDA_CHECK_LAUNCH("gptq widen_rows_kernel");
}

void count_nonfinite(const double* values, int64_t count, int* flag, cudaStream_t stream) {
  nonfinite_kernel<<<blocks_for(count), kThreads, 0, stream>>>(values, count, flag);
  QGRU_CUDA_CHECK_LAUNCH("gptq nonfinite_kernel");
}

void count_nonfinite_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, int* flag, cudaStream_t stream) {
  nonfinite_rows_kernel<<<blocks_for(rows * cols), kThreads, 0, stream>>>(src, ld, rows, cols, flag);
  QGRU_CUDA_CHECK_LAUNCH("gptq nonfinite_rows_kernel");
}

void mirror_upper(double* H, int64_t K, cudaStream_t stream) {
  mirror_upper_kernel<<<blocks_for(K * K), kThreads, 0, stream>>>(H, K);
  QGRU_CUDA_CHECK_LAUNCH("gptq mirror_upper_kernel");
}

void grid_params_rows(const double* values, int64_t rows, int64_t row_stride, int64_t elem_stride, int64_t count,
                      int64_t maxq, bool sym, double* scale, double* zero, cudaStream_t stream) {
  grid_params_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(values, rows, row_stride, elem_stride, count, maxq,
                                                                 sym, scale, zero);
  QGRU_CUDA_CHECK_LAUNCH("gptq grid_params_kernel");
}

void zero_columns(double* W, int64_t N, int64_t K, const int64_t* dead, int64_t dead_count, cudaStream_t stream) {
  if (dead_count == 0) return;
  zero_columns_kernel<<<blocks_for(N * dead_count), kThreads, 0, stream>>>(W, N, K, dead, dead_count);
  QGRU_CUDA_CHECK_LAUNCH("gptq zero_columns_kernel");
}

void gather_transposed(const double* W, int64_t N, int64_t K, const int64_t* perm, double* Wt, cudaStream_t stream) {
  gather_transposed_kernel<<<blocks_for(K * N), kThreads, 0, stream>>>(W, N, K, perm, Wt);
  QGRU_CUDA_CHECK_LAUNCH("gptq gather_transposed_kernel");
}

void gather_hessian(const double* H, int64_t K, const int64_t* perm, double* Hp, cudaStream_t stream) {
  gather_hessian_kernel<<<blocks_for(K * K), kThreads, 0, stream>>>(H, K, perm, Hp);
  QGRU_CUDA_CHECK_LAUNCH("gptq gather_hessian_kernel");
}

void reverse_shifted(const double* Hp, int64_t K, double shift, double* R, cudaStream_t stream) {
  reverse_shifted_kernel<<<blocks_for(K * K), kThreads, 0, stream>>>(Hp, K, shift, R);
  QGRU_CUDA_CHECK_LAUNCH("gptq reverse_shifted_kernel");
}

void upper_from_reversed(const double* R, int64_t K, double* V, cudaStream_t stream) {
  upper_from_reversed_kernel<<<blocks_for(K * K), kThreads, 0, stream>>>(R, K, V);
  QGRU_CUDA_CHECK_LAUNCH("gptq upper_from_reversed_kernel");
}

void row_block(const double* Wt, int64_t N, int64_t K, int64_t i1, int64_t count, const double* U, const int32_t* slot,
               const double* scale_table, const double* zero_table, int64_t maxq, double* err, int32_t* codes,
               double* tie_margin, cudaStream_t stream) {
  const int blocks = static_cast<int>((N + kRowThreads - 1) / kRowThreads);
  row_block_kernel<<<blocks, kRowThreads, 0, stream>>>(Wt, N, K, i1, count, U, slot, scale_table, zero_table, maxq,
                                                        err, codes, tie_margin);
  QGRU_CUDA_CHECK_LAUNCH("gptq row_block_kernel");
}

void gather_code_rows(const int32_t* src, int64_t K, int64_t N, const int64_t* inverse, int32_t* dst,
                      cudaStream_t stream) {
  gather_code_rows_kernel<<<blocks_for(K * N), kThreads, 0, stream>>>(src, K, N, inverse, dst);
  QGRU_CUDA_CHECK_LAUNCH("gptq gather_code_rows_kernel");
}

void gather_double_rows(const double* src, int64_t K, int64_t N, const int64_t* inverse, double* dst,
                        cudaStream_t stream) {
  gather_double_rows_kernel<<<blocks_for(K * N), kThreads, 0, stream>>>(src, K, N, inverse, dst);
  QGRU_CUDA_CHECK_LAUNCH("gptq gather_double_rows_kernel");
}

void pack_qweight(const int32_t* codes, int64_t K, int64_t N, int bits, int32_t* qweight, cudaStream_t stream) {
  pack_qweight_kernel<<<blocks_for(K * bits / 32 * N), kThreads, 0, stream>>>(codes, K, N, bits, qweight);
  QGRU_CUDA_CHECK_LAUNCH("gptq pack_qweight_kernel");
}

}  // namespace qgru::cuda::gptq_launch
