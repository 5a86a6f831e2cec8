#include <algorithm>
#include <cmath>

#include "qgru/base/error.h"
#include "qgru/calib/range_methods.h"

namespace qgru {

namespace {

// Spread `mass` uniformly over [x0, x1) onto `out` (bins over [lo, hi]); parts outside go to the end bins.
void spread(double mass, double x0, double x1, double lo, double hi, std::vector<double>& out) {
  const int bins = static_cast<int>(out.size());
  if (!(hi > lo)) {
    out[0] += mass;
    return;
  }
  const double width = (hi - lo) / bins;
  const double span = x1 - x0;
  if (x1 <= lo) { out.front() += mass; return; }
  if (x0 >= hi) { out.back() += mass; return; }
  if (span <= 0) {  // a point mass
    out[static_cast<size_t>(std::clamp(static_cast<int>(std::floor((x0 - lo) / width)), 0, bins - 1))] += mass;
    return;
  }
  if (x0 < lo) {
    out.front() += mass * (lo - x0) / span;
    x0 = lo;
  }
  if (x1 > hi) {
    out.back() += mass * (x1 - hi) / span;
    x1 = hi;
  }
  int first = std::clamp(static_cast<int>(std::floor((x0 - lo) / width)), 0, bins - 1);
  for (int j = first; j < bins; ++j) {
    const double b0 = lo + j * width;
    const double b1 = (j == bins - 1) ? hi : lo + (j + 1) * width;
    const double overlap = std::min(x1, b1) - std::max(x0, b0);
    if (overlap > 0) out[static_cast<size_t>(j)] += mass * overlap / span;
    if (b1 >= x1) break;
  }
}

}  // namespace

std::vector<double> histogram_view(const TensorStats& stats, double lo, double hi, int bins, bool magnitude,
                                   bool include_zeros) {
  if (bins < 1) throw Error("internal: histogram view with " + std::to_string(bins) + " bins");
  std::vector<double> out(static_cast<size_t>(bins), 0.0);
  const Pow2Histogram& histogram = stats.histogram;
  const double width = histogram.bin_width();
  const auto& fine = histogram.bins();
  for (int k = 0; k < Pow2Histogram::kBins; ++k) {
    const uint64_t count = fine[static_cast<size_t>(k)];
    if (count == 0) continue;
    int64_t index = k - Pow2Histogram::kBinsPerSide;
    if (magnitude && index < 0) index = -index - 1;
    const double x0 = static_cast<double>(index) * width;
    spread(static_cast<double>(count), x0, x0 + width, lo, hi, out);
  }
  if (include_zeros && stats.zero_count > 0) {
    const double zeros = static_cast<double>(stats.zero_count);
    if (!(hi > lo)) {
      out[0] += zeros;
    } else {
      const int j = std::clamp(static_cast<int>(std::floor((0.0 - lo) / ((hi - lo) / bins))), 0, bins - 1);
      out[static_cast<size_t>(j)] += zeros;
    }
  }
  return out;
}

}  // namespace qgru
