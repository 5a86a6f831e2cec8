// grid_fit (the score of a concrete power-of-two grid on a histogram) against a direct float64 computation on
// the raw values: the same definition (Δ²/12 inside, the squared distance to the edge code for values whose
// rounded code saturates) evaluated value by value, and the true rounding error of quantizing every value.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "qgru/calib/range_methods.h"

using qgru::GridFit;
using qgru::TensorQuant;
using qgru::TensorStats;

namespace {

// A skewed mixture with a heavy right tail and exact zeros: clipping happens on one side more than the other.
std::vector<float> mixture(unsigned seed, int count) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> core(-0.3, 0.8);
  std::exponential_distribution<double> tail(0.6);
  std::uniform_real_distribution<double> pick(0.0, 1.0);
  std::vector<float> values;
  for (int i = 0; i < count; ++i) {
    const double u = pick(rng);
    values.push_back(static_cast<float>(u < 0.1 ? 0.0 : u < 0.85 ? core(rng) : 0.5 + tail(rng)));
  }
  return values;
}

TensorQuant grid_of(int bits, bool is_unsigned, bool symmetric, int shift, int32_t zp) {
  TensorQuant q;
  q.bits = bits;
  q.is_unsigned = is_unsigned;
  q.symmetric = symmetric;
  q.shift = shift;
  q.zp = zp;
  return q;
}

struct Direct {
  double total = 0, low = 0, high = 0, mse = 0, mean_square = 0, rounding_mse = 0;
};

// The definition, value by value, in float64; plus the error of actually quantizing each value.
Direct direct_fit(const std::vector<float>& values, const TensorQuant& grid, bool include_zeros) {
  Direct d;
  const double step = std::ldexp(1.0, -grid.shift);
  const double low_edge = grid.dequantize(grid.qmin()), high_edge = grid.dequantize(grid.qmax());
  double error = 0, square = 0, rounding = 0;
  for (float f : values) {
    const double v = f;
    if (v == 0.0 && !include_zeros) continue;
    d.total += 1;
    square += v * v;
    const double diff = grid.dequantize(grid.quantize(v)) - v;
    rounding += diff * diff;
    if (v == 0.0) continue;  // 0 is on every grid
    // The code before saturation, rounded half away from zero.
    const double code = std::round(v * std::ldexp(1.0, grid.shift)) + grid.zp;
    if (code > grid.qmax()) {
      d.high += 1;
      error += (v - high_edge) * (v - high_edge);
    } else if (code < grid.qmin()) {
      d.low += 1;
      error += (low_edge - v) * (low_edge - v);
    } else {
      error += step * step / 12.0;
    }
  }
  d.mse = error / d.total;
  d.mean_square = square / d.total;
  d.rounding_mse = rounding / d.total;
  return d;
}

}  // namespace

TEST_CASE("grid_fit: clipped counts exact, error and signal power equal the value-by-value definition") {
  const std::vector<float> values = mixture(7, 200000);
  TensorStats stats;
  stats.observe_step(values.data(), static_cast<int64_t>(values.size()));
  REQUIRE(stats.zero_count > 10000);
  struct Case {
    TensorQuant grid;
    std::string what;
  };
  // Around the data's range [~-3.8, ~20]: a covering grid, grids that clip one or both tails, and the
  // unsigned and symmetric flavours (zp placed as quant_from_range places it for the data's minimum).
  const Case cases[] = {
      {grid_of(8, false, false, 4, -128 + 62), "i8 asym, clips the far right tail"},
      {grid_of(8, false, false, 5, -128 + 122), "i8 asym, clips the right tail"},
      {grid_of(8, false, false, 6, 0), "i8 asym, clips both tails"},
      {grid_of(8, false, true, 4, 0), "i8 sym, clips the right tail"},
      {grid_of(4, false, true, 1, 0), "i4 sym, coarse and clipping"},
      {grid_of(8, true, false, 6, 100), "u8 asym, clips both tails"},
  };
  for (const Case& c : cases) {
    for (bool include_zeros : {true, false}) {
      CAPTURE(c.what);
      CAPTURE(include_zeros);
      const GridFit fit = qgru::grid_fit(stats, c.grid, include_zeros);
      const Direct d = direct_fit(values, c.grid, include_zeros);
      REQUIRE(d.low + d.high > 0);  // every case clips something
      CHECK(fit.total == d.total);
      // The clip points (edge ± Δ/2) are fine-bin edges here, so bin centres decide exactly as values do.
      CHECK(fit.clipped_low == d.low);
      CHECK(fit.clipped_high == d.high);
      CHECK(fit.clipped_fraction() == doctest::Approx((d.low + d.high) / d.total).epsilon(1e-12));
      // Bin centres stand in for values (bins 2^-12 wide here): relative differences far below 1e-3.
      CHECK(fit.mse == doctest::Approx(d.mse).epsilon(1e-3));
      CHECK(fit.mean_square == doctest::Approx(d.mean_square).epsilon(1e-3));
      CHECK(qgru::grid_mse(stats, c.grid, include_zeros) == fit.mse);
    }
  }
}

TEST_CASE("grid_fit's error is what quantizing the values costs when the grid is fine against the density") {
  // Δ²/12 is the rounding error of a density that is smooth on the scale of Δ; the clipped part is exact.
  const std::vector<float> values = mixture(11, 200000);
  TensorStats stats;
  stats.observe_step(values.data(), static_cast<int64_t>(values.size()));
  for (const TensorQuant& grid : {grid_of(8, false, false, 3, -128 + 31), grid_of(8, false, false, 5, -128 + 122),
                                  grid_of(10, false, true, 6, 0)}) {
    CAPTURE(grid.shift);
    const Direct d = direct_fit(values, grid, true);
    CHECK(qgru::grid_fit(stats, grid, true).mse == doctest::Approx(d.rounding_mse).epsilon(0.03));
  }
}

TEST_CASE("grid_fit of nothing, or of zeros only, is all zero") {
  TensorStats empty;
  const GridFit none = qgru::grid_fit(empty, grid_of(8, false, false, 4, 0), true);
  CHECK(none.total == 0);
  CHECK(none.mse == 0);
  CHECK(none.clipped_fraction() == 0);
  TensorStats zeros;
  const std::vector<float> values(50, 0.0f);
  zeros.observe_step(values.data(), 50);
  const GridFit fit = qgru::grid_fit(zeros, grid_of(8, false, false, 4, 0), true);
  CHECK(fit.total == 50);
  CHECK(fit.mse == 0);
  CHECK(fit.mean_square == 0);
  CHECK(qgru::grid_fit(zeros, grid_of(8, false, false, 4, 0), false).total == 0);
}
