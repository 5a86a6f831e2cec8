// The fixed-point cell (qgru/fixed/gru_cell.h) against a float64 evaluation of the same formulas (docs/FIXED_POINT.md §3
// B-1, C-1 .. C-4, and §3a's C-2a and C-3 sum of the linear_before_reset = 0 cell) for random codes, stage by stage:
// each stage's reference takes the cell's own codes of the previous stage, so the bound is the rounding of that
// stage alone, in LSBs of its output.
#include <doctest/doctest.h>

#include <algorithm>
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

// Multiplier-scale cells (docs/FIXED_POINT.md §1a): the reference uses the real scales; each rescale's multiplier
// encodes its ratio within 2^-bits (at least 2^-21 here), which adds at most |value in output LSBs| · 2^-21 to the
// stage's rounding: `slack` covers it (the values stay below 2^18 LSBs).
void check_cell(const GruCellQuantParams& p, std::mt19937& rng, int samples, Worst& worst) {
  const double slack = p.multiplier_scales ? std::ldexp(1.0, -3) : 1e-9;
  auto scale_of = [&](GruTensor t, size_t c) { return p.channel_quant(t, static_cast<int>(c)).scale(); };
  // A corrected GEMM sum Σ q_W (q_x - zp_x) that codes can produce: |.| <= K · 2^(bits_W - 1) · max |q_x - zp_x| (the
  // bound the overflow proof and the multipliers' bits are made for; a power-of-two cell shifts any int64 exactly).
  auto corrected_in_reach = [&](double value, bool x_side) {
    const TensorQuant& in = x_side ? p.q(GruTensor::x) : p.q(GruTensor::h);
    const double diff = std::max(static_cast<double>(in.qmax()) - in.zp, static_cast<double>(in.zp) - in.qmin());
    const double reach = (x_side ? p.input_size : p.hidden_size) * std::ldexp(1.0, p.q(x_side ? GruTensor::W : GruTensor::R).bits - 1) * diff;
    return std::clamp(value, -reach, reach);
  };
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
      const double ih_target = spread(rng) * (ih.qmax() - ih.qmin()) * ih.scale();
      acc.gemm_x[g] = std::llround(corrected_in_reach(ih_target / (scale_of(GruTensor::W, c) * x.scale()), true)) + p.W_sum[c] * x.zp;
      const double hh_target = spread(rng) * (hh.qmax() - hh.qmin()) * hh.scale();
      acc.gemm_h[g] = std::llround(corrected_in_reach(hh_target / (scale_of(GruTensor::R, c) * h.scale()), false)) + p.R_sum[c] * h.zp;
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
      const double gemm_x_scale = scale_of(GruTensor::W, c) * x.scale();
      const double real_ih = gemm_x_scale * static_cast<double>(acc.gemm_x[g] - p.W_sum[c] * x.zp) + scale_of(GruTensor::bw, c) * p.q_bw[c];
      // the bias's own rounding at the GEMM scale, in output LSBs (a real rounding whenever the bias is shifted right)
      const double bias_error_ih = p.multiplier_scales || p.shift_bw_to_gemm_x[c] > 0 ? 0.5 * gemm_x_scale / ih.scale() : 0.0;
      const double e_ih = std::fabs(tr.q_weight_ih_linear[g] - clamp_to(ih, real_ih / ih.scale() + ih.zp));
      CHECK(e_ih <= 0.5 + bias_error_ih + slack);
      const double gemm_h_scale = scale_of(GruTensor::R, c) * h.scale();
      const double real_hh = gemm_h_scale * static_cast<double>(acc.gemm_h[g] - p.R_sum[c] * h.zp) + scale_of(GruTensor::br, c) * p.q_br[c];
      const double bias_error_hh = p.multiplier_scales || p.shift_br_to_gemm_h[c] > 0 ? 0.5 * gemm_h_scale / hh.scale() : 0.0;
      const double e_hh = std::fabs(tr.q_weight_hh_linear[g] - clamp_to(hh, real_hh / hh.scale() + hh.zp));
      CHECK(e_hh <= 0.5 + bias_error_hh + slack);
      worst.linear = std::max({worst.linear, e_ih - bias_error_ih, e_hh - bias_error_hh});
    }
    const double ih_real[3] = {(tr.q_weight_ih_linear[0] - ih.zp) * ih.scale(), (tr.q_weight_ih_linear[1] - ih.zp) * ih.scale(),
                               (tr.q_weight_ih_linear[2] - ih.zp) * ih.scale()};
    const double hh_real[3] = {(tr.q_weight_hh_linear[0] - hh.zp) * hh.scale(), (tr.q_weight_hh_linear[1] - hh.zp) * hh.scale(),
                               (tr.q_weight_hh_linear[2] - hh.zp) * hh.scale()};
    // C-1, C-2: two rounded rescales, at most 1 LSB together.
    const TensorQuant& ugi = p.q(GruTensor::update_gate_input);
    const TensorQuant& rgi = p.q(GruTensor::reset_gate_input);
    const double e_u = std::fabs(tr.q_update_gate_input - clamp_to(ugi, (ih_real[0] + hh_real[0]) / ugi.scale() + ugi.zp));
    const double e_r = std::fabs(tr.q_reset_gate_input - clamp_to(rgi, (ih_real[1] + hh_real[1]) / rgi.scale() + rgi.zp));
    CHECK(e_u <= 1.0 + slack);
    CHECK(e_r <= 1.0 + slack);
    worst.gate_input = std::max({worst.gate_input, e_u, e_r});
    // The activations: the cell uses the gate's own table.
    CHECK(tr.q_update_gate_output == evaluate_activation(view.update_gate, tr.q_update_gate_input));
    CHECK(tr.q_reset_gate_output == evaluate_activation(view.reset_gate, tr.q_reset_gate_input));
    CHECK(tr.q_new_gate_output == evaluate_activation(view.new_gate, tr.q_new_gate_input));
    // C-3: ih_n + r * hh_n, two rounded rescales; the linear_before_reset = 0 cell: ih_n + hh_n, hh_n being
    // R_n (r ⊙ h) + br_n (its accumulator drawn like the others), likewise two rounded rescales.
    const TensorQuant& ro = p.q(GruTensor::reset_gate_output);
    const TensorQuant& ngi = p.q(GruTensor::new_gate_input);
    const double r_real = (tr.q_reset_gate_output - ro.zp) * ro.scale();
    const double n_real = p.linear_before_reset ? ih_real[2] + r_real * hh_real[2] : ih_real[2] + hh_real[2];
    const double e_n = std::fabs(tr.q_new_gate_input - clamp_to(ngi, n_real / ngi.scale() + ngi.zp));
    CHECK(e_n <= 1.0 + slack);
    if (!p.linear_before_reset) {
      // C-2a: r ⊙ h_old into h's space, one rounding (<= 0.5 LSB), saturated into h's codes; and it is what
      // gru_cell_reset_hidden gives from the same accumulators (the first half of the step).
      const double rh_real = r_real * (q_h_old - h.zp) * h.scale();
      const double e_rh = std::fabs(tr.q_reset_hidden - clamp_to(h, rh_real / h.scale() + h.zp));
      CHECK(e_rh <= 0.5 + slack);
      worst.reset_hidden = std::max(worst.reset_hidden, e_rh);
      CHECK(gru_cell_reset_hidden(view, j, acc.gemm_x[1], acc.gemm_h[1], q_h_old) == tr.q_reset_hidden);
    }
    worst.new_gate_input = std::max(worst.new_gate_input, e_n);
    // C-4 (1): one rounding, same rule as std::round: exact for powers of two (within the slack for multipliers).
    const TensorQuant& no = p.q(GruTensor::new_gate_output);
    const double aligned_real = (tr.q_new_gate_output - no.zp) * no.scale() / h.scale();
    if (p.multiplier_scales) {
      CHECK(std::fabs(static_cast<double>(tr.q_new_gate_aligned_to_h - h.zp) - aligned_real) <= 0.5 + slack);
    } else {
      CHECK(tr.q_new_gate_aligned_to_h == static_cast<int64_t>(std::round(aligned_real)) + h.zp);
    }
    // C-4 (2..4): u * h_old + (1 - u) * n_aligned with the cell's 1.0 (quant_one_in_update_gate_scale: exactly 1 for a
    // power of two, round(1 / S_u) codes for a real scale); one rounding: <= 0.5 LSB.
    const TensorQuant& uo = p.q(GruTensor::update_gate_output);
    const double u = (tr.q_update_gate_output - uo.zp) * uo.scale();
    const double one_minus_u = static_cast<double>(p.quant_one_in_update_gate_scale - tr.q_update_gate_output) * uo.scale();
    const double h_old = (q_h_old - h.zp) * h.scale();
    const double n_aligned = static_cast<double>(tr.q_new_gate_aligned_to_h - h.zp) * h.scale();
    const double e_h = std::fabs(q_h_new - clamp_to(h, (u * h_old + one_minus_u * n_aligned) / h.scale() + h.zp));
    CHECK(e_h <= 0.5 + slack);
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
  // Multiplier scales (docs/FIXED_POINT.md §1a): the presets and the first three random configs again.
  const size_t multiplier_configs = bitwidth_preset_names().size() + 3;
  for (size_t i = 0; i < multiplier_configs; ++i) {
    BitwidthConfig config = configs[i];
    for (TensorBitwidth& t : config.tensors) t.multiplier_scale = true;
    configs.push_back(config);
  }
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
