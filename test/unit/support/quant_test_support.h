#pragma once
// Helpers for the quant tests: random float GRU models, a min/max range observer over the float GRU
// (an independent stand-in for calibration), and SQNR.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <random>
#include <tuple>
#include <vector>

#include "qgru/model/float_gru.h"
#include "qgru/quant/quantize_gru.h"

namespace qgru::test {

// Weights uniform in [-scale/sqrt(H), scale/sqrt(H)] (PyTorch's init for scale = 1), biases likewise.
inline FloatGruModel random_float_gru(int C, int H, int L, int D, uint32_t seed, float scale = 1.5f) {
  std::mt19937 rng(seed);
  const float bound = scale / std::sqrt(static_cast<float>(H));
  std::uniform_real_distribution<float> dist(-bound, bound);
  FloatGruModel model;
  model.input_size = C;
  model.hidden_size = H;
  model.num_layers = L;
  model.num_directions = D;
  model.source_layout = "pytorch";
  for (int l = 0; l < L; ++l) {
    for (int d = 0; d < D; ++d) {
      GruCellWeights w;
      w.input_size = l == 0 ? C : D * H;
      w.hidden_size = H;
      w.W.resize(static_cast<size_t>(3 * H) * w.input_size);
      w.R.resize(static_cast<size_t>(3 * H) * H);
      w.bw.resize(static_cast<size_t>(3 * H));
      w.br.resize(static_cast<size_t>(3 * H));
      for (auto* v : {&w.W, &w.R, &w.bw, &w.br}) {
        for (float& value : *v) value = dist(rng);
      }
      model.cells.push_back(std::move(w));
    }
  }
  return model;
}

inline std::vector<float> random_input(size_t count, uint32_t seed, float amplitude = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, amplitude);
  std::vector<float> x(count);
  for (float& v : x) v = dist(rng);
  return x;
}

// Min/max of every observed tensor per (layer, direction), from the float GRU.
class MinMaxObserver : public FloatGruObserver {
 public:
  void on_step(const FloatStepView& s) override {
    const size_t nh = static_cast<size_t>(s.batch) * s.hidden_size;
    add(s, GruTensor::x, s.x, static_cast<size_t>(s.batch) * s.input_size);
    add(s, GruTensor::h, s.h_prev, nh);
    add(s, GruTensor::h, s.h_new, nh);
    add(s, GruTensor::weight_ih_linear, s.weight_ih_linear, 3 * nh);
    add(s, GruTensor::weight_hh_linear, s.weight_hh_linear, 3 * nh);
    add(s, GruTensor::update_gate_input, s.update_gate_input, nh);
    add(s, GruTensor::update_gate_output, s.update_gate_output, nh);
    add(s, GruTensor::reset_gate_input, s.reset_gate_input, nh);
    add(s, GruTensor::reset_gate_output, s.reset_gate_output, nh);
    add(s, GruTensor::new_gate_input, s.new_gate_input, nh);
    add(s, GruTensor::new_gate_output, s.new_gate_output, nh);
  }
  std::pair<double, double> range(int layer, int direction, GruTensor tensor) const {
    auto it = ranges_.find({layer, direction, static_cast<int>(tensor)});
    return it == ranges_.end() ? std::pair<double, double>{0.0, 0.0} : it->second;
  }
  RangeProvider provider() const {
    return [this](int layer, int direction, GruTensor tensor, const std::string&, const TensorQuant&) {
      return range(layer, direction, tensor);
    };
  }

 private:
  void add(const FloatStepView& s, GruTensor tensor, const float* values, size_t count) {
    auto key = std::make_tuple(s.layer, s.direction, static_cast<int>(tensor));
    auto it = ranges_.find(key);
    if (it == ranges_.end()) {
      it = ranges_.emplace(key, std::pair<double, double>{std::numeric_limits<double>::infinity(),
                                                          -std::numeric_limits<double>::infinity()}).first;
    }
    for (size_t i = 0; i < count; ++i) {
      it->second.first = std::min(it->second.first, static_cast<double>(values[i]));
      it->second.second = std::max(it->second.second, static_cast<double>(values[i]));
    }
  }
  std::map<std::tuple<int, int, int>, std::pair<double, double>> ranges_;
};

inline double sqnr_db(const std::vector<float>& reference, const std::vector<float>& test) {
  double signal = 0.0, noise = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    signal += static_cast<double>(reference[i]) * reference[i];
    const double e = static_cast<double>(reference[i]) - test[i];
    noise += e * e;
  }
  return noise == 0.0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(signal / noise);
}

// A quantized model calibrated (min/max) on `x` itself.
struct CalibratedCase {
  FloatGruModel model;
  std::vector<float> x;
  int T = 0, N = 0;
  FloatGruResult float_result;
  QuantizedGru quantized;
};

// h0: [L*D, N, H] or empty for zeros (the calibration run sees it too). linear_before_reset: the cell variant
// (false: ONNX's linear_before_reset = 0 cell, FloatGruModel::linear_before_reset).
inline CalibratedCase calibrated_case(int C, int H, int L, int D, int T, int N, const BitwidthConfig& config,
                                      uint32_t seed, const std::vector<float>& h0 = {}, bool linear_before_reset = true) {
  CalibratedCase c;
  c.model = random_float_gru(C, H, L, D, seed);
  c.model.linear_before_reset = linear_before_reset;
  c.T = T;
  c.N = N;
  c.x = random_input(static_cast<size_t>(T) * N * C, seed + 1000);
  MinMaxObserver observer;
  c.float_result = run_float_gru(c.model, c.x.data(), T, N, h0.empty() ? nullptr : h0.data(), &observer);
  c.quantized = quantize_gru(c.model, config, observer.provider());
  return c;
}

// Sequence n of a [T, N, F] array over its first `steps` steps, as a [steps, 1, F] array (the padded-batch tests
// run it alone to get what the batch must give that sequence).
template <class V>
std::vector<V> sequence_alone(const std::vector<V>& values, int N, int F, int n, int steps) {
  std::vector<V> out;
  for (int t = 0; t < steps; ++t) {
    const auto from = values.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(t) * N + n) * F);
    out.insert(out.end(), from, from + F);
  }
  return out;
}

}  // namespace qgru::test
