#pragma once
// IEEE binary16 (fp16) and bfloat16 bit conversions in software, QGRU_HD.
// Contract: *_bits_to_float is exact (every fp16/bf16 value is a float). float_to_*_bits rounds to nearest,
// ties to even, overflows to infinity, keeps the sign of zero and turns NaN into a quiet NaN.
#include <cstdint>
#include <cstring>

#include "qgru/hd.h"

namespace qgru {

QGRU_HD uint32_t float_bits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

QGRU_HD float float_from_bits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

QGRU_HD float half_bits_to_float(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu;
  uint32_t mantissa = half & 0x3FFu;
  if (exponent == 0x1Fu) return float_from_bits(sign | 0x7F800000u | (mantissa << 13));  // inf / NaN
  if (exponent != 0) return float_from_bits(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  if (mantissa == 0) return float_from_bits(sign);  // signed zero
  // Subnormal: value = mantissa * 2^-24, normalise it into a float.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3FFu;
  return float_from_bits(sign | (static_cast<uint32_t>(113 - shift) << 23) | (mantissa << 13));
}

QGRU_HD uint16_t float_to_half_bits(float value) {
  const uint32_t bits = float_bits(value);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs_bits = bits & 0x7FFFFFFFu;
  if (abs_bits >= 0x7F800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7C00u | (abs_bits > 0x7F800000u ? 0x200u : 0u));
  }
  if (abs_bits >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds to >= 2^16: inf
  const int exponent = static_cast<int>(abs_bits >> 23) - 127;
  if (exponent < -25) return static_cast<uint16_t>(sign);  // below half the smallest subnormal: zero
  uint32_t mantissa = (abs_bits & 0x7FFFFFu) | 0x800000u;  // 24 significant bits
  // Target: normal halves keep 11 significant bits; subnormals keep fewer (value in units of 2^-24).
  const int drop = exponent >= -14 ? 13 : 13 + (-14 - exponent);
  const uint32_t kept = mantissa >> drop;
  const uint32_t remainder = mantissa & ((1u << drop) - 1u);
  const uint32_t halfway = 1u << (drop - 1);
  uint32_t rounded = kept + ((remainder > halfway || (remainder == halfway && (kept & 1u))) ? 1u : 0u);
  if (exponent >= -14) {
    // rounded has 11 bits (or 12 after a carry); biased exponent = exponent + 15.
    uint32_t half_exponent = static_cast<uint32_t>(exponent + 15);
    if (rounded & 0x800u) {
      rounded >>= 1;
      ++half_exponent;
    }
    return static_cast<uint16_t>(sign | (half_exponent << 10) | (rounded & 0x3FFu));
  }
  // Subnormal (a carry into 0x400 makes the smallest normal, which the same encoding expresses).
  return static_cast<uint16_t>(sign | rounded);
}

QGRU_HD float bf16_bits_to_float(uint16_t bf16) { return float_from_bits(static_cast<uint32_t>(bf16) << 16); }

QGRU_HD uint16_t float_to_bf16_bits(float value) {
  const uint32_t bits = float_bits(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace qgru
