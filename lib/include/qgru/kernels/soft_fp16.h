#pragma once
// Exact software IEEE binary16 arithmetic: the host emulation of PTX add/sub/mul/fma.rn.f16(x2).
// Host only (the device runs the real instructions, see qgru/kernels/ptx_ops.h).
//
// Contract (the same as PTX `.rn` without `.ftz`/`.sat`):
// - add, sub, mul and fma compute the exact real result and round it ONCE to the nearest binary16, ties to
//   even. fma(a, b, c) = RN(a·b + c) with no intermediate rounding.
// - Subnormal inputs and results are kept (gradual underflow, no flush to zero); a finite result whose
//   magnitude rounds to 2^16 or more becomes ±inf.
// - An exact zero result is +0, except -0 when both addends are -0 (IEEE 754 round-to-nearest).
// - inf and NaN follow IEEE 754 (inf - inf, 0·inf: NaN). Every NaN result is the quiet NaN 0x7FFF; callers
//   compare NaN results only as "is NaN" (the dequantization paths never produce one).
//
// How: every finite binary16 is an integer multiple of 2^-24, every product of two of them a multiple of
// 2^-48 below 2^32. So a·b + c is held exactly as sign · M · 2^-48 with M < 2^81 in unsigned 128-bit
// integers, and `round_exact_to_half` rounds that once.
#include <cstdint>

#include "qgru/half.h"

namespace qgru::softfp16 {

__extension__ typedef unsigned __int128 u128;

inline bool is_nan(uint16_t h) { return (h & 0x7FFFu) > 0x7C00u; }
inline bool is_inf(uint16_t h) { return (h & 0x7FFFu) == 0x7C00u; }
inline bool sign_of(uint16_t h) { return (h & 0x8000u) != 0; }

constexpr uint16_t kCanonicalNaN = 0x7FFF;

// |h| of a finite half in units of 2^-24 (an integer below 2^16·2^24/2^... = 65504·2^24 < 2^40).
inline uint64_t magnitude_units24(uint16_t h) {
  const uint32_t exponent = (h >> 10) & 0x1Fu;
  const uint64_t mantissa = h & 0x3FFu;
  if (exponent == 0) return mantissa;                       // subnormal: mantissa · 2^-24
  return (mantissa | 0x400u) << (exponent - 1u);            // (1024 + m) · 2^(e-25) = (...) << (e-1) units
}

// Rounds the exact value (negative ? -1 : 1) · units · 2^-48 to the nearest half, ties to even.
// units == 0 gives a zero with the given sign.
inline uint16_t round_exact_to_half(bool negative, u128 units) {
  const uint16_t sign = negative ? 0x8000u : 0u;
  if (units == 0) return sign;
  int msb = 127;
  while (((units >> msb) & 1u) == 0) --msb;  // value in [2^(msb-48), 2^(msb-47))
  // Quantum (one unit in the last place) in units of 2^-48: 2^(msb-10) for normals, 2^24 for subnormals.
  const int drop = msb - 10 > 24 ? msb - 10 : 24;
  const u128 kept = units >> drop;
  const u128 remainder = units - (kept << drop);
  const u128 halfway = static_cast<u128>(1) << (drop - 1);
  u128 rounded = kept + ((remainder > halfway || (remainder == halfway && (kept & 1u))) ? 1u : 0u);
  int quantum_exp = drop;  // value = rounded · 2^(quantum_exp - 48)
  if (rounded >= 2048u) {  // a carry out of 11 bits: 2048 · q = 1024 · 2q, exact
    rounded >>= 1;
    ++quantum_exp;
  }
  if (rounded < 1024u) return static_cast<uint16_t>(sign | static_cast<uint16_t>(rounded));  // subnormal
  // Normal: rounded in [1024, 2048), value = (rounded/1024) · 2^(quantum_exp - 38); biased exponent +15.
  const int biased = quantum_exp - 23;
  if (biased >= 31) return static_cast<uint16_t>(sign | 0x7C00u);
  return static_cast<uint16_t>(sign | (static_cast<uint32_t>(biased) << 10) |
                               (static_cast<uint32_t>(rounded) & 0x3FFu));
}

// NaN/inf cases of fma(a, b, c); returns true and sets `out` when one of them applies.
inline bool fma_special(uint16_t a, uint16_t b, uint16_t c, uint16_t& out) {
  if (!(is_nan(a) || is_nan(b) || is_nan(c) || is_inf(a) || is_inf(b) || is_inf(c))) return false;
  // float arithmetic handles the special values with IEEE 754 rules; the finite parts do not matter here.
  const float product = half_bits_to_float(a) * half_bits_to_float(b);
  const float result = product + half_bits_to_float(c);
  out = result != result ? kCanonicalNaN : float_to_half_bits(result);
  return true;
}

// fma(a, b, c) = RN(a·b + c), one rounding.
inline uint16_t fma(uint16_t a, uint16_t b, uint16_t c) {
  uint16_t special = 0;
  if (fma_special(a, b, c, special)) return special;
  const bool product_negative = sign_of(a) != sign_of(b);
  const u128 product = static_cast<u128>(magnitude_units24(a)) * magnitude_units24(b);  // units of 2^-48
  const u128 addend = static_cast<u128>(magnitude_units24(c)) << 24;                    // units of 2^-48
  const bool addend_negative = sign_of(c);
  if (product_negative == addend_negative) {
    // Same signs: an exact zero happens only for 0 + 0 and keeps that common sign.
    return round_exact_to_half(product_negative, product + addend);
  }
  if (product == addend) return 0;  // exact cancellation: +0 in round-to-nearest
  return product > addend ? round_exact_to_half(product_negative, product - addend)
                          : round_exact_to_half(addend_negative, addend - product);
}

constexpr uint16_t kOne = 0x3C00;
constexpr uint16_t kNegativeZero = 0x8000;

// a + b = fma(a, 1, b) (exact product, one rounding). a - b = a + (-b).
inline uint16_t add(uint16_t a, uint16_t b) { return fma(a, kOne, b); }
inline uint16_t sub(uint16_t a, uint16_t b) { return fma(a, kOne, static_cast<uint16_t>(b ^ 0x8000u)); }
// a · b = fma(a, b, -0): adding -0 never changes a value nor the sign of a zero product.
inline uint16_t mul(uint16_t a, uint16_t b) { return fma(a, b, kNegativeZero); }

// Packed forms: the low and high 16 bits of a 32-bit word are two independent halves (PTX .f16x2).
inline uint32_t lo_hi(uint16_t lo, uint16_t hi) { return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16); }
inline uint16_t lo(uint32_t x) { return static_cast<uint16_t>(x & 0xFFFFu); }
inline uint16_t hi(uint32_t x) { return static_cast<uint16_t>(x >> 16); }
inline uint32_t add2(uint32_t a, uint32_t b) { return lo_hi(add(lo(a), lo(b)), add(hi(a), hi(b))); }
inline uint32_t sub2(uint32_t a, uint32_t b) { return lo_hi(sub(lo(a), lo(b)), sub(hi(a), hi(b))); }
inline uint32_t mul2(uint32_t a, uint32_t b) { return lo_hi(mul(lo(a), lo(b)), mul(hi(a), hi(b))); }
inline uint32_t fma2(uint32_t a, uint32_t b, uint32_t c) {
  return lo_hi(fma(lo(a), lo(b), lo(c)), fma(hi(a), hi(b), hi(c)));
}

}  // namespace qgru::softfp16
