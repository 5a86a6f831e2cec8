#pragma once
// The statistics of one observed activation tensor (one layer, one direction): exact min/max, counts, the
// per-time-step EMA of the range (docs/CALIBRATION.md, "ema": min = 0.9·min_old + 0.1·min_cur, the first
// step initialises) and a mergeable power-of-two histogram (calib/histogram.h).
#include <cstdint>
#include <limits>
#include <string>

#include "qgru/calib/histogram.h"

namespace qgru {

constexpr double kEmaDecay = 0.9;  // weight of the old value

// EMA of the per-step range. Besides the running values it keeps the first step's range and the number of
// steps, which is what merging two runs in a given order needs (see merge_ema): the EMA is order-dependent.
struct EmaRange {
  uint64_t steps = 0;
  double min = 0, max = 0;              // running EMA (valid when steps > 0)
  double first_min = 0, first_max = 0;  // the range of the first step seen

  void update(double step_min, double step_max);
};

// The EMA of "a's steps followed by b's steps": continuing a's EMA through b's steps differs from b's own
// EMA only in b's first step (b initialised where the continuation decays), so
//   merged = 0.9^n_b · a + b − 0.9^n_b · b.first
// This equals one pass over the same steps in the same order up to floating-point rounding.
EmaRange merge_ema(const EmaRange& first, const EmaRange& second);

struct TensorStats {
  uint64_t count = 0;       // values observed (zeros included)
  uint64_t zero_count = 0;  // exact zeros (kept out of the histogram)
  double min = std::numeric_limits<double>::infinity();
  double max = -std::numeric_limits<double>::infinity();
  EmaRange ema;
  Pow2Histogram histogram;  // every non-zero value

  // Observe one time step's values (`size` floats, all finite: the caller checks). Updates the EMA once.
  void observe_step(const float* values, int64_t size);
  // Add `other` as if its values were observed after this one's (EMA: order-dependent, see merge_ema).
  void merge(const TensorStats& other);
};

// Bit-for-bit equality of the order-independent parts (counts, min/max, histogram). The EMA is not compared.
bool same_order_independent_stats(const TensorStats& a, const TensorStats& b);

}  // namespace qgru
