#pragma once
// The range methods on one tensor's statistics, as plain functions (select_range in range_selection.h
// dispatches to them). Every histogram-based method works on views of the tensor's Pow2Histogram:
// the fine bins are re-binned onto the method's bins by overlap (values assumed uniform inside a fine bin;
// a 2048-bin view over [0, max|x|] spans at least 16 fine bins per view bin).
#include <string>
#include <vector>

#include "qgru/calib/tensor_stats.h"
#include "qgru/base/tensor_quant.h"

namespace qgru {

constexpr int kKlBins = 2048;  // TensorRT's B

// Counts of the tensor's values on `bins` equal bins over [lo, hi] (mass outside goes to the end bins).
// magnitude = true: the histogram of |x|. Exact zeros are added to the bin holding 0 when include_zeros.
std::vector<double> histogram_view(const TensorStats& stats, double lo, double hi, int bins, bool magnitude,
                                   bool include_zeros);

// KL(P‖Q) (natural log) of clipping the |x| histogram `abs_bins` at clip_bins (P = bins[0..i-1], the count of
// all bins >= i added to P[i-1]) and quantizing bins[0..i-1] into `levels` levels (bin k to level
// floor(k·levels/i), each level's sum spread evenly over its bins where P is non-zero). +inf when some
// p > 0 meets q = 0.
double kl_divergence_for_clip(const std::vector<double>& abs_bins, int clip_bins, int levels);

struct KlSearch {
  int clip_bins = 0;     // i*
  double divergence = 0;
};
// TensorRT's search: i = levels .. B inclusive, the smallest KL wins, ties to the larger i.
// levels >= B: no candidate clips, i* = B.
KlSearch kl_search(const std::vector<double>& abs_bins, int levels);

// The levels the KL search uses for a tensor: 2^bits for unsigned specs or non-negative data, else 2^(bits-1).
int kl_levels(const TensorStats& stats, const TensorQuant& spec);

struct MethodRange {
  double min = 0, max = 0;
  std::string detail;
};

// A = max|x|; T = (i* + 0.5)·A/B; range [max(min, -T), min(max, T)].
MethodRange kl_range(const TensorStats& stats, const TensorQuant& spec, bool include_zeros);
// Asymmetric specs: each tail at (100 - percentile)%; symmetric: the |x| percentile T, range [-T, T] ∩ data.
MethodRange percentile_range(const TensorStats& stats, const TensorQuant& spec, double percentile,
                             bool include_zeros);
// The range minimising the expected squared error under the histogram: Δ²/12 for values inside, the squared
// distance to the edge for clipped values, Δ = width / (codes - 1) for the spec's bits (symmetric: T / qmax).
// Searched over kKlBins edges per side (asymmetric: every pair of a lower edge <= 0 and an upper edge >= 0).
MethodRange mse_range(const TensorStats& stats, const TensorQuant& spec);

// How a concrete power-of-two grid fits the histogram. Each fine bin is taken at its centre c; a value
// saturates when its rounded code lies beyond the edge code, i.e. c > dequantize(qmax) + Δ/2 (high) or
// c < dequantize(qmin) − Δ/2 (low), Δ = grid.scale(). Exact zeros count when include_zeros (they are on every
// grid: no error, never clipped).
struct GridFit {
  double total = 0;         // values counted (the histogram's, plus exact zeros when included)
  double clipped_low = 0;   // values saturating at the lowest code (a count)
  double clipped_high = 0;  // values saturating at the highest code (a count)
  double mse = 0;           // per value: Δ²/12 inside, the squared distance to the edge code when clipped
  double mean_square = 0;   // per value: E[c²], the signal power (SQNR = mean_square / mse)
  double clipped_fraction() const { return total > 0 ? (clipped_low + clipped_high) / total : 0.0; }
};
GridFit grid_fit(const TensorStats& stats, const TensorQuant& grid, bool include_zeros);

// grid_fit(...).mse: the expected squared quantization error per value under the histogram.
double grid_mse(const TensorStats& stats, const TensorQuant& grid, bool include_zeros);

}  // namespace qgru
