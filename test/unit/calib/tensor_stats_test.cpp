#include <doctest/doctest.h>

#include <vector>

#include "qgru/calib/tensor_stats.h"

using qgru::TensorStats;

TEST_CASE("ema follows its documented rule per step: first step initialises, then 0.9 old + 0.1 current") {
  TensorStats stats;
  const std::vector<float> step1 = {-1.0f, 2.0f};
  const std::vector<float> step2 = {-3.0f, 0.0f, 1.0f};
  const std::vector<float> step3 = {0.5f, 4.0f};
  stats.observe_step(step1.data(), 2);
  stats.observe_step(step2.data(), 3);
  stats.observe_step(step3.data(), 2);
  const double ema_min = 0.9 * (0.9 * -1.0 + 0.1 * -3.0) + 0.1 * 0.5;
  const double ema_max = 0.9 * (0.9 * 2.0 + 0.1 * 1.0) + 0.1 * 4.0;
  CHECK(stats.ema.min == doctest::Approx(ema_min).epsilon(1e-15));
  CHECK(stats.ema.max == doctest::Approx(ema_max).epsilon(1e-15));
  CHECK(stats.ema.steps == 3);
  CHECK(stats.min == -3.0);
  CHECK(stats.max == 4.0);
  CHECK(stats.count == 7);
  CHECK(stats.zero_count == 1);
  CHECK(stats.histogram.total() == 6);  // exact zeros are kept out of the histogram
}

TEST_CASE("ema of merged runs equals one pass over the same steps in the same order") {
  std::vector<std::vector<float>> steps;
  for (int t = 0; t < 12; ++t) steps.push_back({static_cast<float>(-t % 5) - 0.25f, static_cast<float>(t * t % 7) + 0.5f});
  TensorStats single, first, second;
  for (int t = 0; t < 12; ++t) {
    single.observe_step(steps[static_cast<size_t>(t)].data(), 2);
    (t < 5 ? first : second).observe_step(steps[static_cast<size_t>(t)].data(), 2);
  }
  TensorStats merged = first;
  merged.merge(second);
  CHECK(merged.ema.steps == single.ema.steps);
  CHECK(merged.ema.min == doctest::Approx(single.ema.min).epsilon(1e-12));
  CHECK(merged.ema.max == doctest::Approx(single.ema.max).epsilon(1e-12));
  CHECK(qgru::same_order_independent_stats(merged, single));
  // The other order is a different EMA (order-dependent), the rest is the same.
  TensorStats reversed = second;
  reversed.merge(first);
  CHECK(reversed.ema.max != doctest::Approx(single.ema.max).epsilon(1e-6));
  CHECK(qgru::same_order_independent_stats(reversed, single));
}
