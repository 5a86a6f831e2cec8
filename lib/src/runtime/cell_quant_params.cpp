#include "qgru/runtime/cell_quant_params.h"

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
  v.update_gate = activation[static_cast<int>(GateKind::Update)].view();
  v.reset_gate = activation[static_cast<int>(GateKind::Reset)].view();
  v.new_gate = activation[static_cast<int>(GateKind::New)].view();
  return v;
}

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
  // round(1.0 * 2^shift_u): exact for every shift in [kMinShift, kMaxShift] (a power of two, or 0/1 below 2^-1).
  p.quant_one_in_update_gate_scale = static_cast<int64_t>(std::round(std::ldexp(1.0, u.shift))) + u.zp;
  p.shift_new_gate_output_to_h = p.q(GruTensor::new_gate_output).shift - shift_h;
  p.shift_update_gate_output = u.shift;
}

}  // namespace qgru
