#pragma once
// Fast integer -> fp16 dequantization without int->float conversion instructions (docs/CUDA.md, "Fast dequantization"), QGRU_HD.
//
// The trick: for an integer u in [0, 1024) the fp16 bit pattern 0x6400 | u is exactly the value 1024 + u
// (exponent 2^10, u in the 10 mantissa bits). PRMT (8-bit codes) or LOP3 (4-bit codes) drops the codes into
// the mantissas of two packed halves at once; one packed fp16 subtraction of 1024 + offset then leaves
// u - offset. For the 4-bit codes in the upper nibble of a byte the mantissa holds 16·u, so the value is
// 1024 + 16u and fma(h, 1/16, -(64 + offset)) = u - offset.
//
// Exactness contract (tested exhaustively on the host emulation, test/unit/kernels):
//   8-bit: code u in [0, 255], offset in [0, 1023];  4-bit: code u in [0, 15], offset in [0, 63].
//   (1) 1024 + u, 1024 + offset (or 64 + offset and 64 + u) are exact fp16 values, and u - offset is an
//       integer of magnitude below 2048, so the subtraction / fma step is EXACT: it yields u - offset.
//   (2) The only rounding is the final multiply by the fp16 scale s: the result is RN_fp16(s · (u - offset)),
//       the exact product rounded once to nearest even (subnormal results kept, overflow to inf).
//   A signed code q with zero point z maps to these as u = q + bias (bias 128 for int8, 8 for int4, the
//   "+128 byte bias" stored at pack time) and offset = z + bias, so u - offset = q - z.
//
// Element order. "raw" functions take a word as it is stored (element i in byte/nibble i, low bits first,
// as GPTQ's qweight packs K) and return pairs in the order the instructions produce them: pair j holds
// elements (j, j + n/2) in its (low, high) half, n = 4 codes of 8 bits or 8 codes of 4 bits. The
// "natural" functions take a word interleaved at pack time (qgru/kernels/pack.h) and return pair j =
// elements (2j, 2j+1), ready for an MMA fragment.
#include <cstdint>

#include "qgru/kernels/ptx_ops.h"
#include "qgru/hd.h"

namespace qgru::kernels {

// fp16 bit patterns used below.
constexpr uint32_t kF16Magic1024x2 = 0x64006400u;  // {1024, 1024}
constexpr uint32_t kF16Int8Bias1152x2 = 0x64806480u;  // {1152, 1152} = 1024 + the +128 byte bias
constexpr uint32_t kF16OneSixteenthx2 = 0x2C002C00u;  // {1/16, 1/16}
constexpr uint32_t kPrmtSelectPair02 = 0x5250u;  // d = {byte0 | 0x64<<8, byte2 | 0x64<<8}
constexpr uint32_t kPrmtSelectPair13 = 0x5351u;  // d = {byte1 | 0x64<<8, byte3 | 0x64<<8}
constexpr uint32_t kPrmtMagicBytes = 0x64646464u;  // source of the 0x64 exponent bytes
constexpr uint32_t kLowNibbles = 0x000F000Fu;  // nibbles 0 and 4 of a word
constexpr uint32_t kHighNibbles = 0x00F000F0u;  // nibbles 1 and 5
constexpr uint32_t kLop3AndOr = (0xF0u & 0xCCu) | 0xAAu;  // lop3 immediate for (a & b) | c = 0xEA

struct F16x2x2 {
  uint32_t pair[2];
};
struct F16x2x4 {
  uint32_t pair[4];
};

// Both halves set to the same fp16 bits.
QGRU_HD uint32_t splat_f16x2(uint16_t bits) { return static_cast<uint32_t>(bits) * 0x00010001u; }
// fp16 bits of 1024 + offset for an integer offset in [0, 1023] (no conversion instruction).
QGRU_HD uint16_t f16_bits_1024_plus(uint32_t offset) { return static_cast<uint16_t>(0x6400u | offset); }
// fp16 bits of -(64 + offset) for an integer offset in [0, 63] (ulp at 64 is 1/16: mantissa = 16·offset).
QGRU_HD uint16_t f16_bits_neg_64_plus(uint32_t offset) { return static_cast<uint16_t>(0xD400u | (offset << 4)); }

// ---- 8-bit codes (PRMT) ----

// Four 8-bit codes u0..u3 (byte i) -> pairs {1024+u0, 1024+u2}, {1024+u1, 1024+u3}. Exact.
QGRU_HD F16x2x2 u8x4_to_magic_f16(uint32_t word) {
  F16x2x2 out;
  out.pair[0] = prmt_b32(word, kPrmtMagicBytes, kPrmtSelectPair02);
  out.pair[1] = prmt_b32(word, kPrmtMagicBytes, kPrmtSelectPair13);
  return out;
}

// The int8 path: four int8 values stored with the +128 byte bias -> fp16 pairs {q0, q2}, {q1, q3}.
// Exact (every int8 is an fp16).
QGRU_HD F16x2x2 int8x4_biased_to_f16_raw(uint32_t word) {
  F16x2x2 out = u8x4_to_magic_f16(word);
  out.pair[0] = sub_f16x2(out.pair[0], kF16Int8Bias1152x2);
  out.pair[1] = sub_f16x2(out.pair[1], kF16Int8Bias1152x2);
  return out;
}

// The operands dequant_u8x4_raw takes from a group's offset and scale, as packed halves: they depend on the
// group alone, so a kernel that dequantizes many words of one group prepares them once (dequant_u8_group) and
// keeps them in registers. Offset in [0, 1023], scale_bits an fp16; no rounding (bit moves only).
struct DequantU8Group {
  uint32_t offset2;  // {1024 + offset} x2
  uint32_t scale2;   // {s, s}
};
QGRU_HD DequantU8Group dequant_u8_group(uint32_t offset, uint16_t scale_bits) {
  return {splat_f16x2(f16_bits_1024_plus(offset)), splat_f16x2(scale_bits)};
}

// s · (u - offset) for four 8-bit codes, the group's operands prepared. Raw order.
QGRU_HD F16x2x2 dequant_u8x4_raw(uint32_t word, const DequantU8Group& group) {
  F16x2x2 out = u8x4_to_magic_f16(word);
  out.pair[0] = mul_f16x2(sub_f16x2(out.pair[0], group.offset2), group.scale2);  // exact u - offset, then one rounding
  out.pair[1] = mul_f16x2(sub_f16x2(out.pair[1], group.offset2), group.scale2);
  return out;
}

// s · (u - offset) for four 8-bit codes; offset in [0, 1023], scale_bits an fp16. Raw order.
QGRU_HD F16x2x2 dequant_u8x4_raw(uint32_t word, uint32_t offset, uint16_t scale_bits) {
  return dequant_u8x4_raw(word, dequant_u8_group(offset, scale_bits));
}

// ---- 4-bit codes (LOP3) ----

// Eight 4-bit codes u0..u7 (nibble i) -> pairs {1024+u0, 1024+u4}, {1024+16u1, 1024+16u5},
// {1024+u2, 1024+u6}, {1024+16u3, 1024+16u7}. Exact.
QGRU_HD F16x2x4 u4x8_to_magic_f16(uint32_t word) {
  const uint32_t upper = word >> 8;  // nibbles 2, 3, 6, 7 move to positions 0, 1, 4, 5
  F16x2x4 out;
  out.pair[0] = lop3_b32<kLop3AndOr>(word, kLowNibbles, kF16Magic1024x2);
  out.pair[1] = lop3_b32<kLop3AndOr>(word, kHighNibbles, kF16Magic1024x2);
  out.pair[2] = lop3_b32<kLop3AndOr>(upper, kLowNibbles, kF16Magic1024x2);
  out.pair[3] = lop3_b32<kLop3AndOr>(upper, kHighNibbles, kF16Magic1024x2);
  return out;
}

// The operands dequant_u4x8_raw takes from a group's offset and scale, as packed halves (see DequantU8Group:
// prepared once per group, kept in registers). Offset in [0, 63], scale_bits an fp16; bit moves only.
struct DequantU4Group {
  uint32_t low_offset2;   // {1024 + offset} x2, for the codes in the low nibbles
  uint32_t high_offset2;  // {-(64 + offset)} x2, for the codes in the high nibbles
  uint32_t scale2;        // {s, s}
};
QGRU_HD DequantU4Group dequant_u4_group(uint32_t offset, uint16_t scale_bits) {
  return {splat_f16x2(f16_bits_1024_plus(offset)), splat_f16x2(f16_bits_neg_64_plus(offset)), splat_f16x2(scale_bits)};
}

// u - offset for eight 4-bit codes, the group's offsets prepared. Raw order. Exact.
QGRU_HD F16x2x4 u4x8_minus_offset_raw(uint32_t word, const DequantU4Group& group) {
  F16x2x4 out = u4x8_to_magic_f16(word);
  out.pair[0] = sub_f16x2(out.pair[0], group.low_offset2);
  out.pair[1] = fma_f16x2(out.pair[1], kF16OneSixteenthx2, group.high_offset2);  // (1024+16u)/16 - (64+offset)
  out.pair[2] = sub_f16x2(out.pair[2], group.low_offset2);
  out.pair[3] = fma_f16x2(out.pair[3], kF16OneSixteenthx2, group.high_offset2);
  return out;
}

// u - offset for eight 4-bit codes, offset in [0, 63]. Raw order. Exact.
QGRU_HD F16x2x4 u4x8_minus_offset_raw(uint32_t word, uint32_t offset) {
  return u4x8_minus_offset_raw(word, dequant_u4_group(offset, 0));
}

// s · (u - offset) for eight 4-bit codes, the group's operands prepared. Raw order.
QGRU_HD F16x2x4 dequant_u4x8_raw(uint32_t word, const DequantU4Group& group) {
  F16x2x4 out = u4x8_minus_offset_raw(word, group);
  for (int j = 0; j < 4; ++j) out.pair[j] = mul_f16x2(out.pair[j], group.scale2);  // the one rounding
  return out;
}

// s · (u - offset) for eight 4-bit codes; offset in [0, 63], scale_bits an fp16. Raw order.
QGRU_HD F16x2x4 dequant_u4x8_raw(uint32_t word, uint32_t offset, uint16_t scale_bits) {
  return dequant_u4x8_raw(word, dequant_u4_group(offset, scale_bits));
}

// ---- element order ----

// In raw order, pair j holds elements j (low half) and j + count/2 (high half); count = 4 or 8.
QGRU_HD constexpr int raw_pair_element(int count, int pair, int high_half) { return pair + high_half * (count / 2); }

// Natural-order variants: the word was interleaved by pack.h, so pair j = elements (2j, 2j+1).
QGRU_HD F16x2x2 dequant_u8x4_natural(uint32_t interleaved_word, uint32_t offset, uint16_t scale_bits) {
  return dequant_u8x4_raw(interleaved_word, offset, scale_bits);
}
QGRU_HD F16x2x4 dequant_u4x8_natural(uint32_t interleaved_word, uint32_t offset, uint16_t scale_bits) {
  return dequant_u4x8_raw(interleaved_word, offset, scale_bits);
}

}  // namespace qgru::kernels
