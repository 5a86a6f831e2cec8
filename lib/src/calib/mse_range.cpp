#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "qgru/base/error.h"
#include "qgru/calib/range_methods.h"

namespace qgru {

namespace {

// Prefix sums of count, count·c and count·c² over bins with centres c (index k: sums of bins [0, k)).
struct Moments {
  std::vector<double> n, s1, s2;
  explicit Moments(const std::vector<double>& counts, double lo, double width)
      : n(counts.size() + 1, 0.0), s1(counts.size() + 1, 0.0), s2(counts.size() + 1, 0.0) {
    for (size_t k = 0; k < counts.size(); ++k) {
      const double centre = lo + (static_cast<double>(k) + 0.5) * width;
      n[k + 1] = n[k] + counts[k];
      s1[k + 1] = s1[k] + counts[k] * centre;
      s2[k + 1] = s2[k] + counts[k] * centre * centre;
    }
  }
  // Σ count·(c - edge)² over bins [from, to).
  double squared_distance(size_t from, size_t to, double edge) const {
    const double count = n[to] - n[from];
    const double sum = s1[to] - s1[from];
    const double sum_sq = s2[to] - s2[from];
    return std::max(0.0, sum_sq - 2.0 * edge * sum + edge * edge * count);
  }
};

}  // namespace

MethodRange mse_range(const TensorStats& stats, const TensorQuant& spec) {
  MethodRange range;
  const double lo = std::min(stats.min, 0.0);
  const double hi = std::max(stats.max, 0.0);
  if (!(hi > lo)) {
    range.detail = "mse: all values are 0";
    return range;
  }
  std::ostringstream detail;
  // Exact zeros are on every grid: they add no error and are left out.
  if (spec.symmetric) {
    const double absmax = std::max(-lo, hi);
    const std::vector<double> counts = histogram_view(stats, 0.0, absmax, kKlBins, true, false);
    const double width = absmax / kKlBins;
    const Moments moments(counts, 0.0, width);
    const double steps = static_cast<double>(spec.qmax());
    double best = std::numeric_limits<double>::infinity();
    double best_threshold = absmax;
    for (size_t j = 1; j <= counts.size(); ++j) {
      const double threshold = static_cast<double>(j) * width;
      const double delta = threshold / steps;
      const double error = moments.n[j] * delta * delta / 12.0 + moments.squared_distance(j, counts.size(), threshold);
      if (error <= best) {
        best = error;
        best_threshold = threshold;
      }
    }
    range.min = std::max(stats.min, -best_threshold);
    range.max = std::min(stats.max, best_threshold);
    detail << "mse: T=" << best_threshold << " expected error " << best / moments.n.back() << " per value";
  } else {
    const std::vector<double> counts = histogram_view(stats, lo, hi, kKlBins, false, false);
    const double width = (hi - lo) / kKlBins;
    const Moments moments(counts, lo, width);
    const size_t bins = counts.size();
    const double steps = static_cast<double>(spec.qmax()) - spec.qmin();
    // Lower edges a_i = lo + i·width <= 0 (i in [0, zero_bin]), upper edges b_j = lo + j·width >= 0.
    const size_t zero_bin = std::min(bins, static_cast<size_t>(std::floor(-lo / width)));
    const size_t first_upper = std::min(bins, static_cast<size_t>(std::ceil(-lo / width)));
    double best = std::numeric_limits<double>::infinity();
    double best_lo = lo, best_hi = hi;
    for (size_t i = 0; i <= zero_bin; ++i) {
      const double a = std::min(0.0, lo + static_cast<double>(i) * width);
      const double below = moments.squared_distance(0, i, a);
      for (size_t j = std::max(first_upper, i + 1); j <= bins; ++j) {
        const double b = std::max(0.0, lo + static_cast<double>(j) * width);
        const double delta = (b - a) / steps;
        const double inside = moments.n[j] - moments.n[i];
        const double error = below + inside * delta * delta / 12.0 + moments.squared_distance(j, bins, b);
        if (error <= best) {
          best = error;
          best_lo = a;
          best_hi = b;
        }
      }
    }
    range.min = std::max(stats.min, best_lo);
    range.max = std::min(stats.max, best_hi);
    detail << "mse: [" << best_lo << ", " << best_hi << "] expected error " << best / moments.n.back() << " per value";
  }
  // The search works on bin centres, so for values all on one side of the chosen clip edge (a constant tensor
  // above the last edge: 0.5 with an edge at 0.49976) the clipped observed range is empty. Every value then
  // lands on that edge: the range is the edge itself, a valid range (quant_from_range adds 0 to it).
  if (range.min > range.max) range.min = range.max = stats.min > range.max ? range.max : range.min;
  range.detail = detail.str();
  return range;
}

GridFit grid_fit(const TensorStats& stats, const TensorQuant& grid, bool include_zeros) {
  const double step = grid.scale();
  const double low_edge = grid.dequantize(grid.qmin());
  const double high_edge = grid.dequantize(grid.qmax());
  // Values whose rounded code saturates: beyond the edge by more than half a step.
  const double low_clip = low_edge - 0.5 * step;
  const double high_clip = high_edge + 0.5 * step;
  const auto& fine = stats.histogram.bins();
  const double width = stats.histogram.bin_width();
  GridFit fit;
  double error = 0, square = 0;
  fit.total = include_zeros ? static_cast<double>(stats.zero_count) : 0.0;
  for (int k = 0; k < Pow2Histogram::kBins; ++k) {
    const double count = static_cast<double>(fine[static_cast<size_t>(k)]);
    if (count == 0) continue;
    fit.total += count;
    const double centre = stats.histogram.bin_lower(k) + 0.5 * width;
    square += count * centre * centre;
    if (centre > high_clip) {
      error += count * (centre - high_edge) * (centre - high_edge);
      fit.clipped_high += count;
    } else if (centre < low_clip) {
      error += count * (low_edge - centre) * (low_edge - centre);
      fit.clipped_low += count;
    } else {
      error += count * step * step / 12.0;
    }
  }
  if (fit.total > 0) {
    fit.mse = error / fit.total;
    fit.mean_square = square / fit.total;
  }
  return fit;
}

double grid_mse(const TensorStats& stats, const TensorQuant& grid, bool include_zeros) {
  return grid_fit(stats, grid, include_zeros).mse;
}

}  // namespace qgru
