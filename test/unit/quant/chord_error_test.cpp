// chord_error_within (the segment search's early-stopping question) against chord_error <= bound, the answer it
// must give for every stretch and bound: a different answer would move a segment boundary and change an
// artifact's activation tables.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "qgru/quant/chord_error.h"

namespace {

// Curves like the fitted ones (sigmoid and tanh in output-code space: convex, concave, flat under a clamp) and
// rough ones (noise, steps), so that the running extremes cross a bound early, late, or exactly at the end.
std::vector<std::vector<double>> curves() {
  std::vector<std::vector<double>> out;
  const int count = 700;  // several 64-code blocks and a partial one
  std::vector<double> sigmoid(count), tanh_curve(count), noisy(count), steps(count), flat(count, 3.0);
  std::mt19937_64 rng(29);
  std::normal_distribution<double> noise(0.0, 2.0);
  for (int i = 0; i < count; ++i) {
    const double x = (i - count / 2) / 40.0;
    sigmoid[i] = 255.0 / (1.0 + std::exp(-x));
    tanh_curve[i] = std::min(127.0, std::max(-128.0, 140.0 * std::tanh(x)));
    noisy[i] = sigmoid[i] + noise(rng);
    steps[i] = static_cast<double>((i / 97) * 5);
  }
  out = {sigmoid, tanh_curve, noisy, steps, flat};
  return out;
}

}  // namespace

TEST_CASE("the segment search's early stop never answers differently from the full chord error") {
  std::mt19937_64 rng(7);
  int64_t compared = 0, within = 0, beyond = 0;
  for (const std::vector<double>& target : curves()) {
    const int64_t count = static_cast<int64_t>(target.size());
    std::uniform_int_distribution<int64_t> pick(0, count - 1);
    for (int trial = 0; trial < 400; ++trial) {
      int64_t first = pick(rng), last = pick(rng);
      if (trial % 7 == 0) last = first;  // an empty stretch
      const double error = qgru::chord_error(target, first, last);
      // The exact error (the tie), its neighbours, a fraction and a multiple of it, zero, and a random bound.
      const double bounds[] = {error, std::nextafter(error, 0.0), std::nextafter(error, 1e300), 0.5 * error,
                               2.0 * error, 0.0, std::uniform_real_distribution<double>(0.0, 20.0)(rng)};
      for (const double bound : bounds) {
        const bool expected = error <= bound;
        INFO("first " << first << " last " << last << " error " << error << " bound " << bound);
        CHECK(qgru::chord_error_within(target, first, last, bound) == expected);
        ++compared;
        (expected ? within : beyond) += 1;
      }
    }
  }
  // Both answers were asked for many times (a sweep that only ever said yes would prove nothing).
  CHECK(within > 1000);
  CHECK(beyond > 1000);
  CHECK(compared == within + beyond);
}
