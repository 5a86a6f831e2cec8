#pragma once
// The integer primitives every fixed-point step is written with (host and device, header-only).
//
// One rounding mode everywhere: ROUND HALF AWAY FROM ZERO. A value exactly half-way between two
// integers goes to the one with the larger magnitude: 2.5 -> 3, -2.5 -> -3, 1.5 -> 2, -0.5 -> -1.
// It is the mode of std::round, of TensorQuant::quantize and of the offline table generators, so a
// quantity rounded on the host while building an artifact and at run time on the device agrees.
//
// Code ranges: a b-bit signed code lies in [-2^(b-1), 2^(b-1)-1], an unsigned one in [0, 2^b-1].
#include <cstdint>

#include "qgru/hd.h"

namespace qgru {

// value * 2^-shift, correctly rounded to the nearest integer, ties away from zero.
//   shift in 1..62: a rounding right shift. Exact for EVERY int64 value (INT64_MIN included): the
//     magnitude is taken in uint64 (|INT64_MIN| = 2^63 fits), the result magnitude is at most
//     2^63 / 2^shift + 1 <= 2^62 + 1, which fits int64 again. Never overflows.
//   shift == 0: value unchanged.
//   shift in -62..-1: value * 2^-shift, a left shift written as a multiplication (defined for negative
//     values). The CALLER guarantees |value| * 2^-shift <= INT64_MAX; no saturation is done here.
// Shifts outside -62..62 are outside the contract.
QGRU_HD int64_t rshift_round(int64_t value, int shift) {
  if (shift > 0) {
    const bool negative = value < 0;
    const uint64_t magnitude =
        negative ? uint64_t{0} - static_cast<uint64_t>(value) : static_cast<uint64_t>(value);
    const uint64_t half = uint64_t{1} << (shift - 1);          // 0.5 in units of 2^-shift
    const uint64_t fraction_mask = (uint64_t{1} << shift) - 1;  // shift <= 62: no wrap
    // Truncate the magnitude, then add one when the dropped fraction is >= 0.5 (ties up in magnitude,
    // i.e. away from zero once the sign is put back).
    const uint64_t rounded = (magnitude >> shift) + ((magnitude & fraction_mask) >= half ? 1u : 0u);
    return negative ? -static_cast<int64_t>(rounded) : static_cast<int64_t>(rounded);
  }
  if (shift == 0) return value;
  return value * (int64_t{1} << -shift);  // caller guarantees the product fits int64
}

// value * multiplier * 2^-shift, correctly rounded to the nearest integer, ties away from zero: the rescale
// of a multiplier-scale model (docs/FIXED_POINT.md §1a). One 64-bit product, then rshift_round: no rounding
// before the shift, so the result is the exactly rounded value of the rational value·multiplier/2^shift.
//   multiplier in 1..2^31-1 (positive: the scale ratio it encodes is positive), held in int32.
//   The product value * multiplier is int64; the CALLER guarantees |value| * multiplier <= 2^62 (the overflow
//     proof bounds it for every rescale of a model: prove_no_overflow), which is rshift_round's input contract.
//   shift: as rshift_round (-62..62; the toolchain writes 0..62 for multiplier rescales, a negative one only
//     where the ratio is at least 2^30 and the proof bounds the left shift's result as well).
// multiplier == 1 is rshift_round(value, shift) itself: a power-of-two rescale is the special case.
QGRU_HD int64_t multiply_rshift_round(int64_t value, int32_t multiplier, int shift) {
  return rshift_round(value * static_cast<int64_t>(multiplier), shift);
}

// Clamp into [q_min, q_max] (requires q_min <= q_max). Exact for every int64 value.
QGRU_HD int32_t saturate(int64_t value, int32_t q_min, int32_t q_max) {
  if (value < q_min) return q_min;
  if (value > q_max) return q_max;
  return static_cast<int32_t>(value);
}

// Smallest code of a `bits`-bit tensor, bits in 2..32: signed -2^(bits-1), unsigned 0.
QGRU_HD int32_t code_min(int bits, bool is_unsigned) {
  return is_unsigned ? 0 : static_cast<int32_t>(-(int64_t{1} << (bits - 1)));
}

// Largest code of a `bits`-bit tensor, bits in 2..32: signed 2^(bits-1)-1, unsigned 2^bits-1.
// An unsigned 32-bit code range does not fit the int32 return type: code_max(32, true) is INT32_MAX
// (2^31-1), the widest range int32 holds. Tensor widths stop at 16 bits, so only internal accumulator
// views reach 32 bits, and those are signed.
QGRU_HD int32_t code_max(int bits, bool is_unsigned) {
  const int64_t q_max = is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1;
  return q_max > INT32_MAX ? INT32_MAX : static_cast<int32_t>(q_max);
}

// Move a code difference from space A into space B:
//   q_b = saturate(rshift_round(q_diff, shift_a_to_b) + zp_b, q_min_b, q_max_b)
// where q_diff = q_a - zp_a (a value in A's scale, S_A = 2^-shift_a) and shift_a_to_b = shift_a - shift_b,
// so that q_diff * S_A / S_B = q_diff * 2^-(shift_a_to_b). Rounding: half away from zero (rshift_round).
// Overflow: for shift_a_to_b >= 1 the shifted value is at most 2^62 + 1 in magnitude and adding an int32
// zero point stays inside int64; for shift_a_to_b <= 0 the caller guarantees
// |q_diff| * 2^-shift_a_to_b <= 2^62, which leaves the same room for the zero point. The sum is then
// saturated into B's code range.
QGRU_HD int32_t requantize(int64_t q_diff, int shift_a_to_b, int32_t zp_b, int32_t q_min_b, int32_t q_max_b) {
  return saturate(rshift_round(q_diff, shift_a_to_b) + zp_b, q_min_b, q_max_b);
}

}  // namespace qgru
