// Quantization parameters: ranges covered, zero points inside the code range, symmetric => zp = 0,
// weight rows on their finest grid, all-zero rows, and the derived-shift identities written as scale ratios.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include "qgru/quant/gru_quant_params.h"
#include "qgru/quant/bitwidth_presets.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

double scale(int shift) { return std::ldexp(1.0, -shift); }

// Random ranges spanning many octaves, some one-sided.
CellRanges random_ranges(std::mt19937& rng) {
  std::uniform_real_distribution<double> octave(-6.0, 6.0);
  std::uniform_int_distribution<int> kind(0, 2);
  CellRanges ranges{};
  for (GruTensor t : kObservedGruTensors) {
    const double lo = -std::exp2(octave(rng));
    const double hi = std::exp2(octave(rng));
    const int k = kind(rng);
    ranges[static_cast<size_t>(t)] = k == 0 ? FloatRange{lo, hi} : k == 1 ? FloatRange{0.0, hi} : FloatRange{lo, 0.25 * hi};
  }
  // Sigmoid outputs are non-negative.
  for (GruTensor t : {GruTensor::update_gate_output, GruTensor::reset_gate_output}) {
    ranges[static_cast<size_t>(t)] = {0.0, std::uniform_real_distribution<double>(0.01, 1.0)(rng)};
  }
  return ranges;
}

TEST_CASE("activation quantization covers its range with zp inside the code range; symmetric => zp 0") {
  std::mt19937 rng(3);
  for (const std::string& preset : bitwidth_preset_names()) {
    const BitwidthConfig config = load_bitwidth_config(preset);
    // 16-bit gates build 16-bit pwl tables (~0.1 s each): fewer trials there.
    const int trials = config.of(GruTensor::update_gate_input).bits <= 8 ? 40 : 4;
    for (int trial = 0; trial < trials; ++trial) {
      const FloatGruModel model = test::random_float_gru(4, 6, 1, 1, 100u + static_cast<uint32_t>(trial));
      const CellRanges ranges = random_ranges(rng);
      const GruCellQuantParams p = make_cell_quant_params(model.cell(0, 0), config, ranges, 0, 0);
      for (GruTensor t : kObservedGruTensors) {
        CAPTURE(preset);
        CAPTURE(gru_tensor_name(t));
        const TensorQuant& q = p.q(t);
        const FloatRange& r = ranges[static_cast<size_t>(t)];
        CHECK(q.bits == config.of(t).bits);
        CHECK(q.is_unsigned == config.of(t).is_unsigned);
        CHECK(quant_covers_range(q, r.first, r.second));
        CHECK(q.zp >= q.qmin());
        CHECK(q.zp <= q.qmax());
        if (q.symmetric) CHECK(q.zp == 0);
        // Finest grid: one more bit of shift would not cover the range (the zero point may move).
        const RangeQuantResult finer = quant_from_range(r.first, r.second, q.bits, q.is_unsigned, q.symmetric);
        CHECK(finer.quant.shift == q.shift);
      }
    }
  }
}

TEST_CASE("weight rows: per-channel grid is the finest that holds max |w| of the row") {
  const FloatGruModel model = test::random_float_gru(7, 5, 1, 1, 42u);
  const std::vector<float>& W = model.cell(0, 0).W;
  for (int bits : {4, 8, 16}) {
    const QuantizedRows rows = quantize_rows_symmetric(W, 15, 7, bits, true);
    CHECK(rows.zero_rows == 0);
    const double q_max = std::ldexp(1.0, bits - 1) - 1;
    for (int r = 0; r < 15; ++r) {
      double max_abs = 0.0;
      for (int k = 0; k < 7; ++k) max_abs = std::max(max_abs, std::fabs(static_cast<double>(W[static_cast<size_t>(r * 7 + k)])));
      const int shift = rows.shift[static_cast<size_t>(r)];
      CHECK(std::round(max_abs * std::ldexp(1.0, shift)) <= q_max);      // fits
      CHECK(std::round(max_abs * std::ldexp(1.0, shift + 1)) > q_max);   // the next finer grid would clip
      for (int k = 0; k < 7; ++k) {
        const size_t i = static_cast<size_t>(r * 7 + k);
        CHECK(std::fabs(rows.codes[i] * scale(shift) - W[i]) <= 0.5 * scale(shift) + 1e-12);
      }
    }
  }
  SUBCASE("per tensor: one shift for all rows") {
    const QuantizedRows rows = quantize_rows_symmetric(W, 15, 7, 8, false);
    for (int s : rows.shift) CHECK(s == rows.shift[0]);
  }
}

TEST_CASE("an all-zero weight row is handled: zero codes, zero row sum, counted") {
  FloatGruModel model = test::random_float_gru(4, 3, 1, 1, 8u);
  GruCellWeights& w = model.cells[0];
  for (int k = 0; k < 4; ++k) w.W[static_cast<size_t>(2 * 4 + k)] = 0.0f;  // row 2
  const QuantizedRows rows = quantize_rows_symmetric(w.W, 9, 4, 8, true);
  CHECK(rows.zero_rows == 1);
  for (int k = 0; k < 4; ++k) CHECK(rows.codes[static_cast<size_t>(2 * 4 + k)] == 0);
  test::MinMaxObserver observer;
  const std::vector<float> x = test::random_input(3 * 2 * 4, 1u);
  run_float_gru(model, x.data(), 3, 2, nullptr, &observer);
  const QuantizedGru q = quantize_gru(model, load_bitwidth_config("int8"), observer.provider());
  CHECK(q.cell(0, 0).W_sum[2] == 0);
}

TEST_CASE("derived shifts equal the scale ratios they stand for") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  std::mt19937 rng(17);
  for (int trial = 0; trial < 10; ++trial) {
    const FloatGruModel model = test::random_float_gru(6, 4, 1, 1, 500u + static_cast<uint32_t>(trial));
    const GruCellQuantParams p = make_cell_quant_params(model.cell(0, 0), config, random_ranges(rng), 0, 0);
    auto S = [&](GruTensor t) { return scale(p.q(t).shift); };
    for (int c = 0; c < 12; ++c) {
      const size_t i = static_cast<size_t>(c);
      const double S_W = scale(p.shift_W[i]), S_R = scale(p.shift_R[i]);
      const double S_bw = scale(p.shift_bw[i]), S_br = scale(p.shift_br[i]);
      // q_target = q_source * S_source / S_target = q_source * 2^-shift_source_to_target
      CHECK(scale(p.shift_gemm_x_to_weight_ih_linear[i]) == S_W * S(GruTensor::x) / S(GruTensor::weight_ih_linear));
      CHECK(scale(p.shift_bw_to_gemm_x[i]) == S_bw / (S_W * S(GruTensor::x)));
      CHECK(scale(p.shift_gemm_h_to_weight_hh_linear[i]) == S_R * S(GruTensor::h) / S(GruTensor::weight_hh_linear));
      CHECK(scale(p.shift_br_to_gemm_h[i]) == S_br / (S_R * S(GruTensor::h)));
      int64_t w_sum = 0;
      for (int k = 0; k < 6; ++k) w_sum += p.q_W[static_cast<size_t>(c * 6 + k)];
      CHECK(p.W_sum[i] == w_sum);
      // The codes dequantize to the weights within half a step.
      for (int k = 0; k < 6; ++k) {
        CHECK(std::fabs(p.q_W[static_cast<size_t>(c * 6 + k)] * S_W - model.cell(0, 0).W[static_cast<size_t>(c * 6 + k)]) <= 0.5 * S_W);
      }
    }
    CHECK(scale(p.shift_weight_ih_linear_to_update_gate_input) == S(GruTensor::weight_ih_linear) / S(GruTensor::update_gate_input));
    CHECK(scale(p.shift_weight_hh_linear_to_update_gate_input) == S(GruTensor::weight_hh_linear) / S(GruTensor::update_gate_input));
    CHECK(scale(p.shift_weight_ih_linear_to_reset_gate_input) == S(GruTensor::weight_ih_linear) / S(GruTensor::reset_gate_input));
    CHECK(scale(p.shift_weight_hh_linear_to_reset_gate_input) == S(GruTensor::weight_hh_linear) / S(GruTensor::reset_gate_input));
    CHECK(scale(p.shift_weight_ih_linear_to_new_gate_input) == S(GruTensor::weight_ih_linear) / S(GruTensor::new_gate_input));
    CHECK(scale(p.shift_reset_mul_hh_to_new_gate_input) ==
          S(GruTensor::reset_gate_output) * S(GruTensor::weight_hh_linear) / S(GruTensor::new_gate_input));
    CHECK(scale(p.shift_new_gate_output_to_h) == S(GruTensor::new_gate_output) / S(GruTensor::h));
    // S_u * S_h -> S_h
    CHECK(scale(p.shift_update_gate_output) == S(GruTensor::update_gate_output));
    // 1.0 in update_gate_output's space dequantizes to exactly 1.
    CHECK(p.q(GruTensor::update_gate_output).dequantize(p.quant_one_in_update_gate_scale) == 1.0);
  }
}

TEST_CASE("the directions of a layer share one x space (union of their ranges)") {
  const FloatGruModel model = test::random_float_gru(3, 4, 2, 2, 77u);
  const RangeProvider provider = [](int layer, int direction, GruTensor tensor, const std::string&, const TensorQuant&) {
    if (tensor == GruTensor::x) return direction == 0 ? std::pair<double, double>{-1.0, 0.5} : std::pair<double, double>{-0.25, 3.0};
    return std::pair<double, double>{-1.0 - layer, 1.0};
  };
  const QuantizedGru q = quantize_gru(model, load_bitwidth_config("int8"), provider);
  for (int l = 0; l < 2; ++l) {
    const TensorQuant& a = q.cell(l, 0).q(GruTensor::x);
    const TensorQuant& b = q.cell(l, 1).q(GruTensor::x);
    CHECK(a.shift == b.shift);
    CHECK(a.zp == b.zp);
    CHECK(quant_covers_range(a, -1.0, 3.0));
  }
}

TEST_CASE("the range method of each tensor is passed to the range provider") {
  const FloatGruModel model = test::random_float_gru(3, 2, 1, 1, 78u);
  std::map<std::string, std::string> seen;
  const RangeProvider provider = [&](int, int, GruTensor tensor, const std::string& method, const TensorQuant& spec) {
    seen[gru_tensor_name(tensor)] = method;
    CHECK(spec.bits == 8);
    return std::pair<double, double>{-1.0, 1.0};
  };
  BitwidthConfig config = load_bitwidth_config("int8");
  config.range_method = "minmax+pow2";
  config.tensors[static_cast<int>(GruTensor::x)].range_method = "ema";
  quantize_gru(model, config, provider);
  CHECK(seen.size() == kObservedGruTensors.size());
  CHECK(seen["x"] == "ema");
  CHECK(seen["h"] == "minmax+pow2");
  CHECK(seen["new_gate_input"] == "minmax+pow2");
}

}  // namespace
}  // namespace qgru
