#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "qgru/calib/histogram.h"

using qgru::Pow2Histogram;

namespace {

std::vector<double> mixed_values(unsigned seed, int count, double scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> values;
  for (int i = 0; i < count; ++i) values.push_back(static_cast<double>(static_cast<float>(normal(rng))));
  // Edges: powers of two and their neighbours, tiny and huge magnitudes.
  for (double edge : {1.0, -1.0, 0.5, -0.5, 2.0, -2.0, std::nextafter(1.0, 0.0), -std::nextafter(1.0, 0.0)}) {
    values.push_back(edge * scale);
  }
  values.push_back(1e-30);
  values.push_back(-3e-38);
  return values;
}

Pow2Histogram histogram_of(const std::vector<double>& values) {
  Pow2Histogram histogram;
  for (double value : values) histogram.add(value);
  return histogram;
}

}  // namespace

TEST_CASE("histogram bin edges are floor(v / w) with w = 2^(exponent - 16)") {
  Pow2Histogram histogram;
  histogram.add(0.75);  // needs [-1, 1): exponent 0
  CHECK(histogram.exponent() == 0);
  CHECK(histogram.bins()[Pow2Histogram::kBinsPerSide + 49152] == 1);  // 0.75 * 2^16
  histogram.add(-1.0);  // the lowest value of [-1, 1) stays at exponent 0, bin 0
  CHECK(histogram.exponent() == 0);
  CHECK(histogram.bins()[0] == 1);
  histogram.add(1.0);   // 1.0 is outside [-1, 1): grow to [-2, 2)
  CHECK(histogram.exponent() == 1);
  CHECK(histogram.bins()[0] == 0);
  CHECK(histogram.bins()[Pow2Histogram::kBinsPerSide / 2] == 1);               // -1.0 at [-2, 2)
  CHECK(histogram.bins()[Pow2Histogram::kBinsPerSide + 24576] == 1);           // 0.75 * 2^15
  CHECK(histogram.bins()[Pow2Histogram::kBinsPerSide + 32768] == 1);           // 1.0 * 2^15
  CHECK(histogram.total() == 3);
  CHECK(histogram.bin_width() == std::ldexp(1.0, 1 - 16));
}

TEST_CASE("histogram growth loses nothing: insertion order does not change the bins") {
  std::vector<double> values = mixed_values(1, 5000, 3.0);
  const Pow2Histogram forward = histogram_of(values);
  std::sort(values.begin(), values.end(), [](double a, double b) { return std::fabs(a) < std::fabs(b); });
  const Pow2Histogram small_first = histogram_of(values);  // grows many times
  std::reverse(values.begin(), values.end());
  const Pow2Histogram large_first = histogram_of(values);  // never grows after the first value
  CHECK(forward == small_first);
  CHECK(forward == large_first);
  CHECK(forward.total() == values.size());
}

TEST_CASE("histogram shards merged in any order equal the single pass bit for bit") {
  const std::vector<double> a = mixed_values(2, 3000, 0.01);   // small exponent
  const std::vector<double> b = mixed_values(3, 3000, 40.0);   // large exponent
  const std::vector<double> c = mixed_values(4, 3000, 1.0);
  std::vector<double> all = a;
  all.insert(all.end(), b.begin(), b.end());
  all.insert(all.end(), c.begin(), c.end());
  const Pow2Histogram single = histogram_of(all);
  const Pow2Histogram ha = histogram_of(a), hb = histogram_of(b), hc = histogram_of(c);
  std::vector<std::vector<const Pow2Histogram*>> orders = {{&ha, &hb, &hc}, {&hc, &hb, &ha}, {&hb, &ha, &hc}};
  for (const auto& order : orders) {
    Pow2Histogram merged;
    for (const Pow2Histogram* shard : order) merged.merge(*shard);
    CHECK(merged == single);
  }
  // Associativity: (a + b) + c == a + (b + c).
  Pow2Histogram left = ha;
  left.merge(hb);
  left.merge(hc);
  Pow2Histogram right_tail = hb;
  right_tail.merge(hc);
  Pow2Histogram right = ha;
  right.merge(right_tail);
  CHECK(left == right);
}

TEST_CASE("histogram holds the largest finite floats") {
  Pow2Histogram histogram;
  histogram.add(3.4e38);
  histogram.add(-3.4e38);
  CHECK(histogram.exponent() == 128);
  CHECK(histogram.total() == 2);
}
