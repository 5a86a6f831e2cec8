// Exact software fp16 (the host emulation of PTX add/sub/mul/fma.rn.f16) against an independent reference:
// the exact result computed in double (exact for these operand sets) and rounded by scaling and nearbyint.
#include <doctest/doctest.h>

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <ios>
#include <random>
#include <vector>

#include "qgru/kernels/soft_fp16.h"
#include "qgru/half.h"

namespace sf = qgru::softfp16;

namespace {

// Round an exact double to fp16, ties to even, by scaling to the target quantum and calling nearbyint
// (default rounding mode: to nearest even). Returns the fp16 bits. Independent of the 128-bit code path.
uint16_t reference_round(double exact, bool zero_negative) {
  if (exact == 0.0) return zero_negative ? 0x8000 : 0x0000;
  const double magnitude = std::fabs(exact);
  const uint16_t sign = exact < 0 ? 0x8000 : 0;
  if (magnitude >= 65520.0) return static_cast<uint16_t>(sign | 0x7C00);
  int exponent = std::ilogb(magnitude);
  if (exponent < -14) exponent = -14;
  const double quantum = std::ldexp(1.0, exponent - 10);
  const double rounded = std::nearbyint(magnitude / quantum) * quantum;  // exact scaling, one rounding
  // rounded is an fp16 value (or 65536 -> inf): convert exactly through float.
  return static_cast<uint16_t>(sign | qgru::float_to_half_bits(static_cast<float>(rounded)));
}

double value(uint16_t h) { return qgru::half_bits_to_float(h); }

std::vector<uint16_t> finite_codes() {
  std::vector<uint16_t> codes;
  for (uint32_t c = 0; c < 0x10000u; ++c) {
    if ((c & 0x7C00u) != 0x7C00u) codes.push_back(static_cast<uint16_t>(c));
  }
  return codes;
}

// Operands on edges: zeros, ones, the magic numbers of the fast dequantization, subnormal and normal
// extremes, values that sit near ties, plus seeded randoms.
std::vector<uint16_t> edge_operands() {
  std::vector<uint16_t> ops = {0x0000, 0x8000, 0x3C00, 0xBC00, 0x6400, 0x6480, 0xE400, 0x2C00, 0xD400, 0x5400,
                               0x0001, 0x8001, 0x03FF, 0x0400, 0x8400, 0x7BFF, 0xFBFF, 0x3555, 0x3BFF, 0x3C01,
                               0x1400, 0x6BFF, 0x4A00, 0x2E66, 0x0200, 0x1001};
  std::mt19937 rng(12345);
  for (int i = 0; i < 14; ++i) {
    uint16_t c;
    do c = static_cast<uint16_t>(static_cast<uint32_t>(rng())); while ((c & 0x7C00u) == 0x7C00u);
    ops.push_back(c);
  }
  return ops;
}

}  // namespace

TEST_CASE("soft fp16 add and sub round once to nearest even for every finite code against edge operands") {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  const auto codes = finite_codes();
  const auto ops = edge_operands();
  long mismatches = 0;
  for (uint16_t a : codes) {
    for (uint16_t b : ops) {
      // a ± b is exact in double: both are multiples of 2^-24 below 2^16 (40 significant bits at most).
      const bool both_negative_zero = a == 0x8000 && b == 0x8000;
      const uint16_t want_add = reference_round(value(a) + value(b), both_negative_zero);
      const uint16_t want_sub = reference_round(value(a) - value(b), a == 0x8000 && b == 0x0000);
      const uint16_t got_add = sf::add(a, b);
      const uint16_t got_sub = sf::sub(a, b);
      if (got_add != want_add || got_sub != want_sub) {
        if (++mismatches <= 5) {
          MESSAGE("a=0x" << std::hex << a << " b=0x" << b << " add got 0x" << got_add << " want 0x" << want_add
                         << " sub got 0x" << got_sub << " want 0x" << want_sub);
        }
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("soft fp16 mul rounds once for every finite code against edge operands, including underflow") {
  const auto codes = finite_codes();
  const auto ops = edge_operands();
  long mismatches = 0;
  for (uint16_t a : codes) {
    for (uint16_t b : ops) {
      const double exact = value(a) * value(b);  // 22 significant bits: exact in double
      const bool negative = ((a ^ b) & 0x8000u) != 0;
      const uint16_t want = reference_round(exact, negative);
      const uint16_t got = sf::mul(a, b);
      if (got != want && ++mismatches <= 5) {
        MESSAGE("a=0x" << std::hex << a << " b=0x" << b << " got 0x" << got << " want 0x" << want);
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("soft fp16 fma has a single rounding (no double rounding through the product)") {
  // a·b + c where the exact sum is representable in double (checked with TwoSum), random operands.
  std::mt19937 rng(777);
  long checked = 0, mismatches = 0;
  for (int i = 0; i < 400000; ++i) {
    uint16_t a, b, c;
    do a = static_cast<uint16_t>(static_cast<uint32_t>(rng())); while ((a & 0x7C00u) == 0x7C00u);
    do b = static_cast<uint16_t>(static_cast<uint32_t>(rng())); while ((b & 0x7C00u) == 0x7C00u);
    do c = static_cast<uint16_t>(static_cast<uint32_t>(rng())); while ((c & 0x7C00u) == 0x7C00u);
    const double p = value(a) * value(b);
    const double s = p + value(c);
    const double bb = s - p;
    const double err = (p - (s - bb)) + (value(c) - bb);
    if (err != 0.0) continue;  // exact sum not a double: skip
    ++checked;
    const bool zero_negative = ((a ^ b) & 0x8000u) && (c & 0x8000u);
    const uint16_t want = reference_round(s, zero_negative);
    const uint16_t got = sf::fma(a, b, c);
    if (got != want && ++mismatches <= 5) {
      MESSAGE("a=0x" << std::hex << a << " b=0x" << b << " c=0x" << c << " got 0x" << got << " want 0x" << want);
    }
  }
  CHECK(checked > 200000);
  CHECK(mismatches == 0);
}

TEST_CASE("soft fp16 fma keeps the low product bits that mul-then-add rounds away") {
  // (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20. Rounded first it is 1 + 2^-9, so subtracting 1 + 2^-9 gives 0;
  // fused, the exact difference 2^-20 (an fp16 subnormal) survives.
  const uint16_t one_plus_ulp = 0x3C01, minus_one_plus_two_ulp = 0xBC02;
  const uint16_t fused = sf::fma(one_plus_ulp, one_plus_ulp, minus_one_plus_two_ulp);
  const uint16_t unfused = sf::add(sf::mul(one_plus_ulp, one_plus_ulp), minus_one_plus_two_ulp);
  CHECK(value(fused) == std::ldexp(1.0, -20));
  CHECK(unfused == 0x0000);
}

TEST_CASE("soft fp16 special values follow IEEE 754") {
  CHECK(sf::is_nan(sf::sub(0x7C00, 0x7C00)));  // inf - inf
  CHECK(sf::is_nan(sf::mul(0x0000, 0x7C00)));  // 0 * inf
  CHECK(sf::add(0x7C00, 0x3C00) == 0x7C00);
  CHECK(sf::mul(0xFC00, 0x3C00) == 0xFC00);
  CHECK(sf::is_nan(sf::add(0x7E00, 0x3C00)));
  CHECK(sf::add(0x7BFF, 0x7BFF) == 0x7C00);      // overflow to inf
  CHECK(sf::add(0x7BFF, 0x4800) == 0x7BFF);      // 65504 + 8 = 65512: below the tie, stays
  CHECK(sf::add(0x7BFF, 0x4C00) == 0x7C00);      // 65504 + 16 = 65520: tie, to even = 2^16 = inf
  CHECK(sf::add(0x8000, 0x8000) == 0x8000);      // -0 + -0 = -0
  CHECK(sf::add(0x8000, 0x0000) == 0x0000);      // -0 + 0 = +0
  CHECK(sf::sub(0x3C00, 0x3C00) == 0x0000);      // x - x = +0
  CHECK(sf::mul(0x8000, 0x3C00) == 0x8000);      // -0 * 1 = -0
  CHECK(sf::mul(0x0001, 0x3800) == 0x0000);      // 2^-24 * 0.5: tie, to even (zero)
  CHECK(sf::mul(0x0003, 0x3800) == 0x0002);      // 1.5 * 2^-24: tie, to even (2)
}
