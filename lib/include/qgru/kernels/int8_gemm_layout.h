#pragma once
// Host-side layout of the int8 GEMMs of the CUDA GRU executor (cuda/src/gru_cell_cuda.cu): operand
// offsets, padding of leading dimensions, int8 packing with its exact inverse, workspace sizes, and a plain
// reference of the cuBLAS call for the CPU tests. Plain C++ (no CUDA); raw_gemm_accumulator is QGRU_HD
// because the elementwise kernel applies it.
//
// cuBLAS call (column-major view; one for all steps, B-1, and one per step, B-2):
//   cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, m = rows_p, n = batch rows (T·N_p, N_p), k = k_p,
//                &alpha(int32 1), A = packed weight [rows_p, k_p] row-major (lda = k_p), CUDA_R_8I,
//                B = packed activations [batch rows, k_p] row-major (ldb = k_p), CUDA_R_8I,
//                &beta(int32 0), C = int32 [batch rows, rows_p] row-major (ldc = rows_p), CUDA_R_32I,
//                CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT)
//   so C[b, c] = Σ_k A[c, k] · B[b, k]: the "TN" form cuBLAS's int8 tensor-core (IMMA) kernels take.
// Padding (docs/CUDA.md "cuBLAS int8 and small shapes"): cuBLAS documents alpha/beta of 0 or 1, 4-byte aligned
//   A and B and lda, ldb multiples of 4 for this path; small int8 shapes are nonetheless where it has answered
//   NOT_SUPPORTED before, so EVERY dimension is padded to a multiple of kInt8GemmMultiple = 16 — m (rows_p),
//   k (C_p, H_p) and the batch rows n: N is padded to N_p per step, row (t, n) of x lives at t·N_p + n — and
//   every operand starts 256-byte aligned (workspace.h). Padding holds stored code 0, so it adds nothing to any
//   sum, and the rows b >= N of C are computed and never read. GruCellCuda still asks cuBLAS once per cell at
//   construction and falls back to the wide kernel (wide_gemm.h, exact for int8 operands too) on NOT_SUPPORTED.
// Operand offsets: an activation tensor whose codes lie in [0, 255] (unsigned 8-bit) is stored as
//   q - 128 so it fits int8; the GEMM then yields Σ W·(q - 128) and the raw accumulator the cell expects is
//   that plus 128 · W_sum[c] (raw_gemm_accumulator). Signed codes in [-128, 127] are stored as they are.
//   Weights must be signed codes in [-128, 127] (symmetric weights of at most 8 bits).
// Overflow: |stored| <= 128 for both operands, so |Σ| <= k · 2^14 < 2^31 for k < 2^17 (plan refuses more).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/hd.h"

namespace qgru::kernels {

inline constexpr int64_t kInt8GemmMultiple = 16;
inline constexpr int64_t kInt8GemmMaxK = (int64_t{1} << 17) - 1;

QGRU_HD constexpr int64_t pad_to_multiple(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Offset so that q - offset fits a signed `bits`-bit operand for every code in [q_min, q_max]: 0 when the
// codes are signed already, 2^(bits-1) when they fit the unsigned range; "" or the reason it cannot.
inline std::string signed_operand_offset(int bits, int32_t q_min, int32_t q_max, int32_t& offset) {
  const int64_t half = int64_t{1} << (bits - 1);
  if (q_min >= -half && q_max <= half - 1) {
    offset = 0;
    return "";
  }
  if (q_min >= 0 && q_max <= 2 * half - 1) {
    offset = static_cast<int32_t>(half);
    return "";
  }
  const std::string b = std::to_string(bits);
  return "codes in [" + std::to_string(q_min) + ", " + std::to_string(q_max) + "] fit neither int" + b + " nor uint" + b +
         " (this GEMM path takes operands of at most " + b + " bits)";
}

inline std::string int8_operand_offset(int32_t q_min, int32_t q_max, int32_t& offset) {
  return signed_operand_offset(8, q_min, q_max, offset);
}

// The raw accumulator Σ_k q_W[c,k]·q_x[k] from the int8 GEMM of the stored operand (q_x - offset).
QGRU_HD int64_t raw_gemm_accumulator(int32_t stored_gemm, int32_t operand_offset, int64_t weight_row_sum) {
  return static_cast<int64_t>(stored_gemm) + static_cast<int64_t>(operand_offset) * weight_row_sum;
}

// Sizes of one cell's GEMMs: W [3H, C], R [3H, H], x for all steps [T·N, C], h [N, H], operands of
// operand_bytes (int8 on the cuBLAS path, int16 on the wide path) and accumulators of accumulator_bytes
// (int32, int64). plan_gru_gemm (here) and plan_gru_wide (qgru/kernels/wide_gemm.h) fill it.
struct GruGemmLayout {
  int64_t H = 0, C = 0, N = 0, T = 0;
  int64_t operand_bytes = 0, accumulator_bytes = 0;
  int64_t rows_p = 0;  // 3H, padded where the GEMM wants it: ldc of both GEMMs
  // The linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a) multiplies R's z and r rows with h (m = rows_zr_p,
  // the first rows of the packed R, ldc rows_p) and R's n rows, packed apart as Rn [rows_n_p, H_p], with
  // q_reset_hidden (stored like h, [N_p, H_p]) into gemm_rh [N_p, rows_n_p].
  int64_t rows_zr_p = 0;  // 2H, padded like rows_p (<= rows_p)
  int64_t rows_n_p = 0;   // H, padded like rows_p
  int64_t C_p = 0;     // C padded: lda of W, ldb of x
  int64_t H_p = 0;     // H padded: lda of R, ldb of h
  int64_t N_p = 0;     // N padded: batch rows of one step (row (t, n) of x at t·N_p + n); N on the wide path
  int64_t W_bytes = 0, R_bytes = 0;                 // operands [rows_p, C_p], [rows_p, H_p]
  int64_t x_bytes = 0, h_bytes = 0;                 // operands [T·N_p, C_p], [N_p, H_p]
  int64_t gemm_x_bytes = 0, gemm_h_bytes = 0;       // accumulators [T·N_p, rows_p], [N_p, rows_p]
  int64_t state_bytes = 0, output_bytes = 0;        // int32 h codes [N, H], output codes [T, N, H]
  int64_t Rn_bytes = 0, rh_bytes = 0, gemm_rh_bytes = 0;  // the linear_before_reset = 0 cell: [rows_n_p, H_p],
                                                          // [N_p, H_p] operands, [N_p, rows_n_p] accumulators
  // The linear_before_reset = 1 cell's workspace (the other cell adds rh_bytes + gemm_rh_bytes; gru_cell_workspace).
  int64_t workspace_bytes() const { return x_bytes + h_bytes + gemm_x_bytes + gemm_h_bytes + state_bytes + output_bytes; }
};

// The layout's sizes once H, C, N, T and the padded dimensions are set; the "GRU <path> GEMM layout"
// message prefix names the path. Throws qgru::Error naming the shape for a size below 1.
inline GruGemmLayout gru_gemm_layout_shape(const char* path, int64_t H, int64_t C, int64_t N, int64_t T,
                                           int64_t operand_bytes, int64_t accumulator_bytes) {
  if (H < 1 || C < 1 || N < 1 || T < 1) {
    throw Error(std::string("GRU ") + path + " GEMM layout: every size must be at least 1 (H=" + std::to_string(H) +
                " C=" + std::to_string(C) + " N=" + std::to_string(N) + " T=" + std::to_string(T) + ")");
  }
  GruGemmLayout l;
  l.H = H;
  l.C = C;
  l.N = N;
  l.T = T;
  l.operand_bytes = operand_bytes;
  l.accumulator_bytes = accumulator_bytes;
  return l;
}

inline void size_gru_gemm_buffers(GruGemmLayout& l) {
  const int64_t TN_p = l.T * l.N_p;
  l.W_bytes = l.operand_bytes * l.rows_p * l.C_p;
  l.R_bytes = l.operand_bytes * l.rows_p * l.H_p;
  l.x_bytes = l.operand_bytes * TN_p * l.C_p;
  l.h_bytes = l.operand_bytes * l.N_p * l.H_p;
  l.gemm_x_bytes = l.accumulator_bytes * TN_p * l.rows_p;
  l.gemm_h_bytes = l.accumulator_bytes * l.N_p * l.rows_p;
  l.state_bytes = 4 * l.N * l.H;
  l.output_bytes = 4 * l.T * l.N * l.H;
  l.Rn_bytes = l.operand_bytes * l.rows_n_p * l.H_p;
  l.rh_bytes = l.operand_bytes * l.N_p * l.H_p;
  l.gemm_rh_bytes = l.accumulator_bytes * l.N_p * l.rows_n_p;
}

// Throws qgru::Error naming the shape when the int8 GEMM cannot serve it.
inline GruGemmLayout plan_gru_gemm(int64_t H, int64_t C, int64_t N, int64_t T) {
  GruGemmLayout l = gru_gemm_layout_shape("int8", H, C, N, T, 1, 4);
  const std::string shape = "H=" + std::to_string(H) + " C=" + std::to_string(C) + " N=" + std::to_string(N) +
                            " T=" + std::to_string(T);
  l.rows_p = pad_to_multiple(3 * H, kInt8GemmMultiple);
  l.rows_zr_p = pad_to_multiple(2 * H, kInt8GemmMultiple);
  l.rows_n_p = pad_to_multiple(H, kInt8GemmMultiple);
  l.C_p = pad_to_multiple(C, kInt8GemmMultiple);
  l.H_p = pad_to_multiple(H, kInt8GemmMultiple);
  l.N_p = pad_to_multiple(N, kInt8GemmMultiple);
  if (l.C_p > kInt8GemmMaxK || l.H_p > kInt8GemmMaxK) {
    throw Error("GRU int8 GEMM layout: a reduction longer than " + std::to_string(kInt8GemmMaxK) +
                " could overflow the int32 accumulator (" + shape + ")");
  }
  if (l.rows_p > INT32_MAX || T * l.N_p > INT32_MAX) throw Error("GRU int8 GEMM layout: sizes exceed cuBLAS's int (" + shape + ")");
  size_gru_gemm_buffers(l);
  return l;
}

// codes [rows, cols] (row-major int32) -> Stored rows of `out` with leading dimension cols_p, stored = q - offset
// (padding columns untouched). Throws qgru::Error (naming `what`, the row first_row + r and the column) for a
// code that does not fit Stored after the offset; the row that holds it may then be partly written.
// Each row is checked and stored in one branch-free pass that the compiler vectorizes: the check compares the
// code itself with [lo + offset, hi + offset] (int64, clamped to int32's range: no overflow for any code), and
// the store subtracts in uint32 (wrapping: defined for any code) and keeps the low bits of the difference in
// Stored (the conversion GCC and Clang define, and C++20 requires), which is q - offset for every code that
// passed; the first offending column is looked up only when the row fails.
template <class Stored>
inline void pack_signed_rows_into(const int32_t* codes, int64_t rows, int64_t cols, int64_t cols_p, int32_t offset,
                                  const std::string& what, int64_t first_row, Stored* out) {
  constexpr int64_t lo = std::numeric_limits<Stored>::min(), hi = std::numeric_limits<Stored>::max();
  const int32_t code_min = static_cast<int32_t>(std::max<int64_t>(INT32_MIN, lo + offset));
  const int32_t code_max = static_cast<int32_t>(std::min<int64_t>(INT32_MAX, hi + offset));
  const uint32_t offset_bits = static_cast<uint32_t>(offset);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t* row = codes + r * cols;
    Stored* dst = out + r * cols_p;
    int outside = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const int32_t q = row[c];
      outside |= static_cast<int>(q < code_min) | static_cast<int>(q > code_max);
      dst[c] = static_cast<Stored>(static_cast<uint32_t>(q) - offset_bits);  // = q - offset when q passed
    }
    if (outside == 0) continue;
    for (int64_t c = 0; c < cols; ++c) {
      if (row[c] < code_min || row[c] > code_max) {
        throw Error(what + "[" + std::to_string(first_row + r) + ", " + std::to_string(c) + "] = " +
                    std::to_string(row[c]) + " does not fit int" + std::to_string(8 * sizeof(Stored)) +
                    " after the offset " + std::to_string(offset));
      }
    }
  }
}

// codes [rows, cols] -> Stored [rows_p, cols_p], padding 0.
template <class Stored>
inline std::vector<Stored> pack_signed_rows(const int32_t* codes, int64_t rows, int64_t cols, int64_t rows_p,
                                            int64_t cols_p, int32_t offset, const std::string& what) {
  std::vector<Stored> out(static_cast<size_t>(rows_p * cols_p), 0);
  pack_signed_rows_into(codes, rows, cols, cols_p, offset, what, 0, out.data());
  return out;
}

// Per-step activations: codes [T, N, cols] -> Stored [T, N_p, cols_p], row (t, n) at t·N_p + n, padding rows
// and columns 0 (the layout of x and h in GruGemmLayout).
// pack_signed_steps_into writes the same into `out` [T·N_p·cols_p] (e.g. pinned memory), padding included.
template <class Stored>
inline void pack_signed_steps_into(const int32_t* codes, int64_t T, int64_t N, int64_t cols, int64_t N_p, int64_t cols_p,
                                   int32_t offset, const std::string& what, Stored* out) {
  for (int64_t t = 0; t < T; ++t) {
    Stored* step = out + t * N_p * cols_p;
    pack_signed_rows_into(codes + t * N * cols, N, cols, cols_p, offset, what, t * N, step);
    for (int64_t n = 0; n < N; ++n) std::fill(step + n * cols_p + cols, step + (n + 1) * cols_p, Stored{0});
    std::fill(step + N * cols_p, step + N_p * cols_p, Stored{0});
  }
}
template <class Stored>
inline std::vector<Stored> pack_signed_steps(const int32_t* codes, int64_t T, int64_t N, int64_t cols, int64_t N_p,
                                             int64_t cols_p, int32_t offset, const std::string& what) {
  std::vector<Stored> out(static_cast<size_t>(T * N_p * cols_p));
  pack_signed_steps_into(codes, T, N, cols, N_p, cols_p, offset, what, out.data());
  return out;
}

// codes [rows, cols] (row-major int32) -> int8 [rows_p, cols_p], stored = q - offset, padding 0.
inline std::vector<int8_t> pack_int8_rows(const int32_t* codes, int64_t rows, int64_t cols, int64_t rows_p,
                                          int64_t cols_p, int32_t offset, const std::string& what) {
  return pack_signed_rows<int8_t>(codes, rows, cols, rows_p, cols_p, offset, what);
}

// Exact inverse of pack_int8_rows on the unpadded part.
inline std::vector<int32_t> unpack_int8_rows(const int8_t* packed, int64_t rows, int64_t cols, int64_t cols_p, int32_t offset) {
  std::vector<int32_t> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(r * cols + c)] = packed[r * cols_p + c] + offset;
  return out;
}

// What the cuBLAS call above computes, in plain loops: C[b·ldc + c] = Σ_{k<k_p} A[c·lda + k]·B[b·ldb + k]
// for c < m, b < n (int32 accumulation; the layout guarantees no overflow).
inline void gemm_int8_tn_reference(int64_t m, int64_t n, int64_t k, const int8_t* A, int64_t lda, const int8_t* B,
                                   int64_t ldb, int32_t* C, int64_t ldc) {
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t c = 0; c < m; ++c) {
      int32_t sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += static_cast<int32_t>(A[c * lda + i]) * static_cast<int32_t>(B[b * ldb + i]);
      C[b * ldc + c] = sum;
    }
  }
}

}  // namespace qgru::kernels
