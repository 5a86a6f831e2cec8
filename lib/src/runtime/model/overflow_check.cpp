#include "qgru/runtime/overflow_check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

#include "qgru/base/error.h"

namespace qgru {

namespace {

// Bounds are computed in double: every bound is a product/sum of integers below 2^40 and powers of two,
// so the relative rounding error is ~2^-52, far inside the margin between 2^62 and INT64_MAX.
constexpr double kInt64Limit = 4611686018427387904.0;  // 2^62: rshift_round / requantize contract
constexpr double kInt32Limit = 2147483647.0;           // INT32_MAX
constexpr int kMaxRightShift = 62;
constexpr int kMinLeftShift = -62;

double abs_code_max(const TensorQuant& q) {
  return std::max(std::fabs(static_cast<double>(q.qmin())), std::fabs(static_cast<double>(q.qmax())));
}
// max |q - zp| over the code range.
double diff_max(const TensorQuant& q) {
  return std::max(static_cast<double>(q.qmax()) - q.zp, static_cast<double>(q.zp) - q.qmin());
}
// Magnitude after rshift_round(value, shift): a right shift never grows it (bound + 1 covers rounding
// up of a value below 2^shift); a left shift multiplies it.
double after_shift(double bound, int shift) {
  return shift >= 0 ? std::ceil(std::ldexp(bound, -shift)) : std::ldexp(bound, -shift);
}
// multiply_rshift_round(value, multiplier, shift) for |value| <= bound: the product bound · multiplier, shifted.
// (multiplier 1: after_shift itself, the power-of-two rescale.)
double after_rescale(double bound, int32_t multiplier, int shift) { return after_shift(bound * multiplier, shift); }
// Multiplier i of a per-channel list, 1 when the list is empty (a power-of-two cell).
int32_t multiplier_at(const std::vector<int32_t>& multipliers, size_t c) { return multipliers.empty() ? 1 : multipliers[c]; }

class Prover {
 public:
  Prover(OverflowProof& proof, int layer, int direction) : proof_(proof), layer_(layer), direction_(direction) {}

  void value(const std::string& intermediate, double bound, bool int32) {
    OverflowCheck check;
    check.layer = layer_;
    check.direction = direction_;
    check.intermediate = intermediate;
    check.type = int32 ? "int32" : "int64 (|v| <= 2^62)";
    const double limit = int32 ? kInt32Limit : kInt64Limit;
    check.log2_bound = bound > 0 ? std::log2(bound) : -std::numeric_limits<double>::infinity();
    check.log2_limit = std::log2(limit);
    check.ok = bound <= limit;
    proof_.checks.push_back(check);
  }
  void shift(const std::string& name, int lo, int hi) {
    OverflowCheck check;
    check.layer = layer_;
    check.direction = direction_;
    check.intermediate = "shift " + name + " in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    check.type = "shift in [-62, 62]";
    check.log2_bound = std::max(std::fabs(static_cast<double>(lo)), std::fabs(static_cast<double>(hi)));
    check.log2_limit = 62;
    check.ok = lo >= kMinLeftShift && hi <= kMaxRightShift;
    proof_.checks.push_back(check);
  }
  // A multiplier rescale's 64-bit product |value| · multiplier (multiply_rshift_round's contract: <= 2^62).
  // Nothing to check for a power-of-two cell (multiplier 1: the value's own check covers it).
  void product(const std::string& name, double bound, int32_t multiplier, bool multiplier_scales) {
    if (multiplier_scales) value(name + " x multiplier (64-bit product before the shift)", bound * multiplier, false);
  }

 private:
  OverflowProof& proof_;
  int layer_, direction_;
};

// B-1 / B-2 for one linear (x side or h side), worst channel.
void prove_linear(Prover& prover, const std::string& side, int K, int weight_bits, const TensorQuant& input,
                  int bias_bits, const std::vector<int32_t>& shift_bias_to_gemm,
                  const std::vector<int32_t>& shift_gemm_to_linear, const TensorQuant& linear, bool int32_accumulator,
                  const std::vector<int32_t>& multiplier_bias_to_gemm, const std::vector<int32_t>& multiplier_gemm_to_linear) {
  const double w_max = std::ldexp(1.0, weight_bits - 1);
  const double b_max = std::ldexp(1.0, bias_bits - 1);
  const std::string gemm = "gemm_" + side;
  prover.value(gemm + " accumulator (sum of q_weight * q_" + side + ")", K * w_max * abs_code_max(input), int32_accumulator);
  prover.value(gemm + " zero-point compensation (row sum * zp_" + side + ")", K * w_max * std::fabs(static_cast<double>(input.zp)), false);
  const double corrected = K * w_max * diff_max(input);
  prover.value(gemm + " corrected (accumulator - compensation)", corrected, false);
  const auto [bias_lo, bias_hi] = std::minmax_element(shift_bias_to_gemm.begin(), shift_bias_to_gemm.end());
  const auto [lin_lo, lin_hi] = std::minmax_element(shift_gemm_to_linear.begin(), shift_gemm_to_linear.end());
  const std::string bias = side == "x" ? "bw" : "br";
  const std::string out = side == "x" ? "weight_ih_linear" : "weight_hh_linear";
  prover.shift("shift_" + bias + "_to_" + gemm, *bias_lo, *bias_hi);
  prover.shift("shift_" + gemm + "_to_" + out, *lin_lo, *lin_hi);
  double worst_bias = 0.0, worst_combined = 0.0, worst_rescaled = 0.0;
  double worst_bias_product = 0.0, worst_combined_product = 0.0;  // |value| · multiplier (multiplier scales)
  for (size_t c = 0; c < shift_bias_to_gemm.size(); ++c) {
    const int32_t bias_multiplier = multiplier_at(multiplier_bias_to_gemm, c);
    const int32_t linear_multiplier = multiplier_at(multiplier_gemm_to_linear, c);
    const double bias_in_gemm = after_rescale(b_max, bias_multiplier, shift_bias_to_gemm[c]);
    const double combined = corrected + bias_in_gemm;
    worst_bias = std::max(worst_bias, bias_in_gemm);
    worst_combined = std::max(worst_combined, combined);
    worst_bias_product = std::max(worst_bias_product, b_max * bias_multiplier);
    worst_combined_product = std::max(worst_combined_product, combined * linear_multiplier);
    worst_rescaled = std::max(worst_rescaled, after_rescale(combined, linear_multiplier, shift_gemm_to_linear[c]) +
                                                  std::fabs(static_cast<double>(linear.zp)));
  }
  if (!multiplier_bias_to_gemm.empty()) {
    prover.value("q_" + bias + " x multiplier (64-bit product before the shift)", worst_bias_product, false);
    prover.value(gemm + " corrected + bias x multiplier (64-bit product before the shift)", worst_combined_product, false);
  }
  prover.value("q_" + bias + " at the " + gemm + " scale", worst_bias, false);
  prover.value(gemm + " corrected + bias", worst_combined, false);
  prover.value(gemm + " rescaled to " + out + " (+ zp)", worst_rescaled, false);
}

void prove_cell(OverflowProof& proof, const GruCellQuantParams& p, const QuantizedGru* model) {
  Prover prover(proof, p.layer, p.direction);
  const TensorQuant& x = p.q(GruTensor::x);
  const TensorQuant& h = p.q(GruTensor::h);
  const TensorQuant& ih = p.q(GruTensor::weight_ih_linear);
  const TensorQuant& hh = p.q(GruTensor::weight_hh_linear);
  const bool m = p.multiplier_scales;
  if (m && (p.multiplier_bw_to_gemm_x.size() != p.shift_bw_to_gemm_x.size() ||
            p.multiplier_gemm_x_to_weight_ih_linear.size() != p.shift_bw_to_gemm_x.size() ||
            p.multiplier_br_to_gemm_h.size() != p.shift_br_to_gemm_h.size() ||
            p.multiplier_gemm_h_to_weight_hh_linear.size() != p.shift_br_to_gemm_h.size())) {
    throw Error("internal: prove_no_overflow: a multiplier-scale cell without its per-channel multipliers");
  }
  prove_linear(prover, "x", p.input_size, p.q(GruTensor::W).bits, x, p.q(GruTensor::bw).bits, p.shift_bw_to_gemm_x,
               p.shift_gemm_x_to_weight_ih_linear, ih, p.gemm_x_int32, p.multiplier_bw_to_gemm_x,
               p.multiplier_gemm_x_to_weight_ih_linear);
  prove_linear(prover, "h", p.hidden_size, p.q(GruTensor::R).bits, h, p.q(GruTensor::br).bits, p.shift_br_to_gemm_h,
               p.shift_gemm_h_to_weight_hh_linear, hh, p.gemm_h_int32, p.multiplier_br_to_gemm_h,
               p.multiplier_gemm_h_to_weight_hh_linear);

  // C-1, C-2: two rescaled linears plus the gate input's zero point.
  const struct {
    const char* name;
    int shift_ih, shift_hh;
    GruTensor input;
    int32_t multiplier_ih, multiplier_hh;
  } sigmoid_gates[] = {{"update_gate_input", p.shift_weight_ih_linear_to_update_gate_input,
                        p.shift_weight_hh_linear_to_update_gate_input, GruTensor::update_gate_input,
                        p.multiplier_weight_ih_linear_to_update_gate_input, p.multiplier_weight_hh_linear_to_update_gate_input},
                       {"reset_gate_input", p.shift_weight_ih_linear_to_reset_gate_input,
                        p.shift_weight_hh_linear_to_reset_gate_input, GruTensor::reset_gate_input,
                        p.multiplier_weight_ih_linear_to_reset_gate_input, p.multiplier_weight_hh_linear_to_reset_gate_input}};
  for (const auto& g : sigmoid_gates) {
    prover.shift(std::string("shift_weight_ih_linear_to_") + g.name, g.shift_ih, g.shift_ih);
    prover.shift(std::string("shift_weight_hh_linear_to_") + g.name, g.shift_hh, g.shift_hh);
    prover.product(std::string("weight_ih_linear - zp (to ") + g.name + ")", diff_max(ih), g.multiplier_ih, m);
    prover.product(std::string("weight_hh_linear - zp (to ") + g.name + ")", diff_max(hh), g.multiplier_hh, m);
    const double sum = after_rescale(diff_max(ih), g.multiplier_ih, g.shift_ih) +
                       after_rescale(diff_max(hh), g.multiplier_hh, g.shift_hh) + std::fabs(static_cast<double>(p.q(g.input).zp));
    prover.value(std::string(g.name) + " before saturation (ih + hh + zp)", sum, false);
  }
  if (p.linear_before_reset) {
    // C-3: r x hh product, rescaled, plus the rescaled ih_n and the zero point.
    prover.shift("shift_reset_mul_hh_to_new_gate_input", p.shift_reset_mul_hh_to_new_gate_input, p.shift_reset_mul_hh_to_new_gate_input);
    prover.shift("shift_weight_ih_linear_to_new_gate_input", p.shift_weight_ih_linear_to_new_gate_input, p.shift_weight_ih_linear_to_new_gate_input);
    const double rh_product = diff_max(p.q(GruTensor::reset_gate_output)) * diff_max(hh);
    prover.value("r x hh product (reset_gate_output - zp)(weight_hh_linear - zp)", rh_product, false);
    prover.product("r x hh product", rh_product, p.multiplier_reset_mul_hh_to_new_gate_input, m);
    prover.product("weight_ih_linear - zp (to new_gate_input)", diff_max(ih), p.multiplier_weight_ih_linear_to_new_gate_input, m);
    const double new_sum = after_rescale(rh_product, p.multiplier_reset_mul_hh_to_new_gate_input, p.shift_reset_mul_hh_to_new_gate_input) +
                           after_rescale(diff_max(ih), p.multiplier_weight_ih_linear_to_new_gate_input,
                                         p.shift_weight_ih_linear_to_new_gate_input) +
                           std::fabs(static_cast<double>(p.q(GruTensor::new_gate_input).zp));
    prover.value("new_gate_input before saturation (ih + r x hh + zp)", new_sum, false);
  } else {
    // C-2a: r x h product rescaled into h's space (+ zp_h), saturated into h's codes: the second GEMM's operand
    // is in h's code range, so B-2's bounds above (gemm_h accumulator, compensation, bias, rescale) hold for
    // R_n (r x h) as proven for R h, channel for channel.
    prover.shift("shift_reset_mul_h_to_h", p.shift_reset_mul_h_to_h, p.shift_reset_mul_h_to_h);
    const double rh_product = diff_max(p.q(GruTensor::reset_gate_output)) * diff_max(h);
    prover.value("r x h product (reset_gate_output - zp)(h - zp)", rh_product, false);
    prover.product("r x h product", rh_product, p.multiplier_reset_mul_h_to_h, m);
    prover.value("r x h rescaled to h (+ zp_h)",
                 after_rescale(rh_product, p.multiplier_reset_mul_h_to_h, p.shift_reset_mul_h_to_h) + std::fabs(static_cast<double>(h.zp)),
                 false);
    // C-3: C-1's sum with the new gate's shifts.
    prover.shift("shift_weight_ih_linear_to_new_gate_input", p.shift_weight_ih_linear_to_new_gate_input, p.shift_weight_ih_linear_to_new_gate_input);
    prover.shift("shift_weight_hh_linear_to_new_gate_input", p.shift_weight_hh_linear_to_new_gate_input,
                 p.shift_weight_hh_linear_to_new_gate_input);
    prover.product("weight_ih_linear - zp (to new_gate_input)", diff_max(ih), p.multiplier_weight_ih_linear_to_new_gate_input, m);
    prover.product("weight_hh_linear - zp (to new_gate_input)", diff_max(hh), p.multiplier_weight_hh_linear_to_new_gate_input, m);
    const double new_sum = after_rescale(diff_max(ih), p.multiplier_weight_ih_linear_to_new_gate_input,
                                         p.shift_weight_ih_linear_to_new_gate_input) +
                           after_rescale(diff_max(hh), p.multiplier_weight_hh_linear_to_new_gate_input,
                                         p.shift_weight_hh_linear_to_new_gate_input) +
                           std::fabs(static_cast<double>(p.q(GruTensor::new_gate_input).zp));
    prover.value("new_gate_input before saturation (ih + hh + zp)", new_sum, false);
  }
  // C-4
  prover.shift("shift_new_gate_output_to_h", p.shift_new_gate_output_to_h, p.shift_new_gate_output_to_h);
  prover.shift("shift_update_gate_output", p.shift_update_gate_output, p.shift_update_gate_output);
  prover.product("new_gate_output - zp", diff_max(p.q(GruTensor::new_gate_output)), p.multiplier_new_gate_output_to_h, m);
  const double n_aligned_diff =
      after_rescale(diff_max(p.q(GruTensor::new_gate_output)), p.multiplier_new_gate_output_to_h, p.shift_new_gate_output_to_h);
  prover.value("q_new_gate_aligned_to_h", n_aligned_diff + std::fabs(static_cast<double>(h.zp)), false);
  const TensorQuant& u = p.q(GruTensor::update_gate_output);
  const double old_product = diff_max(u) * diff_max(h);
  prover.value("u x h_old product", old_product, false);
  const double one = static_cast<double>(p.quant_one_in_update_gate_scale);
  const double one_minus_u = std::max(std::fabs(one - u.qmin()), std::fabs(one - u.qmax()));
  const double new_product = one_minus_u * n_aligned_diff;
  prover.value("(1 - u) x n_aligned product", new_product, false);
  const double combined = old_product + new_product;
  prover.value("h update sum (u x h_old + (1 - u) x n_aligned)", combined, false);
  prover.product("h update sum", combined, p.multiplier_update_gate_output, m);
  prover.value("h update rescaled to h (+ zp_h)",
               after_rescale(combined, p.multiplier_update_gate_output, p.shift_update_gate_output) + std::fabs(static_cast<double>(h.zp)),
               false);

  // The executor: h codes of this cell requantized into the next layer's x space.
  if (model && p.layer + 1 < model->num_layers) {
    const TensorQuant& next_x = model->cell(p.layer + 1, 0).q(GruTensor::x);
    const MultiplierRescale rescale = h_to_next_x_rescale(h, next_x);
    prover.shift("shift_h_to_next_layer_x", rescale.shift, rescale.shift);
    prover.product("h - zp_h (to the next layer's x)", diff_max(h), rescale.multiplier, rescale.multiplier != 1);
    prover.value("h requantized to the next layer's x (+ zp)",
                 after_rescale(diff_max(h), rescale.multiplier, rescale.shift) + std::fabs(static_cast<double>(next_x.zp)), false);
  }
}

}  // namespace

bool OverflowProof::ok() const {
  return std::all_of(checks.begin(), checks.end(), [](const OverflowCheck& c) { return c.ok; });
}

std::string OverflowProof::first_failure() const {
  for (const OverflowCheck& c : checks) {
    if (c.ok) continue;
    char figures[96];
    std::snprintf(figures, sizeof figures, "bound 2^%.2f exceeds 2^%.2f", c.log2_bound, c.log2_limit);
    return "layer " + std::to_string(c.layer) + " direction " + std::to_string(c.direction) + ": " + c.intermediate +
           ": " + figures + " (" + c.type + ")";
  }
  return "";
}

std::vector<const OverflowCheck*> OverflowProof::tightest_checks(int count) const {
  std::vector<const OverflowCheck*> values;
  for (const OverflowCheck& c : checks) {
    if (c.type.rfind("shift", 0) != 0 && std::isfinite(c.log2_bound)) values.push_back(&c);
  }
  std::stable_sort(values.begin(), values.end(), [](const OverflowCheck* a, const OverflowCheck* b) {
    return a->log2_limit - a->log2_bound < b->log2_limit - b->log2_bound;
  });
  if (values.size() > static_cast<size_t>(std::max(count, 0))) values.resize(static_cast<size_t>(std::max(count, 0)));
  return values;
}

std::string OverflowProof::tightest(int count) const {
  std::string text;
  char line[96];
  for (const OverflowCheck* check : tightest_checks(count)) {
    const OverflowCheck& c = *check;
    std::snprintf(line, sizeof line, ": 2^%.2f of 2^%.2f (%.1f bits spare)\n", c.log2_bound, c.log2_limit, c.log2_limit - c.log2_bound);
    text += "  layer " + std::to_string(c.layer) + " direction " + std::to_string(c.direction) + ", " + c.intermediate +
            " [" + c.type + "]" + line;
  }
  return text;
}

bool gemm_operands_fit_int8(const QuantizedGru& model) {
  for (const GruCellQuantParams& p : model.cells) {
    if (p.q(GruTensor::W).bits > 8 || p.q(GruTensor::R).bits > 8) return false;
    if (!codes_fit_int8(p.q(GruTensor::x)) || !codes_fit_int8(p.q(GruTensor::h))) return false;
  }
  return true;
}

double gemm_accumulator_bound(const GruCellQuantParams& p, bool x_side) {
  const TensorQuant& input = p.q(x_side ? GruTensor::x : GruTensor::h);
  const int weight_bits = p.q(x_side ? GruTensor::W : GruTensor::R).bits;
  const int K = x_side ? p.input_size : p.hidden_size;
  return K * std::ldexp(1.0, weight_bits - 1) * abs_code_max(input);
}

OverflowProof prove_no_overflow(const QuantizedGru& model) {
  OverflowProof proof;
  for (const GruCellQuantParams& p : model.cells) prove_cell(proof, p, &model);
  return proof;
}

}  // namespace qgru
