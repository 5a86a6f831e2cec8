// The fixed-point cell (qgru/fixed/gru_cell.h) against a float64 evaluation of the same formulas (docs/FIXED_POINT.md §3
// B-1, C-1 .. C-4, and §3a's C-2a and C-3 sum of the linear_before_reset = 0 cell) for random codes, stage by stage:
// each stage's reference takes the cell's own codes of the previous stage, so the bound is the rounding of that
// stage alone, in LSBs of its output.
#include <doctest/doctest.h>

#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "qgru/fixed/gru_cell.h"
#include "qgru/runtime/overflow_check.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/gru_quant_params.h"
#include "qgru/quant/quantize_gru.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

double S(int shift) { return std::ldexp(1.0, -shift); }
double clamp_to(const TensorQuant& q, double v) { return std::min<double>(std::max<double>(v, q.qmin()), q.qmax()); }

// A config with random widths (pwl gates, so any input width works), or a preset.
BitwidthConfig random_config(std::mt19937& rng) {
  nlohmann::json j = nlohmann::json::parse(bitwidth_preset_text("int16"));
  std::uniform_int_distribution<int> bits(3, 16);
  for (auto& item : j["tensors"].items()) item.value()["bits"] = bits(rng);
  return parse_bitwidth_config(j, "random");
}

CellRanges random_ranges(std::mt19937& rng) {
  std::uniform_real_distribution<double> octave(-4.0, 4.0);
  CellRanges r{};
  for (GruTensor t : kObservedGruTensors) r[static_cast<size_t>(t)] = {-std::exp2(octave(rng)), std::exp2(octave(rng))};
  r[static_cast<size_t>(GruTensor::update_gate_output)] = {0.0, std::uniform_real_distribution<double>(0.3, 1.0)(rng)};
  r[static_cast<size_t>(GruTensor::reset_gate_output)] = {0.0, std::uniform_real_distribution<double>(0.3, 1.0)(rng)};
  r[static_cast<size_t>(GruTensor::new_gate_output)] = {-std::uniform_real_distribution<double>(0.3, 1.0)(rng), 1.0};
  return r;
}

struct Worst {
  double linear = 0, gate_input = 0, new_gate_input = 0, h = 0, reset_hidden = 0;
};

void check_cell(const GruCellQuantParams& p, std::mt19937& rng, int samples, Worst& worst) {
  const GruCellParamsView view = p.view();
  const int H = p.hidden_size;
  const TensorQuant& x = p.q(GruTensor::x);
  const TensorQuant& h = p.q(GruTensor::h);
  const TensorQuant& ih = p.q(GruTensor::weight_ih_linear);
  const TensorQuant& hh = p.q(GruTensor::weight_hh_linear);
  std::uniform_int_distribution<int> unit(0, H - 1);
  std::uniform_int_distribution<int32_t> h_code(h.qmin(), h.qmax());
  std::uniform_real_distribution<double> spread(-1.3, 1.3);
  for (int s = 0; s < samples; ++s) {
    const int j = unit(rng);
    GruCellAccumulators acc{};
    // Accumulators whose linear lands in (or a little beyond) the linear's range.
    for (int g = 0; g < 3; ++g) {
      const size_t c = static_cast<size_t>(g * H + j);
      const double ih_target = spread(rng) * (ih.qmax() - ih.qmin()) * S(ih.shift);
      acc.gemm_x[g] = std::llround(ih_target / (S(p.shift_W[c]) * S(x.shift))) + p.W_sum[c] * x.zp;
      const double hh_target = spread(rng) * (hh.qmax() - hh.qmin()) * S(hh.shift);
      acc.gemm_h[g] = std::llround(hh_target / (S(p.shift_R[c]) * S(h.shift))) + p.R_sum[c] * h.zp;
    }
    const int32_t q_h_old = h_code(rng);
    // On a failure: the element, its accumulators and every intermediate code.
    CAPTURE(j);
    CAPTURE(acc.gemm_x[0]); CAPTURE(acc.gemm_x[1]); CAPTURE(acc.gemm_x[2]);
    CAPTURE(acc.gemm_h[0]); CAPTURE(acc.gemm_h[1]); CAPTURE(acc.gemm_h[2]);
    CAPTURE(q_h_old);
    GruCellTrace tr{};
    const int32_t q_h_new = gru_cell_element(view, j, acc, q_h_old, &tr);
    REQUIRE(q_h_new == tr.q_h_new);
    CAPTURE(tr.q_weight_ih_linear[0]); CAPTURE(tr.q_weight_ih_linear[1]); CAPTURE(tr.q_weight_ih_linear[2]);
    CAPTURE(tr.q_weight_hh_linear[0]); CAPTURE(tr.q_weight_hh_linear[1]); CAPTURE(tr.q_weight_hh_linear[2]);
    CAPTURE(tr.q_update_gate_input); CAPTURE(tr.q_update_gate_output);
    CAPTURE(tr.q_reset_gate_input); CAPTURE(tr.q_reset_gate_output);
    CAPTURE(tr.q_new_gate_input); CAPTURE(tr.q_new_gate_output);
    CAPTURE(tr.q_new_gate_aligned_to_h); CAPTURE(q_h_new);

    // B-1 / B-2: real value / S_out + zp, unrounded. The cell rounds twice: the bias at the GEMM scale
    // (when it is shifted right) and the rescale, so the bound is 0.5 + 0.5 * (GEMM LSB in output LSBs).
    for (int g = 0; g < 3; ++g) {
      const size_t c = static_cast<size_t>(g * H + j);
      const double real_ih = S(p.shift_W[c]) * S(x.shift) * static_cast<double>(acc.gemm_x[g] - p.W_sum[c] * x.zp) +
                             S(p.shift_bw[c]) * p.q_bw[c];
      const double bias_error_ih = p.shift_bw_to_gemm_x[c] > 0 ? 0.5 * S(p.shift_gemm_x_to_weight_ih_linear[c]) : 0.0;
      const double e_ih = std::fabs(tr.q_weight_ih_linear[g] - clamp_to(ih, real_ih / S(ih.shift) + ih.zp));
      CHECK(e_ih <= 0.5 + bias_error_ih + 1e-9);
      const double real_hh = S(p.shift_R[c]) * S(h.shift) * static_cast<double>(acc.gemm_h[g] - p.R_sum[c] * h.zp) +
                             S(p.shift_br[c]) * p.q_br[c];
      const double bias_error_hh = p.shift_br_to_gemm_h[c] > 0 ? 0.5 * S(p.shift_gemm_h_to_weight_hh_linear[c]) : 0.0;
      const double e_hh = std::fabs(tr.q_weight_hh_linear[g] - clamp_to(hh, real_hh / S(hh.shift) + hh.zp));
      CHECK(e_hh <= 0.5 + bias_error_hh + 1e-9);
      worst.linear = std::max({worst.linear, e_ih - bias_error_ih, e_hh - bias_error_hh});
    }
    const double ih_real[3] = {(tr.q_weight_ih_linear[0] - ih.zp) * S(ih.shift), (tr.q_weight_ih_linear[1] - ih.zp) * S(ih.shift),
                               (tr.q_weight_ih_linear[2] - ih.zp) * S(ih.shift)};
    const double hh_real[3] = {(tr.q_weight_hh_linear[0] - hh.zp) * S(hh.shift), (tr.q_weight_hh_linear[1] - hh.zp) * S(hh.shift),
                               (tr.q_weight_hh_linear[2] - hh.zp) * S(hh.shift)};
    // C-1, C-2: two rounded rescales, at most 1 LSB together.
    const TensorQuant& ugi = p.q(GruTensor::update_gate_input);
    const TensorQuant& rgi = p.q(GruTensor::reset_gate_input);
    const double e_u = std::fabs(tr.q_update_gate_input - clamp_to(ugi, (ih_real[0] + hh_real[0]) / S(ugi.shift) + ugi.zp));
    const double e_r = std::fabs(tr.q_reset_gate_input - clamp_to(rgi, (ih_real[1] + hh_real[1]) / S(rgi.shift) + rgi.zp));
    CHECK(e_u <= 1.0 + 1e-9);
    CHECK(e_r <= 1.0 + 1e-9);
    worst.gate_input = std::max({worst.gate_input, e_u, e_r});
    // The activations: the cell uses the gate's own table.
    CHECK(tr.q_update_gate_output == evaluate_activation(view.update_gate, tr.q_update_gate_input));
    CHECK(tr.q_reset_gate_output == evaluate_activation(view.reset_gate, tr.q_reset_gate_input));
    CHECK(tr.q_new_gate_output == evaluate_activation(view.new_gate, tr.q_new_gate_input));
    // C-3: ih_n + r * hh_n, two rounded rescales; the linear_before_reset = 0 cell: ih_n + hh_n, hh_n being
    // R_n (r ⊙ h) + br_n (its accumulator drawn like the others), likewise two rounded rescales.
    const TensorQuant& ro = p.q(GruTensor::reset_gate_output);
    const TensorQuant& ngi = p.q(GruTensor::new_gate_input);
    const double r_real = (tr.q_reset_gate_output - ro.zp) * S(ro.shift);
    const double n_real = p.linear_before_reset ? ih_real[2] + r_real * hh_real[2] : ih_real[2] + hh_real[2];
    const double e_n = std::fabs(tr.q_new_gate_input - clamp_to(ngi, n_real / S(ngi.shift) + ngi.zp));
    CHECK(e_n <= 1.0 + 1e-9);
    if (!p.linear_before_reset) {
      // C-2a: r ⊙ h_old into h's space, one rounding (<= 0.5 LSB), saturated into h's codes; and it is what
      // gru_cell_reset_hidden gives from the same accumulators (the first half of the step).
      const double rh_real = r_real * (q_h_old - h.zp) * S(h.shift);
      const double e_rh = std::fabs(tr.q_reset_hidden - clamp_to(h, rh_real / S(h.shift) + h.zp));
      CHECK(e_rh <= 0.5 + 1e-9);
      worst.reset_hidden = std::max(worst.reset_hidden, e_rh);
      CHECK(gru_cell_reset_hidden(view, j, acc.gemm_x[1], acc.gemm_h[1], q_h_old) == tr.q_reset_hidden);
    }
    worst.new_gate_input = std::max(worst.new_gate_input, e_n);
    // C-4 (1): one rounding, same rule as std::round: exact.
    const TensorQuant& no = p.q(GruTensor::new_gate_output);
    CHECK(tr.q_new_gate_aligned_to_h == static_cast<int64_t>(std::round((tr.q_new_gate_output - no.zp) * S(no.shift) / S(h.shift))) + h.zp);
    // C-4 (2..4): u * h_old + (1 - u) * n_aligned with the exact 1.0; one rounding: <= 0.5 LSB.
    const TensorQuant& uo = p.q(GruTensor::update_gate_output);
    const double u = (tr.q_update_gate_output - uo.zp) * S(uo.shift);
    const double h_old = (q_h_old - h.zp) * S(h.shift);
    const double n_aligned = static_cast<double>(tr.q_new_gate_aligned_to_h - h.zp) * S(h.shift);
    const double e_h = std::fabs(q_h_new - clamp_to(h, (u * h_old + (1.0 - u) * n_aligned) / S(h.shift) + h.zp));
    CHECK(e_h <= 0.5 + 1e-9);
    worst.h = std::max(worst.h, e_h);
  }
}

TEST_CASE("the cell matches a float64 evaluation of the documented formulas within the rounding of each stage") {
  std::mt19937 rng(2024);
  Worst worst;
  int cells = 0, refused = 0;
  std::vector<BitwidthConfig> configs;
  for (const std::string& name : bitwidth_preset_names()) configs.push_back(load_bitwidth_config(name));
  for (int i = 0; i < 6; ++i) configs.push_back(random_config(rng));
  for (const BitwidthConfig& config : configs) {
    for (int trial = 0; trial < 4; ++trial) {
      const bool linear_before_reset = trial % 2 == 0;  // and the linear_before_reset = 0 cell
      CAPTURE(linear_before_reset);
      QuantizedGru q;
      q.config = config;
      const FloatGruModel model = test::random_float_gru(5, 7, 1, 1, static_cast<uint32_t>(rng()));
      q.input_size = 5;
      q.hidden_size = 7;
      q.num_layers = 1;
      q.cells.push_back(make_cell_quant_params(model.cell(0, 0), config, random_ranges(rng), 0, 0, linear_before_reset));
      try {
        choose_accumulators_and_prove(q, "cell test");
      } catch (const Error&) {
        ++refused;  // a random config the proof refuses is not run (the cell's contract would not hold)
        continue;
      }
      ++cells;
      CAPTURE(nlohmann::json(bitwidth_config_to_json(config)["tensors"]).dump());
      check_cell(q.cells[0], rng, 400, worst);
    }
  }
  MESSAGE("cells checked " << cells << " (refused by the proof " << refused << "); worst LSB errors: linear "
                           << worst.linear << ", sigmoid gate input " << worst.gate_input << ", new gate input "
                           << worst.new_gate_input << ", h " << worst.h << ", r x h (linear_before_reset = 0) "
                           << worst.reset_hidden);
  CHECK(cells >= 32);
  CHECK(worst.reset_hidden > 0.0);  // the C-2a check ran and saw a rounding
}

TEST_CASE("a saturated gate (u = 1 exactly) keeps h; u = 0 takes the new gate") {
  // Hand-built parameters: every space 8 bits, h shift 7 zp 0, u unsigned shift 8 zp 0.
  const BitwidthConfig config = load_bitwidth_config("int8");
  const FloatGruModel model = test::random_float_gru(2, 1, 1, 1, 3u);
  CellRanges ranges{};
  for (GruTensor t : kObservedGruTensors) ranges[static_cast<size_t>(t)] = {-1.0, 127.0 / 128.0};
  ranges[static_cast<size_t>(GruTensor::update_gate_output)] = {0.0, 255.0 / 256.0};
  GruCellQuantParams p = make_cell_quant_params(model.cell(0, 0), config, ranges, 0, 0);
  REQUIRE(p.q(GruTensor::update_gate_output).shift == 8);
  REQUIRE(p.quant_one_in_update_gate_scale == 256);
  const GruCellParamsView v = p.view();
  for (int32_t q_h_old : {-128, -37, 0, 5, 127}) {
    for (int32_t q_n : {-128, -1, 0, 64, 127}) {
      // u = 1 is code 256 (outside u8 but exact in the formula): h stays.
      CHECK(compute_hidden_state(v, 256, q_n, q_h_old, nullptr) == q_h_old);
      // u = 0: h becomes n aligned to h's scale (same shift 7, zp 0 here).
      CHECK(compute_hidden_state(v, 0, q_n, q_h_old, nullptr) == q_n);
    }
  }
}

}  // namespace
}  // namespace qgru
