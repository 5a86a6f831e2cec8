#include "qgru/runtime/cell_quant_params.h"

#include <algorithm>
#include <cmath>

#include "qgru/base/error.h"

namespace qgru {

namespace {

CodeSpace code_space(const TensorQuant& quant) { return CodeSpace{quant.zp, quant.qmin(), quant.qmax()}; }

}  // namespace

TensorQuant GruCellQuantParams::channel_quant(GruTensor tensor, int c) const {
  TensorQuant result = q(tensor);
  const std::vector<int32_t>* shifts = tensor == GruTensor::W    ? &shift_W
                                       : tensor == GruTensor::R  ? &shift_R
                                       : tensor == GruTensor::bw ? &shift_bw
                                       : tensor == GruTensor::br ? &shift_br
                                                                 : nullptr;
  if (!shifts) throw Error(std::string("internal: channel_quant of activation tensor ") + gru_tensor_name(tensor));
  result.shift = shifts->at(static_cast<size_t>(c));
  result.zp = 0;
  const std::vector<double>* mantissas = tensor == GruTensor::W    ? &mantissa_W
                                         : tensor == GruTensor::R  ? &mantissa_R
                                         : tensor == GruTensor::bw ? &mantissa_bw
                                                                   : &mantissa_br;
  result.mantissa = mantissas->empty() ? 1.0 : mantissas->at(static_cast<size_t>(c));
  return result;
}

GruCellParamsView GruCellQuantParams::view() const {
  GruCellParamsView v{};
  v.hidden_size = hidden_size;
  v.W_sum = W_sum.data();
  v.q_bw = q_bw.data();
  v.shift_bw_to_gemm_x = shift_bw_to_gemm_x.data();
  v.shift_gemm_x_to_weight_ih_linear = shift_gemm_x_to_weight_ih_linear.data();
  v.zp_x = q(GruTensor::x).zp;
  v.R_sum = R_sum.data();
  v.q_br = q_br.data();
  v.shift_br_to_gemm_h = shift_br_to_gemm_h.data();
  v.shift_gemm_h_to_weight_hh_linear = shift_gemm_h_to_weight_hh_linear.data();
  v.h = code_space(q(GruTensor::h));
  v.weight_ih_linear = code_space(q(GruTensor::weight_ih_linear));
  v.weight_hh_linear = code_space(q(GruTensor::weight_hh_linear));
  v.update_gate_input = code_space(q(GruTensor::update_gate_input));
  v.reset_gate_input = code_space(q(GruTensor::reset_gate_input));
  v.new_gate_input = code_space(q(GruTensor::new_gate_input));
  v.zp_update_gate_output = q(GruTensor::update_gate_output).zp;
  v.zp_reset_gate_output = q(GruTensor::reset_gate_output).zp;
  v.zp_new_gate_output = q(GruTensor::new_gate_output).zp;
  v.shift_weight_ih_linear_to_update_gate_input = shift_weight_ih_linear_to_update_gate_input;
  v.shift_weight_hh_linear_to_update_gate_input = shift_weight_hh_linear_to_update_gate_input;
  v.shift_weight_ih_linear_to_reset_gate_input = shift_weight_ih_linear_to_reset_gate_input;
  v.shift_weight_hh_linear_to_reset_gate_input = shift_weight_hh_linear_to_reset_gate_input;
  v.shift_weight_ih_linear_to_new_gate_input = shift_weight_ih_linear_to_new_gate_input;
  v.shift_reset_mul_hh_to_new_gate_input = shift_reset_mul_hh_to_new_gate_input;
  v.reset_before_linear = !linear_before_reset;
  v.shift_reset_mul_h_to_h = shift_reset_mul_h_to_h;
  v.shift_weight_hh_linear_to_new_gate_input = shift_weight_hh_linear_to_new_gate_input;
  v.quant_one_in_update_gate_scale = quant_one_in_update_gate_scale;
  v.shift_new_gate_output_to_h = shift_new_gate_output_to_h;
  v.shift_update_gate_output = shift_update_gate_output;
  v.multiplier_scales = multiplier_scales;
  v.multiplier_bw_to_gemm_x = multiplier_bw_to_gemm_x.empty() ? nullptr : multiplier_bw_to_gemm_x.data();
  v.multiplier_gemm_x_to_weight_ih_linear =
      multiplier_gemm_x_to_weight_ih_linear.empty() ? nullptr : multiplier_gemm_x_to_weight_ih_linear.data();
  v.multiplier_br_to_gemm_h = multiplier_br_to_gemm_h.empty() ? nullptr : multiplier_br_to_gemm_h.data();
  v.multiplier_gemm_h_to_weight_hh_linear =
      multiplier_gemm_h_to_weight_hh_linear.empty() ? nullptr : multiplier_gemm_h_to_weight_hh_linear.data();
  v.multiplier_weight_ih_linear_to_update_gate_input = multiplier_weight_ih_linear_to_update_gate_input;
  v.multiplier_weight_hh_linear_to_update_gate_input = multiplier_weight_hh_linear_to_update_gate_input;
  v.multiplier_weight_ih_linear_to_reset_gate_input = multiplier_weight_ih_linear_to_reset_gate_input;
  v.multiplier_weight_hh_linear_to_reset_gate_input = multiplier_weight_hh_linear_to_reset_gate_input;
  v.multiplier_weight_ih_linear_to_new_gate_input = multiplier_weight_ih_linear_to_new_gate_input;
  v.multiplier_reset_mul_hh_to_new_gate_input = multiplier_reset_mul_hh_to_new_gate_input;
  v.multiplier_reset_mul_h_to_h = multiplier_reset_mul_h_to_h;
  v.multiplier_weight_hh_linear_to_new_gate_input = multiplier_weight_hh_linear_to_new_gate_input;
  v.multiplier_new_gate_output_to_h = multiplier_new_gate_output_to_h;
  v.multiplier_update_gate_output = multiplier_update_gate_output;
  v.update_gate = activation[static_cast<int>(GateKind::Update)].view();
  v.reset_gate = activation[static_cast<int>(GateKind::Reset)].view();
  v.new_gate = activation[static_cast<int>(GateKind::New)].view();
  return v;
}

MultiplierRescale multiplier_rescale(double ratio, double input_bound) {
  if (!(ratio > 0.0) || !std::isfinite(ratio)) throw Error("internal: multiplier_rescale of the ratio " + std::to_string(ratio));
  int bound_exponent = 0;
  std::frexp(std::max(input_bound, 1.0), &bound_exponent);  // input_bound < 2^bound_exponent
  const int bits = std::clamp(62 - bound_exponent, 1, 31);  // input_bound · 2^bits <= 2^62, multiplier < 2^31
  int exponent = 0;
  const double fraction = std::frexp(ratio, &exponent);  // ratio = fraction · 2^exponent, fraction in [0.5, 1)
  // round(fraction · 2^bits) half away from zero: the product is exact (a power-of-two scaling), + 0.5 too (< 2^52)
  int64_t multiplier = static_cast<int64_t>(std::floor(std::ldexp(fraction, bits) + 0.5));
  if (multiplier == (int64_t{1} << bits)) {  // rounded up to 2^bits: the same value as 2^(bits-1) · 2^(exponent+1-bits)
    multiplier >>= 1;
    ++exponent;
  }
  return {static_cast<int32_t>(multiplier), bits - exponent};
}

MultiplierRescale h_to_next_x_rescale(const TensorQuant& h, const TensorQuant& next_x) {
  if (h.power_of_two() && next_x.power_of_two()) return {1, h.shift - next_x.shift};
  return multiplier_rescale(h.scale() / next_x.scale(), static_cast<double>(h.qmax()) - h.qmin());
}

namespace {

// A code span q_max - q_min: a bound on |q - zp| for every code q of the tensor.
double span(const TensorQuant& q) { return static_cast<double>(q.qmax()) - q.qmin(); }

// The multiplier-scale derivation (docs/FIXED_POINT.md §1a): every rescale from the ratio of its real scales, in
// the order written there, the multiplier's bits from a bound on its input (code spans, never weight values).
void compute_multiplier_rescales(GruCellQuantParams& p) {
  const size_t channels = static_cast<size_t>(3 * p.hidden_size);
  const TensorQuant& x = p.q(GruTensor::x);
  const TensorQuant& h = p.q(GruTensor::h);
  const TensorQuant& ih = p.q(GruTensor::weight_ih_linear);
  const TensorQuant& hh = p.q(GruTensor::weight_hh_linear);
  auto set = [](const MultiplierRescale& r, int32_t& multiplier, int32_t& shift) {
    multiplier = r.multiplier;
    shift = r.shift;
  };
  struct Linear {
    GruTensor weight, bias;
    const TensorQuant& input;
    const TensorQuant& output;
    int K;
    std::vector<int32_t>&multiplier_bias, &shift_bias, &multiplier_out, &shift_out;
  };
  Linear linears[] = {{GruTensor::W, GruTensor::bw, x, ih, p.input_size, p.multiplier_bw_to_gemm_x, p.shift_bw_to_gemm_x,
                       p.multiplier_gemm_x_to_weight_ih_linear, p.shift_gemm_x_to_weight_ih_linear},
                      {GruTensor::R, GruTensor::br, h, hh, p.hidden_size, p.multiplier_br_to_gemm_h, p.shift_br_to_gemm_h,
                       p.multiplier_gemm_h_to_weight_hh_linear, p.shift_gemm_h_to_weight_hh_linear}};
  for (Linear& l : linears) {
    l.multiplier_bias.resize(channels);
    l.multiplier_out.resize(channels);
    const double bias_bound = std::ldexp(1.0, p.q(l.bias).bits - 1);
    const double corrected_bound = l.K * std::ldexp(1.0, p.q(l.weight).bits - 1) * span(l.input);
    for (size_t c = 0; c < channels; ++c) {
      const double gemm_scale = p.channel_quant(l.weight, static_cast<int>(c)).scale() * l.input.scale();  // S_W[c]·S_x
      const double bias_ratio = p.channel_quant(l.bias, static_cast<int>(c)).scale() / gemm_scale;
      set(multiplier_rescale(bias_ratio, bias_bound), l.multiplier_bias[c], l.shift_bias[c]);
      const double combined_bound = corrected_bound + std::ceil(bias_bound * bias_ratio) + 1.0;
      set(multiplier_rescale(gemm_scale / l.output.scale(), combined_bound), l.multiplier_out[c], l.shift_out[c]);
    }
  }
  const struct {
    GruTensor from, to;
    int32_t &multiplier, &shift;
  } gate_terms[] = {
      {GruTensor::weight_ih_linear, GruTensor::update_gate_input, p.multiplier_weight_ih_linear_to_update_gate_input,
       p.shift_weight_ih_linear_to_update_gate_input},
      {GruTensor::weight_hh_linear, GruTensor::update_gate_input, p.multiplier_weight_hh_linear_to_update_gate_input,
       p.shift_weight_hh_linear_to_update_gate_input},
      {GruTensor::weight_ih_linear, GruTensor::reset_gate_input, p.multiplier_weight_ih_linear_to_reset_gate_input,
       p.shift_weight_ih_linear_to_reset_gate_input},
      {GruTensor::weight_hh_linear, GruTensor::reset_gate_input, p.multiplier_weight_hh_linear_to_reset_gate_input,
       p.shift_weight_hh_linear_to_reset_gate_input},
      {GruTensor::weight_ih_linear, GruTensor::new_gate_input, p.multiplier_weight_ih_linear_to_new_gate_input,
       p.shift_weight_ih_linear_to_new_gate_input}};
  for (const auto& t : gate_terms) {
    set(multiplier_rescale(p.q(t.from).scale() / p.q(t.to).scale(), span(p.q(t.from))), t.multiplier, t.shift);
  }
  const TensorQuant& r = p.q(GruTensor::reset_gate_output);
  const TensorQuant& new_gate_input = p.q(GruTensor::new_gate_input);
  // (every scalar multiplier is 1 here, set by compute_derived_shifts: the other variant's stay so)
  p.shift_reset_mul_hh_to_new_gate_input = p.shift_reset_mul_h_to_h = p.shift_weight_hh_linear_to_new_gate_input = 0;
  if (p.linear_before_reset) {  // C-3: (S_r · S_hh) / S_new_gate_input
    set(multiplier_rescale((r.scale() * hh.scale()) / new_gate_input.scale(), span(r) * span(hh)),
        p.multiplier_reset_mul_hh_to_new_gate_input, p.shift_reset_mul_hh_to_new_gate_input);
  } else {  // C-2a: S_r · S_h -> S_h is the ratio S_r; C-3's sum: S_hh / S_new_gate_input
    set(multiplier_rescale(r.scale(), span(r) * span(h)), p.multiplier_reset_mul_h_to_h, p.shift_reset_mul_h_to_h);
    set(multiplier_rescale(hh.scale() / new_gate_input.scale(), span(hh)), p.multiplier_weight_hh_linear_to_new_gate_input,
        p.shift_weight_hh_linear_to_new_gate_input);
  }
  // C-4: the new gate into h's scale, then the sum at S_u · S_h into S_h (the ratio S_u).
  const TensorQuant& n = p.q(GruTensor::new_gate_output);
  const TensorQuant& u = p.q(GruTensor::update_gate_output);
  const double n_to_h = n.scale() / h.scale();
  set(multiplier_rescale(n_to_h, span(n)), p.multiplier_new_gate_output_to_h, p.shift_new_gate_output_to_h);
  const double one = static_cast<double>(p.quant_one_in_update_gate_scale);
  const double one_minus_u = std::max(std::fabs(one - u.qmin()), std::fabs(one - u.qmax()));
  const double sum_bound = span(u) * span(h) + one_minus_u * (std::ceil(span(n) * n_to_h) + 1.0);
  set(multiplier_rescale(u.scale(), sum_bound), p.multiplier_update_gate_output, p.shift_update_gate_output);
}

}  // namespace

void compute_derived_shifts(GruCellQuantParams& p) {
  const int C = p.input_size;
  const int H = p.hidden_size;
  const size_t channels = static_cast<size_t>(3 * H);
  const int shift_x = p.q(GruTensor::x).shift;
  const int shift_h = p.q(GruTensor::h).shift;
  const int shift_weight_ih_linear = p.q(GruTensor::weight_ih_linear).shift;
  const int shift_weight_hh_linear = p.q(GruTensor::weight_hh_linear).shift;

  // Step A: row sums (exact: |W_sum| <= C * 2^15 fits int64 for any C the model can have).
  p.W_sum.assign(channels, 0);
  p.R_sum.assign(channels, 0);
  for (size_t c = 0; c < channels; ++c) {
    for (int k = 0; k < C; ++k) p.W_sum[c] += p.q_W[c * C + k];
    for (int k = 0; k < H; ++k) p.R_sum[c] += p.q_R[c * H + k];
  }
  // Linear layer (bias first moved to the GEMM space).
  p.shift_gemm_x_to_weight_ih_linear.resize(channels);
  p.shift_bw_to_gemm_x.resize(channels);
  p.shift_gemm_h_to_weight_hh_linear.resize(channels);
  p.shift_br_to_gemm_h.resize(channels);
  for (size_t c = 0; c < channels; ++c) {
    p.shift_gemm_x_to_weight_ih_linear[c] = p.shift_W[c] + shift_x - shift_weight_ih_linear;
    p.shift_bw_to_gemm_x[c] = p.shift_bw[c] - (p.shift_W[c] + shift_x);
    p.shift_gemm_h_to_weight_hh_linear[c] = p.shift_R[c] + shift_h - shift_weight_hh_linear;
    p.shift_br_to_gemm_h[c] = p.shift_br[c] - (p.shift_R[c] + shift_h);
  }
  // Gates.
  const int shift_update_gate_input = p.q(GruTensor::update_gate_input).shift;
  const int shift_reset_gate_input = p.q(GruTensor::reset_gate_input).shift;
  const int shift_new_gate_input = p.q(GruTensor::new_gate_input).shift;
  p.shift_weight_ih_linear_to_update_gate_input = shift_weight_ih_linear - shift_update_gate_input;
  p.shift_weight_hh_linear_to_update_gate_input = shift_weight_hh_linear - shift_update_gate_input;
  p.shift_weight_ih_linear_to_reset_gate_input = shift_weight_ih_linear - shift_reset_gate_input;
  p.shift_weight_hh_linear_to_reset_gate_input = shift_weight_hh_linear - shift_reset_gate_input;
  p.shift_weight_ih_linear_to_new_gate_input = shift_weight_ih_linear - shift_new_gate_input;
  const int shift_reset_gate_output = p.q(GruTensor::reset_gate_output).shift;
  if (p.linear_before_reset) {
    p.shift_reset_mul_hh_to_new_gate_input = (shift_reset_gate_output + shift_weight_hh_linear) - shift_new_gate_input;
    p.shift_reset_mul_h_to_h = 0;
    p.shift_weight_hh_linear_to_new_gate_input = 0;
  } else {  // r ⊙ h into h's space (C-2a), then C-3 as C-1's sum
    p.shift_reset_mul_hh_to_new_gate_input = 0;
    p.shift_reset_mul_h_to_h = (shift_reset_gate_output + shift_h) - shift_h;
    p.shift_weight_hh_linear_to_new_gate_input = shift_weight_hh_linear - shift_new_gate_input;
  }
  // Hidden state update.
  const TensorQuant& u = p.q(GruTensor::update_gate_output);
  // round(1.0 / S_u): for a power of two round(2^shift_u), exact for every shift in [kMinShift, kMaxShift] (a power
  // of two, or 0/1 below 2^-1); for a real scale round(2^shift_u / mantissa_u), one correctly rounded division.
  p.quant_one_in_update_gate_scale = static_cast<int64_t>(std::round(u.to_steps(1.0))) + u.zp;
  p.shift_new_gate_output_to_h = p.q(GruTensor::new_gate_output).shift - shift_h;
  p.shift_update_gate_output = u.shift;

  // Multipliers: all 1 for a power-of-two cell; a multiplier-scale cell replaces every rescale above.
  p.multiplier_gemm_x_to_weight_ih_linear.clear();
  p.multiplier_bw_to_gemm_x.clear();
  p.multiplier_gemm_h_to_weight_hh_linear.clear();
  p.multiplier_br_to_gemm_h.clear();
  for (int32_t GruCellQuantParams::*m :
       {&GruCellQuantParams::multiplier_weight_ih_linear_to_update_gate_input, &GruCellQuantParams::multiplier_weight_hh_linear_to_update_gate_input,
        &GruCellQuantParams::multiplier_weight_ih_linear_to_reset_gate_input, &GruCellQuantParams::multiplier_weight_hh_linear_to_reset_gate_input,
        &GruCellQuantParams::multiplier_weight_ih_linear_to_new_gate_input, &GruCellQuantParams::multiplier_reset_mul_hh_to_new_gate_input,
        &GruCellQuantParams::multiplier_reset_mul_h_to_h, &GruCellQuantParams::multiplier_weight_hh_linear_to_new_gate_input,
        &GruCellQuantParams::multiplier_new_gate_output_to_h, &GruCellQuantParams::multiplier_update_gate_output}) {
    p.*m = 1;
  }
  if (p.multiplier_scales) compute_multiplier_rescales(p);
}

}  // namespace qgru
