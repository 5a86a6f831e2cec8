// The reference quantizer's edge cases: zero ranges, one-signed rows, symmetric zero points, ties to even.
#include <doctest/doctest.h>

#include "qgru/base/error.h"
#include "qgru/gptq/quantizer.h"

using qgru::gptq::find_params;
using qgru::gptq::quantize_code;

TEST_CASE("quantizer_all_zero_row_gets_range_minus_one_to_one") {
  const double W[4] = {0, 0, 0, 0};
  const auto p = find_params(W, 1, 4, 0, 4, 4, false);
  CHECK(p.scale[0] == doctest::Approx(2.0 / 15));
  CHECK(p.zero[0] == 8);  // round(1 / (2/15)) = round(7.5) = 8 (ties to even)
}

TEST_CASE("quantizer_positive_row_keeps_zero_in_range") {
  const double W[4] = {0.5, 1.0, 1.5, 3.0};  // xmin = min(0, 0.5) = 0
  const auto p = find_params(W, 1, 4, 0, 4, 4, false);
  CHECK(p.scale[0] == doctest::Approx(0.2));
  CHECK(p.zero[0] == 0);
  CHECK(quantize_code(3.0, p.scale[0], p.zero[0], 15) == 15);
  const double N[2] = {-3.0, -1.5};  // xmax = 0
  const auto q = find_params(N, 1, 2, 0, 2, 4, false);
  CHECK(q.zero[0] == 15);
}

TEST_CASE("quantizer_symmetric_zero_is_half_range") {
  const double W[3] = {-0.2, 0.1, 0.7};
  for (int bits : {2, 3, 4, 8}) {
    const auto p = find_params(W, 1, 3, 0, 3, bits, true);
    const double maxq = static_cast<double>(qgru::gptq::max_code(bits));
    CHECK(p.zero[0] == (maxq + 1) / 2);
    CHECK(p.scale[0] == doctest::Approx(1.4 / maxq));
  }
}

TEST_CASE("quantizer_rounds_ties_to_even_and_clamps") {
  CHECK(quantize_code(2.5, 1.0, 0.0, 15) == 2);
  CHECK(quantize_code(3.5, 1.0, 0.0, 15) == 4);
  CHECK(quantize_code(-0.5, 1.0, 3.0, 15) == 3);
  CHECK(quantize_code(100.0, 1.0, 3.0, 15) == 15);
  CHECK(quantize_code(-100.0, 1.0, 3.0, 15) == 0);
}

TEST_CASE("quantizer_group_range_clipped_to_the_row") {
  const double W[6] = {1, 2, 3, -4, 5, 6};
  const auto p = find_params(W, 1, 6, 4, 12, 4, false);  // columns 4..5 only
  CHECK(p.scale[0] == doctest::Approx(6.0 / 15));
  CHECK(p.zero[0] == 0);
}

TEST_CASE("quantizer_refuses_unsupported_bits") {
  CHECK_THROWS_AS(qgru::gptq::check_bits(5), qgru::Error);
  CHECK_NOTHROW(qgru::gptq::check_bits(3));
}
