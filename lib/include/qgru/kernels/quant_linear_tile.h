#pragma once
// The per-element work of the quantized-linear kernel (cuda/src/quant_linear_kernels.cu), QGRU_HD, so the
// CPU tests run exactly what the kernel runs: which A chunk / W word a thread index loads, the group of a
// packed word, and the dequantization of one word into the rows of the shared W tile.
// Shared tiles: A [block_m, block_k + 8] and W [block_k, block_n + 8] fp16 bits (rows padded by 8 halves).
#include <cstdint>

#include "qgru/kernels/fast_dequant.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/hd.h"

namespace qgru::kernels {

// A tile loader: chunk `chunk` (8 consecutive halves of one row) -> (row, first column) in the tile.
struct TileCoord {
  int row, col;
};
QGRU_HD TileCoord a_tile_chunk(int chunk, int block_k) { return {chunk / (block_k / 8), (chunk % (block_k / 8)) * 8}; }

// W tile loader: index `idx` -> (packed word row in the tile, column). Consecutive idx are consecutive
// columns, so a warp reads consecutive words of one qweight row (coalesced).
QGRU_HD TileCoord w_tile_word(int idx, int block_n) { return {idx / block_n, idx % block_n}; }

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

// The whole W-tile load of one thread index (as the kernel's loop body): word (word_row, col) of k tile
// starting at k0, or zeros past N.
template <int Bits>
QGRU_HD void load_w_tile_word(const uint32_t* qweight, const uint32_t* qzeros, const uint16_t* scales, int64_t N,
                              int64_t group_size, int zero_adjust, int64_t k0, int64_t n0, int idx, int block_n,
                              uint16_t* tile, int ld) {
  constexpr int kPerWord = 32 / Bits;
  const TileCoord w = w_tile_word(idx, block_n);
  const int64_t n = n0 + w.col;
  const int row0 = w.row * kPerWord;
  if (n >= N) {
    for (int i = 0; i < kPerWord; ++i) tile[(row0 + i) * ld + w.col] = 0;
    return;
  }
  const int64_t kw = k0 / kPerWord + w.row;
  const int64_t group = word_group(kw, kPerWord, group_size);
  const uint32_t zero = gptq_zero(qzeros, N, Bits, group, n, zero_adjust);
  dequant_word_to_tile<Bits>(qweight[kw * N + n], zero, scales[group * N + n], tile, ld, row0, w.col);
}

}  // namespace qgru::kernels
