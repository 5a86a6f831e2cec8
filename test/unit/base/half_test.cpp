#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>

#include "qgru/half.h"

// Reference for float -> half: pick, among all finite halves, the nearest one in double (ties to the even
// code); values at or beyond 65520 become infinity. Independent of the bit-level implementation.
static uint16_t reference_float_to_half(float value) {
  if (std::isnan(value)) return 0x7E00;
  const double target = value;
  if (std::fabs(target) >= 65520.0) return std::signbit(value) ? 0xFC00 : 0x7C00;
  uint16_t best = 0;
  double best_error = INFINITY;
  for (uint32_t code = 0; code < 0x7C00u; ++code) {
    const uint16_t signed_code = static_cast<uint16_t>(code | (std::signbit(value) ? 0x8000u : 0u));
    const double candidate = qgru::half_bits_to_float(signed_code);
    const double error = std::fabs(candidate - target);
    if (error < best_error || (error == best_error && (code & 1u) == 0)) {
      best_error = error;
      best = signed_code;
    }
  }
  return best;
}

TEST_CASE("half decode matches ldexp for every finite code") {
  for (uint32_t code = 0; code < 0x10000u; ++code) {
    const uint32_t exponent = (code >> 10) & 0x1F;
    if (exponent == 0x1F) continue;
    const uint32_t mantissa = code & 0x3FF;
    const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                           : std::ldexp(1024 + mantissa, static_cast<int>(exponent) - 25);
    const double expected = (code & 0x8000) ? -magnitude : magnitude;
    REQUIRE(qgru::half_bits_to_float(static_cast<uint16_t>(code)) == expected);
  }
}

TEST_CASE("half encode round-trips every finite half exactly") {
  for (uint32_t code = 0; code < 0x10000u; ++code) {
    if (((code >> 10) & 0x1F) == 0x1F) continue;
    REQUIRE(qgru::float_to_half_bits(qgru::half_bits_to_float(static_cast<uint16_t>(code))) == code);
  }
}

TEST_CASE("half encode rounds ties to even and midpoints correctly") {
  // Midpoints between consecutive halves (normal and subnormal), and a spread of arbitrary floats.
  const float samples[] = {1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 5.9604645e-8f / 2, 5.9604645e-8f * 1.5f,
                           65504.0f, 65519.99f, 65520.0f, 1e-10f, -3.14159f, 0.1f, 6.1035156e-5f,
                           6.0975552e-5f, 2049.0f, 2051.0f};
  for (float sample : samples) {
    CAPTURE(sample);
    CHECK(qgru::float_to_half_bits(sample) == reference_float_to_half(sample));
  }
}

TEST_CASE("bf16 encode rounds to nearest even") {
  CHECK(qgru::float_to_bf16_bits(1.0f) == 0x3F80);
  CHECK(qgru::float_to_bf16_bits(qgru::float_from_bits(0x3F808000u)) == 0x3F80);  // tie -> even
  CHECK(qgru::float_to_bf16_bits(qgru::float_from_bits(0x3F818000u)) == 0x3F82);  // tie -> even (up)
  CHECK(qgru::float_to_bf16_bits(qgru::float_from_bits(0x3F808001u)) == 0x3F81);
  CHECK(qgru::bf16_bits_to_float(0x3F81) == qgru::float_from_bits(0x3F810000u));
}
