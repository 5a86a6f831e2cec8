#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/calib/calibrate.h"
#include "qgru/calib/calibration_observer.h"

using qgru::CalibrationStats;
using qgru::GruTensor;

namespace {

qgru::FloatGruModel random_model(int layers, int directions, int C, int H, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> weight(-0.6f, 0.6f);
  qgru::FloatGruModel model;
  model.input_size = C;
  model.hidden_size = H;
  model.num_layers = layers;
  model.num_directions = directions;
  for (int l = 0; l < layers; ++l) {
    for (int d = 0; d < directions; ++d) {
      qgru::GruCellWeights cell;
      cell.input_size = l == 0 ? C : directions * H;
      cell.hidden_size = H;
      auto fill = [&](std::vector<float>& v, size_t n) {
        v.resize(n);
        for (auto& x : v) x = weight(rng);
      };
      fill(cell.W, static_cast<size_t>(3 * H * cell.input_size));
      fill(cell.R, static_cast<size_t>(3 * H * H));
      fill(cell.bw, static_cast<size_t>(3 * H));
      fill(cell.br, static_cast<size_t>(3 * H));
      model.cells.push_back(cell);
    }
  }
  return model;
}

std::vector<float> random_sequences(int T, int N, int C, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> x(static_cast<size_t>(T * N * C));
  for (auto& v : x) v = normal(rng);
  return x;
}

}  // namespace

TEST_CASE("observer sees the data's exact x range and every step's h_new, never the zero h0") {
  const int T = 9, N = 3, C = 4, H = 5;
  const auto model = random_model(2, 2, C, H, 1);
  const auto x = random_sequences(T, N, C, 2);
  CalibrationStats stats = CalibrationStats::for_shape(2, 2, C, H);
  qgru::observe_sequences(model, x, T, N, "mem.npy", stats);
  const double x_min = *std::min_element(x.begin(), x.end());
  const double x_max = *std::max_element(x.begin(), x.end());
  for (int d = 0; d < 2; ++d) {
    const auto& xs = stats.at(0, d, GruTensor::x);
    CHECK(xs.min == x_min);
    CHECK(xs.max == x_max);
    CHECK(xs.count == static_cast<uint64_t>(T * N * C));
    CHECK(xs.ema.steps == static_cast<uint64_t>(T));
    CHECK(stats.at(1, d, GruTensor::x).count == static_cast<uint64_t>(T * N * 2 * H));
    const auto& h = stats.at(0, d, GruTensor::h);
    CHECK(h.count == static_cast<uint64_t>(T * N * H));
    CHECK(h.zero_count == 0);  // observing h0 would add N·H exact zeros
    CHECK(stats.at(0, d, GruTensor::weight_ih_linear).count == static_cast<uint64_t>(T * N * 3 * H));
    const auto& z = stats.at(1, d, GruTensor::update_gate_output);
    CHECK(z.min > 0.0);
    CHECK(z.max < 1.0);
    const auto& n = stats.at(1, d, GruTensor::new_gate_output);
    CHECK(n.min >= -1.0);
    CHECK(n.max <= 1.0);
    CHECK(n.max > n.min);
  }
}

TEST_CASE("observing two files in a row equals merging their separate stats") {
  const int C = 3, H = 4;
  const auto model = random_model(1, 2, C, H, 3);
  const auto a = random_sequences(7, 2, C, 4);
  const auto b = random_sequences(5, 3, C, 5);
  CalibrationStats single = CalibrationStats::for_shape(1, 2, C, H);
  qgru::observe_sequences(model, a, 7, 2, "a.npy", single);
  qgru::observe_sequences(model, b, 5, 3, "b.npy", single);
  CalibrationStats shard_a = CalibrationStats::for_shape(1, 2, C, H);
  CalibrationStats shard_b = CalibrationStats::for_shape(1, 2, C, H);
  qgru::observe_sequences(model, a, 7, 2, "a.npy", shard_a);
  qgru::observe_sequences(model, b, 5, 3, "b.npy", shard_b);
  for (const auto& merged : {qgru::merge_calibration_stats({shard_a, shard_b}, {"a", "b"}),
                             qgru::merge_calibration_stats({shard_b, shard_a}, {"b", "a"})}) {
    for (size_t i = 0; i < single.tensors.size(); ++i) {
      CHECK(qgru::same_order_independent_stats(merged.tensors[i], single.tensors[i]));
    }
  }
  const auto in_order = qgru::merge_calibration_stats({shard_a, shard_b}, {"a", "b"});
  for (size_t i = 0; i < single.tensors.size(); ++i) {
    CHECK(in_order.tensors[i].ema.min == doctest::Approx(single.tensors[i].ema.min).epsilon(1e-12));
    CHECK(in_order.tensors[i].ema.max == doctest::Approx(single.tensors[i].ema.max).epsilon(1e-12));
  }
}

TEST_CASE("a NaN in a step is an error naming the file, tensor and (t, n, c)") {
  const int N = 2, C = 3, H = 2;
  CalibrationStats stats = CalibrationStats::for_shape(1, 1, C, H);
  qgru::CalibrationObserver observer(stats);
  observer.set_source("calib.npy");
  std::vector<float> x(N * C, 0.5f), h(N * H, 0.1f), linear(N * 3 * H, 0.2f), gate(N * H, 0.3f);
  x[static_cast<size_t>(1 * C + 2)] = std::numeric_limits<float>::quiet_NaN();
  qgru::FloatStepView step;
  step.t = 4;
  step.batch = N;
  step.input_size = C;
  step.hidden_size = H;
  step.x = x.data();
  step.h_prev = step.h_new = h.data();
  step.weight_ih_linear = step.weight_hh_linear = linear.data();
  step.update_gate_input = step.update_gate_output = step.reset_gate_input = step.reset_gate_output = gate.data();
  step.new_gate_input = step.new_gate_output = gate.data();
  CHECK_THROWS_WITH(observer.on_step(step),
                    "calib.npy: non-finite value nan in x of layer 0 direction 0 at (t=4, n=1, c=2) of the input data");
}
