#pragma once
// The per-element work of the quantized-linear kernel (cuda/src/quant_linear_kernels.cu), QGRU_HD, so the
// CPU tests run exactly what the kernel runs: which A chunk / W word a thread index loads, the group of a
// packed word, and the dequantization of one word into the rows of the shared W tile.
// Shared memory (tile_smem_layout, linear_plan.h): two stages of { A [block_m, block_k + 8] fp16 bits, the k
// tile's packed W words [block_k·bits/32, block_n] uint32 } filled by cp.async (copy16_async below) one k tile
// ahead of the math, and one fp16 W tile [block_k, block_n + 8] that each k tile's words are dequantized into
// (rows padded by 8 halves). The epilogue stages each warp's 16x16 accumulator fragments in the same space.
#include <cstdint>
#include <cstring>

#include "qgru/kernels/fast_dequant.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/hd.h"

namespace qgru::kernels {

// A tile loader: chunk `chunk` (8 consecutive halves of one row) -> (row, first column) in the tile.
struct TileCoord {
  int row, col;
};
QGRU_HD TileCoord a_tile_chunk(int chunk, int block_k) { return {chunk / (block_k / 8), (chunk % (block_k / 8)) * 8}; }

// Group of the packed word kw (codes kw·per_word .. +per_word-1), all in one group when
// group_size % per_word == 0 (linear_plan.h requires it).
QGRU_HD int64_t word_group(int64_t kw, int per_word, int64_t group_size) { return (kw * per_word) / group_size; }

// Dequantizes one packed GPTQ word (column `col`, codes k = row0 .. row0 + 32/Bits - 1 of the tile) with its
// zero and fp16 scale, and stores each half to tile[(row0 + element) · ld + col]: RN_fp16(s · (u - zero)).
template <int Bits>
QGRU_HD void dequant_word_to_tile(uint32_t word, uint32_t zero, uint16_t scale, uint16_t* tile, int ld, int row0, int col) {
  constexpr int kPerWord = 32 / Bits;
  if constexpr (Bits == 4) {
    const F16x2x4 h = dequant_u4x8_raw(word, zero, scale);
    for (int j = 0; j < 4; ++j) {
      tile[(row0 + raw_pair_element(kPerWord, j, 0)) * ld + col] = static_cast<uint16_t>(h.pair[j] & 0xFFFFu);
      tile[(row0 + raw_pair_element(kPerWord, j, 1)) * ld + col] = static_cast<uint16_t>(h.pair[j] >> 16);
    }
  } else {
    static_assert(Bits == 8, "4- or 8-bit codes");
    const F16x2x2 h = dequant_u8x4_raw(word, zero, scale);
    for (int j = 0; j < 2; ++j) {
      tile[(row0 + raw_pair_element(kPerWord, j, 0)) * ld + col] = static_cast<uint16_t>(h.pair[j] & 0xFFFFu);
      tile[(row0 + raw_pair_element(kPerWord, j, 1)) * ld + col] = static_cast<uint16_t>(h.pair[j] >> 16);
    }
  }
}

// ---- the double-buffered pipeline (cp.async) ----

// 16 bytes from global to shared memory, asynchronously on the device (cp.async.cg, sm_80+; completed by
// copy_async_commit + copy_async_wait); zeros when !valid (the src-size-0 form reads nothing). On the host a
// plain copy, which is what the device's copy has done once the wait returns.
QGRU_HD void copy16_async(void* smem_dst, const void* gmem_src, bool valid) {
#if defined(__CUDA_ARCH__)
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem_dst));
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem_src), "r"(src_bytes));
#else
  if (valid) {
    std::memcpy(smem_dst, gmem_src, 16);
  } else {
    std::memset(smem_dst, 0, 16);
  }
#endif
}
QGRU_HD void copy_async_commit() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
// Waits until at most `pending` committed groups are still in flight.
template <int Pending>
QGRU_HD void copy_async_wait() {
#if defined(__CUDA_ARCH__)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
#endif
}

// W stage loader: 16-byte chunk `chunk` -> (word row, first of 4 columns) of the k tile's packed words.
QGRU_HD TileCoord w_stage_chunk(int chunk, int block_n) { return {chunk / (block_n / 4), (chunk % (block_n / 4)) * 4}; }

// Issues the loads of one k tile (starting at k0) into one stage: A rows m0.. (16-byte chunks; rows past M are
// zeros; with act-order the 8 halves of a chunk are gathered through a_perm with plain loads instead) and the
// packed words of qweight rows k0/per_word.. for columns n0.. (4 columns per chunk; N % 8 == 0, so a chunk is
// all inside or all past N, and past N it is zeros). Thread `tid` of `threads` takes every threads-th chunk.
template <int Bits>
QGRU_HD void load_stage(const uint16_t* a, const int32_t* a_perm, const uint32_t* qweight, int64_t M, int64_t N,
                        int64_t K, int64_t m0, int64_t n0, int64_t k0, int block_m, int block_n, int block_k, int tid,
                        int threads, uint16_t* a_stage, int ld_a, uint32_t* w_stage) {
  constexpr int kPerWord = 32 / Bits;
  for (int chunk = tid; chunk < block_m * block_k / 8; chunk += threads) {
    const TileCoord at = a_tile_chunk(chunk, block_k);
    const int64_t m = m0 + at.row;
    uint16_t* dst = a_stage + at.row * ld_a + at.col;
    if (a_perm == nullptr) {
      copy16_async(dst, a + (m < M ? m * K + k0 + at.col : 0), m < M);
    } else {
      for (int i = 0; i < 8; ++i) dst[i] = m < M ? a[m * K + a_perm[k0 + at.col + i]] : uint16_t{0};
    }
  }
  const int word_rows = block_k / kPerWord;
  for (int chunk = tid; chunk < word_rows * block_n / 4; chunk += threads) {
    const TileCoord wc = w_stage_chunk(chunk, block_n);
    const int64_t n = n0 + wc.col;
    const int64_t kw = k0 / kPerWord + wc.row;
    copy16_async(w_stage + wc.row * block_n + wc.col, qweight + (n < N ? kw * N + n : 0), n < N);
  }
}

// Dequantizes column `col` of a W stage into the fp16 W tile: word rows row_begin, row_begin + row_step, ... of
// the k tile at k0. The zero point and the scale are loaded once per group (when the group of the next word
// differs from the last one's), not once per word. Past N the column is zeros.
template <int Bits>
QGRU_HD void dequant_stage_column(const uint32_t* w_stage, const uint32_t* qzeros, const uint16_t* scales, int64_t N,
                                  int64_t group_size, int zero_adjust, int64_t k0, int64_t n0, int col, int row_begin,
                                  int row_step, int block_n, int block_k, uint16_t* tile, int ld) {
  constexpr int kPerWord = 32 / Bits;
  const int word_rows = block_k / kPerWord;
  const int64_t n = n0 + col;
  if (n >= N) {
    for (int r = row_begin; r < word_rows; r += row_step)
      for (int i = 0; i < kPerWord; ++i) tile[(r * kPerWord + i) * ld + col] = 0;
    return;
  }
  int64_t group = -1;
  uint32_t zero = 0;
  uint16_t scale = 0;
  for (int r = row_begin; r < word_rows; r += row_step) {
    const int64_t g = word_group(k0 / kPerWord + r, kPerWord, group_size);
    if (g != group) {
      group = g;
      zero = gptq_zero(qzeros, N, Bits, g, n, zero_adjust);
      scale = scales[g * N + n];
    }
    dequant_word_to_tile<Bits>(w_stage[r * block_n + col], zero, scale, tile, ld, r * kPerWord, col);
  }
}

// Epilogue: element e (0..255) of a warp's 16x16 fragment staged row-major in its own area -> (row, column)
// in the fragment. Lane l takes e = l, l + 32, ..., so a warp writes 32 consecutive columns' worth per pass.
QGRU_HD TileCoord fragment_element(int e) { return {e / 16, e % 16}; }

}  // namespace qgru::kernels
