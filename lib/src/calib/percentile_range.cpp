#include <algorithm>
#include <sstream>

#include "qgru/base/error.h"
#include "qgru/calib/range_methods.h"

namespace qgru {

namespace {

// Value below which `rank` of the values lie: bins in ascending order of value, linear inside a bin; exact
// zeros (when included) are a point mass at 0 placed before the bin starting at 0 (`zero_before`).
double quantile(const std::vector<double>& counts, double origin, double width, size_t zero_before, double zeros,
                double rank) {
  double cumulative = 0;
  for (size_t k = 0; k < counts.size(); ++k) {
    if (k == zero_before && zeros > 0) {
      if (cumulative + zeros >= rank) return 0.0;
      cumulative += zeros;
    }
    const double count = counts[k];
    if (count > 0 && cumulative + count >= rank) {
      return origin + (static_cast<double>(k) + (rank - cumulative) / count) * width;
    }
    cumulative += count;
  }
  return origin + static_cast<double>(counts.size()) * width;
}

}  // namespace

MethodRange percentile_range(const TensorStats& stats, const TensorQuant& spec, double percentile,
                             bool include_zeros) {
  if (!(percentile > 50 && percentile <= 100)) {  // below 50 the two-sided range would be inverted
    throw Error("percentile " + std::to_string(percentile) + " outside (50, 100]");
  }
  const auto& fine = stats.histogram.bins();
  const double width = stats.histogram.bin_width();
  const double zeros = include_zeros ? static_cast<double>(stats.zero_count) : 0.0;
  const double total = static_cast<double>(stats.histogram.total()) + zeros;
  MethodRange range;
  if (total <= 0) {
    range.detail = "percentile: no values";
    return range;
  }
  const double fraction = percentile / 100.0;
  std::ostringstream detail;
  detail << "percentile " << percentile << ": ";
  if (spec.symmetric) {
    std::vector<double> magnitude(Pow2Histogram::kBinsPerSide, 0.0);
    for (int k = 0; k < Pow2Histogram::kBins; ++k) {
      const int index = k - Pow2Histogram::kBinsPerSide;
      magnitude[static_cast<size_t>(index >= 0 ? index : -index - 1)] += static_cast<double>(fine[static_cast<size_t>(k)]);
    }
    const double threshold = quantile(magnitude, 0.0, width, 0, zeros, fraction * total);
    range.min = std::max(stats.min, -threshold);
    range.max = std::min(stats.max, threshold);
    detail << "|x| <= " << threshold;
  } else {
    std::vector<double> counts(fine.begin(), fine.end());
    const double origin = -static_cast<double>(Pow2Histogram::kBinsPerSide) * width;
    const size_t zero_before = Pow2Histogram::kBinsPerSide;
    range.min = std::clamp(quantile(counts, origin, width, zero_before, zeros, (1.0 - fraction) * total), stats.min, stats.max);
    range.max = std::clamp(quantile(counts, origin, width, zero_before, zeros, fraction * total), stats.min, stats.max);
    detail << "each tail at " << 100.0 - percentile << "%";
  }
  range.detail = detail.str();
  return range;
}

}  // namespace qgru
