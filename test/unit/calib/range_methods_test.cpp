// Percentile and MSE ranges against closed forms on data whose density is known exactly (evenly spaced
// points realise a uniform density).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "qgru/calib/range_methods.h"

using qgru::TensorQuant;
using qgru::TensorStats;

namespace {

// `count` evenly spaced points in (lo, hi): midpoints of count equal cells.
void add_uniform(TensorStats& stats, double lo, double hi, int count) {
  std::vector<float> values;
  for (int i = 0; i < count; ++i) values.push_back(static_cast<float>(lo + (i + 0.5) * (hi - lo) / count));
  stats.observe_step(values.data(), static_cast<int64_t>(values.size()));
}

TensorQuant spec_of(int bits, bool is_unsigned, bool symmetric) {
  TensorQuant spec;
  spec.bits = bits;
  spec.is_unsigned = is_unsigned;
  spec.symmetric = symmetric;
  return spec;
}

// A piecewise-uniform density: segments [lo, hi) with probability mass `mass` each.
struct Segment {
  double lo, hi, mass;
};

// Expected squared error of a uniform grid of `steps` steps over [a, b]: Δ²/12 inside, (x - edge)² outside.
double expected_error(const std::vector<Segment>& density, double a, double b, double steps) {
  const double delta = (b - a) / steps;
  double error = 0;
  for (const Segment& s : density) {
    const double rho = s.mass / (s.hi - s.lo);
    const double in_lo = std::max(s.lo, a), in_hi = std::min(s.hi, b);
    if (in_hi > in_lo) error += rho * (in_hi - in_lo) * delta * delta / 12.0;
    if (s.hi > b) {  // ∫ (x - b)² over [max(lo, b), hi)
      const double from = std::max(s.lo, b);
      error += rho * (std::pow(s.hi - b, 3) - std::pow(from - b, 3)) / 3.0;
    }
    if (s.lo < a) {  // ∫ (a - x)² over [lo, min(hi, a))
      const double to = std::min(s.hi, a);
      error += rho * (std::pow(a - s.lo, 3) - std::pow(a - to, 3)) / 3.0;
    }
  }
  return error;
}

}  // namespace

TEST_CASE("percentile of uniform data: each tail at (100 - p)%, symmetric: the |x| percentile") {
  TensorStats stats;
  add_uniform(stats, -1.0, 1.0, 200000);
  const double tolerance = 2.0 / 200000 + std::ldexp(1.0, -16);  // one data spacing + one fine bin
  const auto asym = qgru::percentile_range(stats, spec_of(8, false, false), 99.0, true);
  CHECK(std::fabs(asym.min + 0.98) <= tolerance);
  CHECK(std::fabs(asym.max - 0.98) <= tolerance);
  const auto sym = qgru::percentile_range(stats, spec_of(8, false, true), 99.0, true);
  CHECK(std::fabs(sym.max - 0.99) <= tolerance);
  CHECK(std::fabs(sym.min + 0.99) <= tolerance);
}

TEST_CASE("percentile of a known mixture: 90% on [-1, 1], 10% on [2, 3]") {
  TensorStats stats;
  add_uniform(stats, -1.0, 1.0, 90000);
  add_uniform(stats, 2.0, 3.0, 10000);
  const auto range = qgru::percentile_range(stats, spec_of(8, false, false), 95.0, true);
  const double tolerance = 1e-4;
  CHECK(std::fabs(range.max - 2.5) <= tolerance);            // CDF 0.95: half way into [2, 3]
  CHECK(std::fabs(range.min - (-1.0 + 0.05 / 0.45)) <= tolerance);  // density 0.45 on [-1, 1]
}

TEST_CASE("percentile counts exact zeros as a point mass at 0 unless excluded") {
  TensorStats stats;
  add_uniform(stats, 0.5, 1.5, 1000);
  std::vector<float> zeros(9000, 0.0f);
  stats.observe_step(zeros.data(), 9000);
  const auto with_zeros = qgru::percentile_range(stats, spec_of(8, true, false), 95.0, true);
  CHECK(std::fabs(with_zeros.max - 1.0) <= 1e-3);  // rank 9500: half way through the 1000 non-zeros
  const auto without = qgru::percentile_range(stats, spec_of(8, true, false), 95.0, false);
  CHECK(std::fabs(without.max - 1.45) <= 1e-3);
}

TEST_CASE("mse of uniform data matches the closed-form optimum within a bin") {
  TensorStats stats;
  add_uniform(stats, -1.0, 1.0, 200000);
  const std::vector<Segment> density = {{-1.0, 1.0, 1.0}};
  // Symmetric 8-bit: Δ = T / 127.
  double best_t = 1.0, best = std::numeric_limits<double>::infinity();
  for (double t = 0.9; t <= 1.0; t += 1e-6) {
    const double e = expected_error(density, -t, t, 2 * 127.0);
    if (e < best) best = e, best_t = t;
  }
  const auto range = qgru::mse_range(stats, spec_of(8, false, true));
  const double bin = 1.0 / qgru::kKlBins;
  CHECK(best_t < 0.999);  // the optimum clips a little: the test can tell clipping from no clipping
  CHECK(std::fabs(range.max - best_t) <= bin);
  CHECK(std::fabs(range.min + best_t) <= bin);
}

TEST_CASE("mse of a known mixture (asymmetric) matches a brute-force search of the closed form") {
  TensorStats stats;
  add_uniform(stats, -1.0, 1.0, 180000);
  add_uniform(stats, 2.0, 3.0, 20000);
  const std::vector<Segment> density = {{-1.0, 1.0, 0.9}, {2.0, 3.0, 0.1}};
  double best_a = -1, best_b = 3, best = std::numeric_limits<double>::infinity();
  const double steps = 255.0;  // 8-bit asymmetric
  for (double a = -1.0; a <= 0.0; a += 1.0 / 512) {
    for (double b = 0.5; b <= 3.0; b += 1.0 / 512) {
      const double e = expected_error(density, a, b, steps);
      if (e < best) best = e, best_a = a, best_b = b;
    }
  }
  const auto range = qgru::mse_range(stats, spec_of(8, false, false));
  const double bin = 4.0 / qgru::kKlBins;  // view bins over [-1, 3]
  MESSAGE("closed form [" << best_a << ", " << best_b << "], method " << range.detail);
  CHECK(std::fabs(range.max - best_b) <= bin + 1.0 / 512);
  CHECK(std::fabs(range.min - best_a) <= bin + 1.0 / 512);
}

TEST_CASE("grid_mse: Δ²/12 inside, squared distance to the edge when clipped") {
  TensorStats stats;
  add_uniform(stats, -0.5, 0.5, 100000);
  TensorQuant grid = spec_of(8, false, true);
  grid.shift = 7;  // covers [-1, 127/128]
  CHECK(qgru::grid_mse(stats, grid, true) == doctest::Approx(std::ldexp(1.0, -14) / 12.0).epsilon(1e-9));
  grid.shift = 10;  // edge 127/1024 ≈ 0.124: most of the data clips
  const double edge = 127.0 / 1024;
  const double clipped = 2 * (std::pow(0.5 - edge, 3) / 3.0);  // density 1, both tails
  const double inside = 2 * edge * std::ldexp(1.0, -20) / 12.0;
  CHECK(qgru::grid_mse(stats, grid, true) == doctest::Approx(clipped + inside).epsilon(1e-3));
}
