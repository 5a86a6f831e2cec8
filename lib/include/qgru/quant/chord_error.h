#pragma once
// The chord error of a stretch of an activation's target curve (qgru/quant/activation_generation.h designs the
// segments with it): its value, and the bounded question the segment search asks, answered sooner. Header-only so
// that the test holds the two to the same answer.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace qgru {

// Minimax error of the chord's line over target[first..last]. On a convex or concave stretch the best
// line has the chord's slope (it equioscillates at both ends and at the point farthest from the
// chord), so this IS the minimax error there: half the largest chord-to-curve distance.
inline double chord_error(const std::vector<double>& target, int64_t first, int64_t last) {
  if (last <= first) return 0.0;
  const double y0 = target[static_cast<size_t>(first)];
  const double slope = (target[static_cast<size_t>(last)] - y0) / static_cast<double>(last - first);
  double lowest = 0.0;
  double highest = 0.0;
  for (int64_t i = first + 1; i < last; ++i) {
    const double residual = target[static_cast<size_t>(i)] - (y0 + slope * static_cast<double>(i - first));
    lowest = std::min(lowest, residual);
    highest = std::max(highest, residual);
  }
  return 0.5 * (highest - lowest);
}

// chord_error(target, first, last) <= error_bound, the same answer for every input, sooner when it is false: the
// residuals are those chord_error computes, in the same order, and its running extremes only widen (highest never
// falls, lowest never rises, and a correctly rounded subtraction is monotone), so once 0.5 * (highest - lowest)
// exceeds the bound on a prefix it exceeds it on the whole segment. Checked every 64 codes to keep the loop tight.
inline bool chord_error_within(const std::vector<double>& target, int64_t first, int64_t last, double error_bound) {
  if (last <= first) return 0.0 <= error_bound;
  const double y0 = target[static_cast<size_t>(first)];
  const double slope = (target[static_cast<size_t>(last)] - y0) / static_cast<double>(last - first);
  double lowest = 0.0;
  double highest = 0.0;
  for (int64_t block = first + 1; block < last; block += 64) {
    const int64_t block_end = std::min(block + 64, last);
    for (int64_t i = block; i < block_end; ++i) {
      const double residual = target[static_cast<size_t>(i)] - (y0 + slope * static_cast<double>(i - first));
      lowest = std::min(lowest, residual);
      highest = std::max(highest, residual);
    }
    if (0.5 * (highest - lowest) > error_bound) return false;
  }
  return 0.5 * (highest - lowest) <= error_bound;
}

}  // namespace qgru
