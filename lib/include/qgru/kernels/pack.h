#pragma once
// Pack-time weight preprocessing for qgru/kernels/fast_dequant.h, and its exact inverse. QGRU_HD.
//
// - Bias: a signed code q of `bits` bits is stored as the unsigned code u = q + 2^(bits-1) (int8: the
//   "+128 byte bias" of the fast dequantization, docs/CUDA.md; int4: +8). unbias_code undoes it. Both are exact bijections.
// - Interleave: element i of a packed word (count = 32/bits elements, element i in bits
//   [bits·i, bits·(i+1)) of the plain word) moves to slot interleaved_slot(count, i) = i/2 + (count/2)·(i%2).
//   PRMT/LOP3 put slots (j, j + count/2) into pair j, so after the interleave pair j holds elements
//   (2j, 2j+1): the natural order. deinterleave_word is the inverse permutation.
#include <cstdint>

#include "qgru/hd.h"

namespace qgru::kernels {

// Slot of element i (0 <= i < count) in an interleaved word of `count` elements.
QGRU_HD constexpr int interleaved_slot(int count, int i) { return i / 2 + (count / 2) * (i % 2); }

// Field `slot` of `bits` bits of a word (bits = 4 or 8).
QGRU_HD constexpr uint32_t word_field(uint32_t word, int bits, int slot) {
  return (word >> (bits * slot)) & ((1u << bits) - 1u);
}

// Moves element i of a plain word to interleaved_slot(count, i).
QGRU_HD uint32_t interleave_word(uint32_t word, int bits) {
  const int count = 32 / bits;
  uint32_t out = 0;
  for (int i = 0; i < count; ++i) out |= word_field(word, bits, i) << (bits * interleaved_slot(count, i));
  return out;
}

// Inverse of interleave_word: element i comes back from slot interleaved_slot(count, i).
QGRU_HD uint32_t deinterleave_word(uint32_t word, int bits) {
  const int count = 32 / bits;
  uint32_t out = 0;
  for (int i = 0; i < count; ++i) out |= word_field(word, bits, interleaved_slot(count, i)) << (bits * i);
  return out;
}

// Signed code q in [-2^(bits-1), 2^(bits-1)) -> stored unsigned code q + 2^(bits-1), and back.
QGRU_HD constexpr uint32_t bias_code(int32_t q, int bits) {
  return static_cast<uint32_t>(q + (1 << (bits - 1))) & ((1u << bits) - 1u);
}
QGRU_HD constexpr int32_t unbias_code(uint32_t u, int bits) { return static_cast<int32_t>(u) - (1 << (bits - 1)); }

// Packs `count` = 32/bits unsigned codes (element i in bits [bits·i, bits·(i+1))), plain order.
QGRU_HD uint32_t pack_codes(const uint32_t* codes, int bits) {
  const int count = 32 / bits;
  uint32_t out = 0;
  for (int i = 0; i < count; ++i) out |= (codes[i] & ((1u << bits) - 1u)) << (bits * i);
  return out;
}

}  // namespace qgru::kernels
