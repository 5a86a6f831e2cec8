// The integer primitives of qgru/fixed/rounding.h against independent references: integer division
// with an explicit tie rule, 128-bit products, long double, and the TensorQuant code ranges.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "qgru/fixed/rounding.h"
#include "qgru/base/tensor_quant.h"

namespace {

// A 128-bit integer for exact references (__extension__ keeps -Wpedantic quiet about the GCC/Clang type).
__extension__ typedef __int128 Int128;

// value / 2^shift rounded half away from zero, written with truncating division and the remainder:
// round up in magnitude when twice the dropped remainder reaches the divisor. 128-bit so that no
// intermediate can overflow for any int64 value and shift 1..62.
int64_t reference_rshift(int64_t value, int shift) {
  const Int128 divisor = static_cast<Int128>(1) << shift;
  const Int128 numerator = value;
  Int128 quotient = numerator / divisor;  // truncates toward zero
  const Int128 remainder = numerator % divisor;
  const Int128 twice_remainder = remainder < 0 ? -2 * remainder : 2 * remainder;
  if (twice_remainder >= divisor) quotient += numerator < 0 ? -1 : 1;
  return static_cast<int64_t>(quotient);
}

}  // namespace

TEST_CASE("rshift_round matches exact division for every int16 value and every shift -8..20") {
  for (int shift = -8; shift <= 20; ++shift) {
    for (int32_t value = std::numeric_limits<int16_t>::min(); value <= std::numeric_limits<int16_t>::max(); ++value) {
      int64_t expected;
      if (shift > 0) {
        expected = reference_rshift(value, shift);
      } else {
        // long double holds value * 2^8 exactly.
        expected = static_cast<int64_t>(std::ldexp(static_cast<long double>(value), -shift));
      }
      const int64_t got = qgru::rshift_round(value, shift);
      if (got != expected) {
        CAPTURE(value);
        CAPTURE(shift);
        CHECK(got == expected);
        return;
      }
    }
  }
}

TEST_CASE("rshift_round ties go away from zero, never to even or toward +infinity") {
  // shift 1: exact halves.
  CHECK(qgru::rshift_round(1, 1) == 1);    // 0.5 -> 1
  CHECK(qgru::rshift_round(-1, 1) == -1);  // -0.5 -> -1
  CHECK(qgru::rshift_round(3, 1) == 2);    // 1.5 -> 2
  CHECK(qgru::rshift_round(-3, 1) == -2);  // -1.5 -> -2
  CHECK(qgru::rshift_round(5, 1) == 3);    // 2.5 -> 3 (round-half-even would give 2)
  CHECK(qgru::rshift_round(-5, 1) == -3);  // -2.5 -> -3 (round-half-up would give -2)
  // shift 3: halves and their neighbours one unit of 2^-3 away.
  CHECK(qgru::rshift_round(4, 3) == 1);     // 0.5
  CHECK(qgru::rshift_round(3, 3) == 0);     // 0.375
  CHECK(qgru::rshift_round(-4, 3) == -1);   // -0.5
  CHECK(qgru::rshift_round(-3, 3) == 0);    // -0.375
  CHECK(qgru::rshift_round(12, 3) == 2);    // 1.5
  CHECK(qgru::rshift_round(-12, 3) == -2);  // -1.5
  CHECK(qgru::rshift_round(20, 3) == 3);    // 2.5
  CHECK(qgru::rshift_round(-20, 3) == -3);  // -2.5
  CHECK(qgru::rshift_round(-21, 3) == -3);  // -2.625
  CHECK(qgru::rshift_round(-19, 3) == -2);  // -2.375
  // The same ties as TensorQuant::quantize (std::round) makes them.
  qgru::TensorQuant quant;
  quant.bits = 16;
  quant.shift = 0;
  for (double tie : {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5}) {
    CHECK(quant.quantize(tie) == qgru::rshift_round(static_cast<int64_t>(tie * 2), 1));
  }
}

TEST_CASE("rshift_round is exact at the ends of int64 for every shift 1..62") {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::mt19937_64 rng(20261121);
  for (int shift = 1; shift <= 62; ++shift) {
    const int64_t half = int64_t{1} << (shift - 1);
    for (int64_t value : {kMin, kMin + 1, kMax, kMax - 1, half, -half, half - 1, -(half - 1), 3 * half, -3 * half,
                          int64_t{0}, int64_t{1}, int64_t{-1}}) {
      CAPTURE(value);
      CAPTURE(shift);
      CHECK(qgru::rshift_round(value, shift) == reference_rshift(value, shift));
    }
    for (int trial = 0; trial < 200; ++trial) {
      const int64_t value = static_cast<int64_t>(rng());
      CAPTURE(value);
      CAPTURE(shift);
      REQUIRE(qgru::rshift_round(value, shift) == reference_rshift(value, shift));
    }
  }
}

TEST_CASE("rshift_round with a negative shift multiplies, keeping the sign") {
  for (int shift = -62; shift <= -1; ++shift) {
    const Int128 factor = static_cast<Int128>(1) << -shift;
    for (int64_t value : {int64_t{1}, int64_t{-1}, int64_t{0}}) {
      CHECK(static_cast<Int128>(qgru::rshift_round(value, shift)) == value * factor);
    }
  }
  CHECK(qgru::rshift_round(-3, -4) == -48);
  CHECK(qgru::rshift_round((int64_t{1} << 31) - 1, -31) == ((int64_t{1} << 31) - 1) * (int64_t{1} << 31));
}

TEST_CASE("code_min and code_max give the b-bit ranges for widths 2..32") {
  for (int bits = 2; bits <= 32; ++bits) {
    CAPTURE(bits);
    const long double signed_half = std::ldexp(1.0L, bits - 1);
    CHECK(static_cast<long double>(qgru::code_min(bits, false)) == -signed_half);
    CHECK(static_cast<long double>(qgru::code_max(bits, false)) == signed_half - 1);
    CHECK(qgru::code_min(bits, true) == 0);
    if (bits < 32) {
      CHECK(static_cast<long double>(qgru::code_max(bits, true)) == std::ldexp(1.0L, bits) - 1);
    } else {
      CHECK(qgru::code_max(bits, true) == std::numeric_limits<int32_t>::max());  // documented int32 limit
    }
    if (bits <= 16) {
      qgru::TensorQuant quant;
      quant.bits = bits;
      for (bool is_unsigned : {false, true}) {
        quant.is_unsigned = is_unsigned;
        CHECK(qgru::code_min(bits, is_unsigned) == quant.qmin());
        CHECK(qgru::code_max(bits, is_unsigned) == quant.qmax());
      }
    }
  }
  CHECK(qgru::code_min(8, false) == std::numeric_limits<int8_t>::min());
  CHECK(qgru::code_max(8, false) == std::numeric_limits<int8_t>::max());
  CHECK(qgru::code_max(8, true) == std::numeric_limits<uint8_t>::max());
  CHECK(qgru::code_min(16, false) == std::numeric_limits<int16_t>::min());
  CHECK(qgru::code_max(16, true) == std::numeric_limits<uint16_t>::max());
  CHECK(qgru::code_min(32, false) == std::numeric_limits<int32_t>::min());
  CHECK(qgru::code_max(32, false) == std::numeric_limits<int32_t>::max());
}

TEST_CASE("saturate clamps at both ends of every width 2..32, signed and unsigned") {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int bits = 2; bits <= 32; ++bits) {
    for (bool is_unsigned : {false, true}) {
      CAPTURE(bits);
      CAPTURE(is_unsigned);
      const int32_t q_min = qgru::code_min(bits, is_unsigned);
      const int32_t q_max = qgru::code_max(bits, is_unsigned);
      CHECK(qgru::saturate(int64_t{q_min} - 1, q_min, q_max) == q_min);
      CHECK(qgru::saturate(kMin, q_min, q_max) == q_min);
      CHECK(qgru::saturate(int64_t{q_max} + 1, q_min, q_max) == q_max);
      CHECK(qgru::saturate(kMax, q_min, q_max) == q_max);
      CHECK(qgru::saturate(q_min, q_min, q_max) == q_min);
      CHECK(qgru::saturate(q_max, q_min, q_max) == q_max);
      CHECK(qgru::saturate(int64_t{q_min} + 1, q_min, q_max) == q_min + 1);
      CHECK(qgru::saturate(int64_t{q_max} - 1, q_min, q_max) == q_max - 1);
      // Large values that would wrap into range if truncated to 32 bits first.
      CHECK(qgru::saturate((int64_t{1} << 32) + 1, q_min, q_max) == q_max);
      CHECK(qgru::saturate(-(int64_t{1} << 32), q_min, q_max) == q_min);
    }
  }
}

TEST_CASE("requantize equals round, add zero point, clamp, for every int16 difference") {
  struct Target {
    int bits;
    bool is_unsigned;
    int32_t zp;
  };
  const Target targets[] = {{8, false, 0}, {8, false, -17}, {8, true, 128}, {8, true, 3}, {4, false, 2}, {16, false, -900}};
  for (const Target& target : targets) {
    const int32_t q_min = qgru::code_min(target.bits, target.is_unsigned);
    const int32_t q_max = qgru::code_max(target.bits, target.is_unsigned);
    for (int shift = -4; shift <= 12; ++shift) {
      for (int32_t q_diff = std::numeric_limits<int16_t>::min(); q_diff <= std::numeric_limits<int16_t>::max();
           ++q_diff) {
        // long double holds q_diff * 2^-shift exactly; round half away from zero by hand.
        const long double scaled = std::ldexp(static_cast<long double>(q_diff), -shift);
        const long double rounded = scaled < 0 ? -std::floor(-scaled + 0.5L) : std::floor(scaled + 0.5L);
        const long double shifted = rounded + target.zp;
        const int32_t expected = static_cast<int32_t>(
            shifted < q_min ? q_min : shifted > q_max ? q_max : shifted);
        const int32_t got = qgru::requantize(q_diff, shift, target.zp, q_min, q_max);
        if (got != expected) {
          CAPTURE(q_diff);
          CAPTURE(shift);
          CAPTURE(target.bits);
          CAPTURE(target.zp);
          CHECK(got == expected);
          return;
        }
      }
    }
  }
}
