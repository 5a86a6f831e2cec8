#pragma once
// The 16-bit GEMM path of the CUDA GRU executor (presets int16-activations and int16): operands stored as
// int16, a tiled integer GEMM kernel with int64 accumulation (cuda/src/gru_cell_cuda.cu, wide_gemm_kernel).
//
// Why this path (docs/CUDA.md "16-bit operands"): cuBLAS has no int16 GEMM, and splitting a 16-bit operand
// into two int8 parts (v = 256·hi + lo) needs lo in [0, 255] — not int8 — or a balanced lo in
// [-128, 127], whose hi then reaches +128 for v = 32767 — not int8 either; both need an extra offset term
// per part and four GEMMs when the weights are 16-bit too. One integer kernel with a wide accumulator is
// exact by a one-line argument and covers every operand width up to 16 bits:
//   stored operands: |a|, |b| <= 2^15 (int16, see int16_operand_offset), so each product |a·b| <= 2^30
//   fits int32 (computed in int32, exactly); the sum over k of at most 2^31 products is at most 2^61 in
//   magnitude and is accumulated in int64: no intermediate can overflow, whatever the summation order.
// The kernel is a launch shell: the tile loads and the per-thread dot product below are QGRU_HD and
// emulate_wide_gemm_tiled runs the kernel's exact grid / block / tile loop on the host for the CPU tests.
//
// GEMM (the same "TN" form as the int8 path, qgru/kernels/int8_gemm_layout.h):
//   C[b·ldc + c] = Σ_{k < K} A[c·lda + k] · B[b·ldb + k]   for c < m, b < n
//   A int16 [m, lda] (weights, row-major), B int16 [n, ldb] (activations), C int64 [n, ldc].
// Launch geometry: block kWideTile × kWideTile threads (tx ↔ c, ty ↔ b); grid.x = ceil(n / kWideTile)
// (batch rows, up to 2^31 - 1 blocks), grid.y = ceil(m / kWideTile) (channels, at most 65535 blocks);
// shared memory two kWideTile × (kWideTile + 1) int16 tiles. K is padded with zeros to a multiple of
// kWideTile (pack_int16_rows), so the k loop has no bounds check; rows and batch are bounds-checked.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/kernels/int8_gemm_layout.h"
#include "qgru/hd.h"

namespace qgru::kernels {

inline constexpr int kWideTile = 16;
inline constexpr int kWideTileLd = kWideTile + 1;  // shared-memory row length (odd: fewer bank conflicts)
inline constexpr int64_t kWideGemmMaxK = int64_t{1} << 31;
inline constexpr int64_t kWideGemmMaxChannelBlocks = 65535;  // grid.y limit

// Offset so that q - offset fits int16 (signed_operand_offset, qgru/kernels/int8_gemm_layout.h).
inline std::string int16_operand_offset(int32_t q_min, int32_t q_max, int32_t& offset) {
  return signed_operand_offset(16, q_min, q_max, offset);
}

// The raw accumulator Σ_k q_W[c,k]·q_x[k] from the wide GEMM of the stored operand (q_x - offset):
// Σ W·(q - offset) + offset·W_sum[c]. |offset·W_sum| <= 2^15 · K · 2^15 < 2^62 for K < 2^32.
QGRU_HD int64_t raw_gemm_accumulator(int64_t stored_gemm, int32_t operand_offset, int64_t weight_row_sum) {
  return stored_gemm + static_cast<int64_t>(operand_offset) * weight_row_sum;
}

struct WideGemmGeometry {
  int64_t m = 0, n = 0, k_p = 0;
  int64_t grid_x = 0, grid_y = 0;  // batch blocks, channel blocks
  int block_x = kWideTile, block_y = kWideTile;
  int64_t smem_bytes = 2 * kWideTile * kWideTileLd * static_cast<int64_t>(sizeof(int16_t));
};

// Throws qgru::Error naming m, n, k when the kernel cannot run the shape (k_p must be a multiple of kWideTile).
inline WideGemmGeometry plan_wide_gemm(int64_t m, int64_t n, int64_t k_p) {
  const std::string shape = "m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k_p);
  if (m < 1 || n < 1 || k_p < kWideTile || k_p % kWideTile != 0) {
    throw Error("wide GEMM: m, n must be >= 1 and k a positive multiple of " + std::to_string(kWideTile) + " (" + shape + ")");
  }
  if (k_p > kWideGemmMaxK) throw Error("wide GEMM: k above 2^31 could overflow the int64 accumulator (" + shape + ")");
  WideGemmGeometry g;
  g.m = m;
  g.n = n;
  g.k_p = k_p;
  g.grid_x = (n + kWideTile - 1) / kWideTile;
  g.grid_y = (m + kWideTile - 1) / kWideTile;
  if (g.grid_x > INT32_MAX || g.grid_y > kWideGemmMaxChannelBlocks) {
    throw Error("wide GEMM: the grid exceeds CUDA's limits (" + shape + ")");
  }
  return g;
}

// Phase 1 of one k tile, thread (tx, ty) of block (bx, by): load A[by·T + ty, k0 + tx] and
// B[bx·T + ty, k0 + tx] into the shared tiles (zero outside m / n rows; k is padded so never outside).
QGRU_HD void wide_gemm_load_tile(const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb, int64_t m, int64_t n,
                                 int64_t k0, int64_t bx, int64_t by, int tx, int ty, int16_t* a_tile, int16_t* b_tile) {
  const int64_t a_row = by * kWideTile + ty;  // channel c
  const int64_t b_row = bx * kWideTile + ty;  // batch row b
  a_tile[ty * kWideTileLd + tx] = a_row < m ? A[a_row * lda + k0 + tx] : int16_t{0};
  b_tile[ty * kWideTileLd + tx] = b_row < n ? B[b_row * ldb + k0 + tx] : int16_t{0};
}

// Phase 2: thread (tx, ty) adds Σ_i a_tile[tx][i]·b_tile[ty][i] to its int64 accumulator. Each product of
// two int16 is at most 2^30 in magnitude: exact in int32 (see the header comment for the sum).
QGRU_HD int64_t wide_gemm_tile_dot(const int16_t* a_tile, const int16_t* b_tile, int tx, int ty, int64_t acc) {
  for (int i = 0; i < kWideTile; ++i) {
    const int32_t product = static_cast<int32_t>(a_tile[tx * kWideTileLd + i]) * static_cast<int32_t>(b_tile[ty * kWideTileLd + i]);
    acc += product;
  }
  return acc;
}

// Phase 3: write the thread's result (c = by·T + tx, b = bx·T + ty) when inside the output.
QGRU_HD void wide_gemm_store(int64_t* C, int64_t ldc, int64_t m, int64_t n, int64_t bx, int64_t by, int tx, int ty, int64_t acc) {
  const int64_t c = by * kWideTile + tx;
  const int64_t b = bx * kWideTile + ty;
  if (c < m && b < n) C[b * ldc + c] = acc;
}

// The kernel's whole grid on the host: every block, every k tile, load phase for all threads, then the dot
// phase for all threads (the __syncthreads() order), then the stores.
inline void emulate_wide_gemm_tiled(const WideGemmGeometry& g, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb,
                                    int64_t* C, int64_t ldc) {
  std::vector<int16_t> a_tile(kWideTile * kWideTileLd), b_tile(kWideTile * kWideTileLd);
  std::vector<int64_t> acc(kWideTile * kWideTile);
  for (int64_t by = 0; by < g.grid_y; ++by) {
    for (int64_t bx = 0; bx < g.grid_x; ++bx) {
      std::fill(acc.begin(), acc.end(), 0);
      for (int64_t k0 = 0; k0 < g.k_p; k0 += kWideTile) {
        for (int ty = 0; ty < kWideTile; ++ty)
          for (int tx = 0; tx < kWideTile; ++tx)
            wide_gemm_load_tile(A, lda, B, ldb, g.m, g.n, k0, bx, by, tx, ty, a_tile.data(), b_tile.data());
        for (int ty = 0; ty < kWideTile; ++ty)
          for (int tx = 0; tx < kWideTile; ++tx)
            acc[ty * kWideTile + tx] = wide_gemm_tile_dot(a_tile.data(), b_tile.data(), tx, ty, acc[ty * kWideTile + tx]);
      }
      for (int ty = 0; ty < kWideTile; ++ty)
        for (int tx = 0; tx < kWideTile; ++tx) wide_gemm_store(C, ldc, g.m, g.n, bx, by, tx, ty, acc[ty * kWideTile + tx]);
    }
  }
}

// codes [rows, cols] (row-major int32) -> int16 [rows_p, cols_p], stored = q - offset, padding 0. Throws
// qgru::Error (naming `what`, the row and column) for a code that does not fit int16 after the offset.
inline std::vector<int16_t> pack_int16_rows(const int32_t* codes, int64_t rows, int64_t cols, int64_t rows_p,
                                            int64_t cols_p, int32_t offset, const std::string& what) {
  return pack_signed_rows<int16_t>(codes, rows, cols, rows_p, cols_p, offset, what);
}

// Sizes of one cell's wide GEMMs (GruGemmLayout, qgru/kernels/int8_gemm_layout.h): int16 operands with K
// dimensions padded to kWideTile, int64 accumulators with ldc = rows_p = 3H (unpadded).
inline GruGemmLayout plan_gru_wide(int64_t H, int64_t C, int64_t N, int64_t T) {
  GruGemmLayout l = gru_gemm_layout_shape("wide", H, C, N, T, 2, 8);
  l.rows_p = 3 * H;
  l.rows_zr_p = 2 * H;
  l.rows_n_p = H;
  l.C_p = pad_to_multiple(C, kWideTile);
  l.H_p = pad_to_multiple(H, kWideTile);
  l.N_p = N;  // the kernel bounds-checks batch rows
  plan_wide_gemm(l.rows_p, T * N, l.C_p);  // throws on a shape the kernel cannot take
  plan_wide_gemm(l.rows_p, N, l.H_p);
  size_gru_gemm_buffers(l);
  return l;
}

// What the kernel computes, in plain loops (the test reference): int64 sums of int64 products.
inline void gemm_wide_tn_reference(int64_t m, int64_t n, int64_t k, const int16_t* A, int64_t lda, const int16_t* B,
                                   int64_t ldb, int64_t* C, int64_t ldc) {
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t c = 0; c < m; ++c) {
      int64_t sum = 0;
      for (int64_t i = 0; i < k; ++i) sum += static_cast<int64_t>(A[c * lda + i]) * static_cast<int64_t>(B[b * ldb + i]);
      C[b * ldc + c] = sum;
    }
  }
}

}  // namespace qgru::kernels
