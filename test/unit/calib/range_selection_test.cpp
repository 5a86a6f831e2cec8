#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/calib/range_selection.h"

using qgru::CalibrationStats;
using qgru::GruTensor;
using qgru::TensorQuant;

namespace {

void add_uniform(qgru::TensorStats& stats, double lo, double hi, int count) {
  std::vector<float> values;
  for (int i = 0; i < count; ++i) values.push_back(static_cast<float>(lo + (i + 0.5) * (hi - lo) / count));
  stats.observe_step(values.data(), static_cast<int64_t>(values.size()));
}

void add_value(qgru::TensorStats& stats, float value, int copies) {
  std::vector<float> values(static_cast<size_t>(copies), value);
  stats.observe_step(values.data(), copies);
}

TensorQuant spec_of(int bits, bool is_unsigned, bool symmetric) {
  TensorQuant spec;
  spec.bits = bits;
  spec.is_unsigned = is_unsigned;
  spec.symmetric = symmetric;
  return spec;
}

// The shift quant_from_range gives a symmetric signed 8-bit range: the largest s with max|x|·2^s <= 127.5.
int symmetric_int8_shift(double min, double max) {
  const double absmax = std::max(-min, max);
  int shift = 0;
  while (std::round(std::ldexp(absmax, shift + 1)) <= 127) ++shift;
  while (std::round(std::ldexp(absmax, shift)) > 127) --shift;
  return shift;
}

}  // namespace

TEST_CASE("method names parse, with percentile values and the +pow2 suffix") {
  CHECK(qgru::parse_range_method("kl").name == "kl");
  CHECK_FALSE(qgru::parse_range_method("kl").pow2);
  const auto p = qgru::parse_range_method("percentile:99.9+pow2");
  CHECK(p.name == "percentile");
  CHECK(p.percentile == 99.9);
  CHECK(p.pow2);
  CHECK(p.text() == "percentile:99.9+pow2");
  CHECK(qgru::parse_range_method("percentile").percentile == 99.99);
  CHECK_THROWS_WITH(qgru::parse_range_method("entropy"),
                    "method 'entropy' is not one of minmax, ema, kl, percentile[:P], mse, bounds (each optionally +pow2)");
  CHECK_THROWS_AS(qgru::parse_range_method("percentile:120"), qgru::Error);
  // Two-sided: P% kept below the upper bound and above the lower one, so at 50 or below the range inverts.
  CHECK_THROWS_WITH(qgru::parse_range_method("percentile:10"),
                    "method 'percentile:10': percentile '10' is not a number in (50, 100]");
  CHECK_THROWS_AS(qgru::parse_range_method("percentile:50"), qgru::Error);
  CHECK(qgru::parse_range_method("percentile:50.5").percentile == 50.5);
  CHECK_THROWS_AS(qgru::parse_range_method("kl:3"), qgru::Error);
}

TEST_CASE("select_range: minmax, ema, bounds and the stats' default method") {
  CalibrationStats stats = CalibrationStats::for_shape(1, 1, 2, 2);
  stats.method = "ema";
  for (GruTensor tensor : qgru::kObservedGruTensors) {
    auto& t = stats.at(0, 0, tensor);
    add_uniform(t, -0.5, 0.25, 100);
    add_uniform(t, -1.5, 0.75, 100);
  }
  const TensorQuant spec = spec_of(8, false, false);
  const auto minmax = qgru::select_range(stats, 0, 0, GruTensor::x, "minmax", spec);
  CHECK(minmax.min == stats.at(0, 0, GruTensor::x).min);
  CHECK(minmax.max == stats.at(0, 0, GruTensor::x).max);
  const auto ema = qgru::select_range(stats, 0, 0, GruTensor::x, "", spec);  // the default: ema
  CHECK(ema.method == "ema");
  const double first_min = -0.5 + 0.5 * 0.75 / 100, second_min = -1.5 + 0.5 * 2.25 / 100;
  CHECK(ema.min == doctest::Approx(0.9 * static_cast<float>(first_min) + 0.1 * static_cast<float>(second_min)));
  const auto sigmoid = qgru::select_range(stats, 0, 0, GruTensor::reset_gate_output, "bounds", spec_of(8, true, false));
  CHECK(sigmoid.min == 0.0);
  CHECK(sigmoid.max == 1.0);
  const auto h = qgru::select_range(stats, 0, 0, GruTensor::h, "bounds", spec);
  CHECK(h.min == -1.0);
  CHECK(h.max == 1.0);
  CHECK_THROWS_AS(qgru::select_range(stats, 0, 0, GruTensor::W, "minmax", spec), qgru::Error);
  CHECK_THROWS_AS(qgru::select_range(stats, 1, 0, GruTensor::x, "minmax", spec), qgru::Error);
  CalibrationStats empty = CalibrationStats::for_shape(1, 1, 2, 2);
  CHECK_THROWS_WITH(qgru::select_range(empty, 0, 0, GruTensor::h, "kl", spec),
                    "calibration statistics () hold no observations of layer 0 direction 0 h");
}

TEST_CASE("pow2: the finer shift wins when it clips only a few outliers") {
  CalibrationStats stats = CalibrationStats::for_shape(1, 1, 1, 1);
  auto& t = stats.at(0, 0, GruTensor::new_gate_input);
  add_uniform(t, -0.99, 0.99, 100000);
  add_value(t, 1.01f, 3);  // pushes the covering grid from shift 7 to 6
  const TensorQuant spec = spec_of(8, false, true);
  REQUIRE(symmetric_int8_shift(t.min, t.max) == 6);
  const auto choice = qgru::select_range(stats, 0, 0, GruTensor::new_gate_input, "minmax+pow2", spec);
  CHECK(symmetric_int8_shift(choice.min, choice.max) == 7);
  CHECK(choice.detail.find("shift 6 (covering)") != std::string::npos);
  CHECK(choice.detail.find("-> shift 7") != std::string::npos);
  // Without +pow2 the range keeps the outliers.
  CHECK(qgru::select_range(stats, 0, 0, GruTensor::new_gate_input, "minmax", spec).max == doctest::Approx(1.01));
}

TEST_CASE("pow2 under KL: the finer shift wins when the KL range keeps a few far outliers") {
  CalibrationStats stats = CalibrationStats::for_shape(1, 1, 1, 1);
  auto& t = stats.at(0, 0, GruTensor::new_gate_input);
  add_uniform(t, -0.25, 0.25, 40000);  // a peaked density: KL sees the grid's resolution
  add_uniform(t, -0.5, 0.5, 30000);
  add_uniform(t, -0.99, 0.99, 30000);
  add_value(t, 1.05f, 20);
  const TensorQuant spec = spec_of(8, false, true);
  const auto plain = qgru::select_range(stats, 0, 0, GruTensor::new_gate_input, "kl", spec);
  const auto choice = qgru::select_range(stats, 0, 0, GruTensor::new_gate_input, "kl+pow2", spec);
  MESSAGE(choice.detail);
  CHECK(symmetric_int8_shift(plain.min, plain.max) == 6);
  CHECK(symmetric_int8_shift(choice.min, choice.max) == 7);
}

TEST_CASE("pow2: the finer shift loses when it would clip much of the data") {
  CalibrationStats stats = CalibrationStats::for_shape(1, 1, 1, 1);
  auto& t = stats.at(0, 0, GruTensor::new_gate_input);
  add_uniform(t, -0.99, 0.99, 100000);
  add_uniform(t, 1.0, 1.9, 5000);  // 5% beyond the finer grid's edge
  const TensorQuant spec = spec_of(8, false, true);
  REQUIRE(symmetric_int8_shift(t.min, t.max) == 6);
  for (const char* method : {"minmax+pow2", "percentile:99.999+pow2", "mse+pow2"}) {
    CAPTURE(method);
    const auto choice = qgru::select_range(stats, 0, 0, GruTensor::new_gate_input, method, spec);
    MESSAGE(choice.detail);
    CHECK(symmetric_int8_shift(choice.min, choice.max) == 6);
    CHECK(choice.detail.find("-> shift 6") != std::string::npos);
  }
}

TEST_CASE("kl on sigmoid outputs uses 2^bits levels and keeps the range non-negative") {
  CalibrationStats stats = CalibrationStats::for_shape(1, 1, 1, 1);
  auto& t = stats.at(0, 0, GruTensor::update_gate_output);
  add_uniform(t, 0.01, 0.99, 50000);
  const auto choice = qgru::select_range(stats, 0, 0, GruTensor::update_gate_output, "kl", spec_of(8, true, false));
  CHECK(choice.detail.find("levels=256") != std::string::npos);
  CHECK(choice.min == t.min);
  CHECK(choice.max <= t.max);
  CHECK(choice.max > 0.9);
}
