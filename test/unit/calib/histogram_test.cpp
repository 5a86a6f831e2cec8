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

TEST_CASE("each value lands in bin floor(v / w) + 2^16, against std::floor, at every exponent the data gives") {
  // Random floats of many scales, each bin edge of a few bins exactly, the values just below and above an edge,
  // and negative non-integers of the scaled value (where truncation and floor differ), one value per histogram
  // so that its exponent is the value's own (a fresh 1 MB histogram each: 150 or so of them; the fixed-exponent
  // pass below takes thousands of values into one): the bin holding it must be std::floor(v · 2^(16 - exponent)).
  std::vector<double> values = mixed_values(3, 2000, 1.0);
  std::vector<double> one_each;
  for (double scale : {1e-6, 1e-3, 3.0, 1e4, 1e30}) {
    const std::vector<double> more = mixed_values(4, 12, scale);
    one_each.insert(one_each.end(), more.begin(), more.end());
  }
  for (int k : {-65536, -65535, -32769, -2, -1, 1, 2, 32767, 65535}) {
    const double edge = std::ldexp(static_cast<double>(k), -16);
    for (double v : {edge, std::nextafter(edge, -1.0), std::nextafter(edge, 1.0), edge - 0.5 * std::ldexp(1.0, -16)}) {
      values.push_back(v);
      one_each.push_back(v);
    }
  }
  for (double value : one_each) {
    if (value == 0.0) continue;  // the caller skips exact zeros
    Pow2Histogram histogram;
    histogram.add(value);
    const double scaled = std::ldexp(value, Pow2Histogram::kLog2BinsPerSide - histogram.exponent());
    const auto expected = static_cast<int64_t>(std::floor(scaled)) + Pow2Histogram::kBinsPerSide;
    REQUIRE_MESSAGE(expected >= 0, value);
    REQUIRE_MESSAGE(expected < Pow2Histogram::kBins, value);
    REQUIRE_MESSAGE(histogram.bins()[static_cast<size_t>(expected)] == 1, "value " << value << " expected bin " << expected);
  }
  // At a fixed exponent too: every value below in [-1, 1) after one value that sets exponent 0.
  Pow2Histogram fixed;
  fixed.add(-1.0);
  std::vector<uint64_t> counted(Pow2Histogram::kBins, 0);
  counted[0] = 1;
  for (double value : values) {
    if (value == 0.0 || !(value >= -1.0 && value < 1.0)) continue;
    fixed.add(value);
    ++counted[static_cast<size_t>(static_cast<int64_t>(std::floor(std::ldexp(value, 16))) + Pow2Histogram::kBinsPerSide)];
  }
  CHECK(fixed.exponent() == 0);
  CHECK(fixed.bins() == counted);
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
