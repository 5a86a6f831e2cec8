#include "qgru/calib/tensor_stats.h"

#include <algorithm>
#include <cmath>

namespace qgru {

void EmaRange::update(double step_min, double step_max) {
  if (steps == 0) {
    min = first_min = step_min;
    max = first_max = step_max;
  } else {
    min = kEmaDecay * min + (1.0 - kEmaDecay) * step_min;
    max = kEmaDecay * max + (1.0 - kEmaDecay) * step_max;
  }
  ++steps;
}

EmaRange merge_ema(const EmaRange& first, const EmaRange& second) {
  if (first.steps == 0) return second;
  if (second.steps == 0) return first;
  const double decay = std::pow(kEmaDecay, static_cast<double>(second.steps));
  EmaRange merged;
  merged.steps = first.steps + second.steps;
  merged.first_min = first.first_min;
  merged.first_max = first.first_max;
  merged.min = decay * first.min + second.min - decay * second.first_min;
  merged.max = decay * first.max + second.max - decay * second.first_max;
  return merged;
}

void TensorStats::observe_step(const float* values, int64_t size) {
  if (size <= 0) return;
  double step_min = values[0];
  double step_max = values[0];
  uint64_t zeros = 0;
  for (int64_t i = 0; i < size; ++i) {
    const double value = values[i];
    step_min = std::min(step_min, value);
    step_max = std::max(step_max, value);
    if (value == 0.0) {
      ++zeros;
    } else {
      histogram.add(value);
    }
  }
  count += static_cast<uint64_t>(size);
  zero_count += zeros;
  min = std::min(min, step_min);
  max = std::max(max, step_max);
  ema.update(step_min, step_max);
}

void TensorStats::merge(const TensorStats& other) {
  count += other.count;
  zero_count += other.zero_count;
  min = std::min(min, other.min);
  max = std::max(max, other.max);
  ema = merge_ema(ema, other.ema);
  histogram.merge(other.histogram);
}

bool same_order_independent_stats(const TensorStats& a, const TensorStats& b) {
  return a.count == b.count && a.zero_count == b.zero_count && a.min == b.min && a.max == b.max &&
         a.ema.steps == b.ema.steps && a.histogram == b.histogram;
}

}  // namespace qgru
