#pragma once
// The fixed-point GRU cell step for ONE element (hidden unit j of one batch row), host and device.
// docs/FIXED_POINT.md §3: B-1 / B-2 (zero-point compensation, bias fused at the GEMM scale, rescale into
// weight_ih_linear / weight_hh_linear) and C-1 .. C-4 (update, reset and new gate, hidden state update).
// The GRU variant (gate order z, r, n; r multiplies R_n h + br_n) is fixed in qgru/gru_tensors.h; its
// linear_before_reset = 0 form (GruCellParamsView::reset_before_linear: r multiplies h before R_n,
// docs/FIXED_POINT.md §3a) runs through the same functions with one more stage, C-2a (compute_reset_hidden).
//
// Both executors call exactly this code: the CPU reference executor (qgru/runtime/quant_executor.h) and the
// CUDA pointwise kernel. A caller supplies the six raw GEMM accumulators of the element
//   gemm_x[g] = Σ_k q_W[g*H + j, k] * q_x[k]       (scale S_W[c] * S_x, no zero-point correction)
//   gemm_h[g] = Σ_k q_R[g*H + j, k] * q_h_old[k]   (scale S_R[c] * S_h)
// for g = z, r, n, and the old hidden code q_h_old[j]; the function returns the new hidden code. For the
// linear_before_reset = 0 cell gemm_h[n] is instead Σ_k q_R[2H + j, k] * q_reset_hidden[k], the second
// GEMM of the step, against the codes gru_cell_reset_hidden gave for every unit of the row (they lie in h's
// space: same scale, zero point and code range, so B-2's formula and constants serve it unchanged).
//
// Rounding: the only rounding is rshift_round (half away from zero, qgru/fixed/rounding.h), after a 64-bit
// product with the rescale's multiplier in a multiplier-scale model (multiply_rshift_round); the only
// saturations are the ones the data flow implies: into the code range of every stored tensor
// (weight_ih_linear, weight_hh_linear, the three gate inputs, h) and, inside evaluate_activation, into the
// gate outputs' ranges. q_new_gate_aligned_to_h is NOT saturated: it only feeds the (1-u) product and
// the final result is saturated into h.
//
// Overflow contract: every intermediate below is int64. The GEMM accumulators themselves may come from
// an int32 accumulation (int8 GEMM); that they fit is proven by check_overflow()
// (qgru/runtime/overflow_check.h), which also bounds every left shift (negative rescale shift) and every
// product below, so that |value| <= 2^62 holds wherever rshift_round's contract asks for it. Sizes for
// the 16-bit limit of tensor widths: code differences |q - zp| <= 2^16 - 1, products of two differences
// < 2^32, so only the left shifts (negative rescale shifts) can approach the int64 limit; the proof bounds
// them for the actual shifts.
#include <cstdint>

#include "qgru/fixed/activation.h"
#include "qgru/fixed/rounding.h"
#include "qgru/hd.h"

namespace qgru {

// Zero point and code range of one tensor.
struct CodeSpace {
  int32_t zp;
  int32_t q_min;
  int32_t q_max;
};

// Everything one cell (one layer, one direction) needs per element. Plain old data: copied to the device
// by value; the per-channel arrays ([3H], channel c = g*H + j) point to host or device memory owned
// elsewhere (GruCellQuantParams on the host).
struct GruCellParamsView {
  int32_t hidden_size;  // H

  // B-1: W x + bw -> weight_ih_linear
  const int64_t* W_sum;                             // [3H] Σ_k q_W[c, k] (zero-point compensation W_sum[c] * zp_x)
  const int32_t* q_bw;                              // [3H] bias codes, scale S_bw[c], zp 0
  const int32_t* shift_bw_to_gemm_x;                // [3H] shift_bw[c] - (shift_W[c] + shift_x)
  const int32_t* shift_gemm_x_to_weight_ih_linear;  // [3H] shift_W[c] + shift_x - shift_weight_ih_linear
  int32_t zp_x;
  // B-2: R h + br -> weight_hh_linear
  const int64_t* R_sum;                             // [3H] Σ_k q_R[c, k]
  const int32_t* q_br;                              // [3H]
  const int32_t* shift_br_to_gemm_h;                // [3H] shift_br[c] - (shift_R[c] + shift_h)
  const int32_t* shift_gemm_h_to_weight_hh_linear;  // [3H] shift_R[c] + shift_h - shift_weight_hh_linear

  CodeSpace h;
  CodeSpace weight_ih_linear;
  CodeSpace weight_hh_linear;
  CodeSpace update_gate_input;
  CodeSpace reset_gate_input;
  CodeSpace new_gate_input;
  int32_t zp_update_gate_output;
  int32_t zp_reset_gate_output;
  int32_t zp_new_gate_output;

  // C-1, C-2 (docs/FIXED_POINT.md §3)
  int32_t shift_weight_ih_linear_to_update_gate_input;
  int32_t shift_weight_hh_linear_to_update_gate_input;
  int32_t shift_weight_ih_linear_to_reset_gate_input;
  int32_t shift_weight_hh_linear_to_reset_gate_input;
  // C-3
  int32_t shift_weight_ih_linear_to_new_gate_input;
  int32_t shift_reset_mul_hh_to_new_gate_input;  // shift_reset_gate_output + shift_weight_hh_linear - shift_new_gate_input
  // true: the linear_before_reset = 0 cell (ONNX's default, Keras reset_after=False): C-2a and the C-3 sum, the
  // shift above unused (0). false, what a zero-initialised view holds: the cell of qgru/gru_tensors.h.
  bool reset_before_linear;
  int32_t shift_reset_mul_h_to_h;                    // C-2a: shift_reset_gate_output + shift_h - shift_h
  int32_t shift_weight_hh_linear_to_new_gate_input;  // C-3 sum: shift_weight_hh_linear - shift_new_gate_input
  // C-4
  int64_t quant_one_in_update_gate_scale;  // round(2^shift_update_gate_output) + zp_update_gate_output
  int32_t shift_new_gate_output_to_h;      // shift_new_gate_output - shift_h
  int32_t shift_update_gate_output;        // S_update_gate_output * S_h -> S_h

  // Multiplier-scale models (docs/FIXED_POINT.md §1a): true makes every rescale above
  // multiply_rshift_round(v, multiplier_X, shift_X) with the multipliers below; false (what a zero-initialised
  // view holds) is the power-of-two cell, where the multipliers are not read (the per-channel ones may be null).
  bool multiplier_scales;
  const int32_t* multiplier_bw_to_gemm_x;                // [3H]
  const int32_t* multiplier_gemm_x_to_weight_ih_linear;  // [3H]
  const int32_t* multiplier_br_to_gemm_h;                // [3H]
  const int32_t* multiplier_gemm_h_to_weight_hh_linear;  // [3H]
  int32_t multiplier_weight_ih_linear_to_update_gate_input;
  int32_t multiplier_weight_hh_linear_to_update_gate_input;
  int32_t multiplier_weight_ih_linear_to_reset_gate_input;
  int32_t multiplier_weight_hh_linear_to_reset_gate_input;
  int32_t multiplier_weight_ih_linear_to_new_gate_input;
  int32_t multiplier_reset_mul_hh_to_new_gate_input;
  int32_t multiplier_reset_mul_h_to_h;
  int32_t multiplier_weight_hh_linear_to_new_gate_input;
  int32_t multiplier_new_gate_output_to_h;
  int32_t multiplier_update_gate_output;

  ActivationView update_gate;  // sigmoid: update_gate_input codes -> update_gate_output codes
  ActivationView reset_gate;   // sigmoid: reset_gate_input codes -> reset_gate_output codes
  ActivationView new_gate;     // tanh: new_gate_input codes -> new_gate_output codes
};

// The six raw GEMM accumulators of one element, gates in the order z (update), r (reset), n (new).
struct GruCellAccumulators {
  int64_t gemm_x[3];
  int64_t gemm_h[3];
};

// Every intermediate code of one element, for observers and golden vectors.
struct GruCellTrace {
  int32_t q_weight_ih_linear[3];  // gates z, r, n
  int32_t q_weight_hh_linear[3];
  int32_t q_update_gate_input;
  int32_t q_update_gate_output;
  int32_t q_reset_gate_input;
  int32_t q_reset_gate_output;
  int32_t q_new_gate_input;
  int32_t q_new_gate_output;
  int64_t q_new_gate_aligned_to_h;  // in h's space, not saturated
  int32_t q_h_new;
  int32_t q_reset_hidden;  // C-2a of the linear_before_reset = 0 cell (h's space); not written otherwise
};

// Every rescale of the cell: rshift_round(value, shift) for a power-of-two model, multiply_rshift_round(value,
// multiplier, shift) for a multiplier-scale one (the multiplier read only then). Rounding half away from zero
// either way; the overflow proof bounds |value| · multiplier by 2^62.
QGRU_HD int64_t rescale(const GruCellParamsView& p, int64_t value, int32_t multiplier, int32_t shift) {
  return p.multiplier_scales ? multiply_rshift_round(value, multiplier, shift) : rshift_round(value, shift);
}

// B-1's bias at the GEMM scale, q_bw[c] rescaled from S_bw[c] to S_W[c]*S_x.
QGRU_HD int64_t bias_in_gemm_x(const GruCellParamsView& p, int32_t c) {
  return rescale(p, p.q_bw[c], p.multiplier_scales ? p.multiplier_bw_to_gemm_x[c] : 1, p.shift_bw_to_gemm_x[c]);
}
// B-2's bias at the GEMM scale, q_br[c] rescaled from S_br[c] to S_R[c]*S_h.
QGRU_HD int64_t bias_in_gemm_h(const GruCellParamsView& p, int32_t c) {
  return rescale(p, p.q_br[c], p.multiplier_scales ? p.multiplier_br_to_gemm_h[c] : 1, p.shift_br_to_gemm_h[c]);
}
// B-1 / B-2's last line with the channel's rescale given: q_combined (the GEMM scale) into the linear's codes
// (`linear`: weight_ih_linear or weight_hh_linear), saturated.
QGRU_HD int32_t requantize_linear(const GruCellParamsView& p, int64_t q_combined, int32_t multiplier, int32_t shift,
                                  const CodeSpace& linear) {
  return saturate(rescale(p, q_combined, multiplier, shift) + linear.zp, linear.q_min, linear.q_max);
}
// B-1's last line: the corrected sum with the bias (S_W[c]*S_x) into weight_ih_linear's codes, saturated.
QGRU_HD int32_t requantize_gemm_x(const GruCellParamsView& p, int32_t c, int64_t q_combined) {
  const int32_t multiplier = p.multiplier_scales ? p.multiplier_gemm_x_to_weight_ih_linear[c] : 1;
  return requantize_linear(p, q_combined, multiplier, p.shift_gemm_x_to_weight_ih_linear[c], p.weight_ih_linear);
}
// B-2's last line: (S_R[c]*S_h) into weight_hh_linear's codes, saturated.
QGRU_HD int32_t requantize_gemm_h(const GruCellParamsView& p, int32_t c, int64_t q_combined) {
  const int32_t multiplier = p.multiplier_scales ? p.multiplier_gemm_h_to_weight_hh_linear[c] : 1;
  return requantize_linear(p, q_combined, multiplier, p.shift_gemm_h_to_weight_hh_linear[c], p.weight_hh_linear);
}

// B-1 for channel c: weight_ih_linear from the raw accumulator.
//   q_gemm_corrected = gemm_x - W_sum[c] * zp_x                      scale S_W[c]*S_x
//   q_bias_in_gemm   = q_bw[c] * 2^-(shift_bw_to_gemm_x[c])          scale S_W[c]*S_x
//   q_weight_ih_linear = sat(rshift_round(corrected + bias, shift_gemm_x_to_weight_ih_linear[c]) + zp)
// (each rescale with its multiplier in a multiplier-scale model)
QGRU_HD int32_t compute_weight_ih_linear(const GruCellParamsView& p, int32_t c, int64_t gemm_x) {
  const int64_t q_gemm_corrected = gemm_x - p.W_sum[c] * static_cast<int64_t>(p.zp_x);  // S_W[c]*S_x
  const int64_t q_bias_in_gemm = bias_in_gemm_x(p, c);                                   // S_W[c]*S_x
  return requantize_gemm_x(p, c, q_gemm_corrected + q_bias_in_gemm);                     // S_W[c]*S_x -> S_ih
}

// B-2 for channel c: weight_hh_linear from the raw accumulator (same steps with R, h, br).
QGRU_HD int32_t compute_weight_hh_linear(const GruCellParamsView& p, int32_t c, int64_t gemm_h) {
  const int64_t q_gemm_corrected = gemm_h - p.R_sum[c] * static_cast<int64_t>(p.h.zp);  // S_R[c]*S_h
  const int64_t q_bias_in_gemm = bias_in_gemm_h(p, c);                                  // S_R[c]*S_h
  return requantize_gemm_h(p, c, q_gemm_corrected + q_bias_in_gemm);                    // S_R[c]*S_h -> S_hh
}

// C-1 / C-2: a sigmoid gate's input, the sum of the two linears in the gate input's space.
QGRU_HD int32_t compute_sigmoid_gate_input(const GruCellParamsView& p, int32_t q_weight_ih_linear,
                                           int32_t q_weight_hh_linear, int32_t shift_ih_to_gate_input,
                                           int32_t shift_hh_to_gate_input, const CodeSpace& gate_input,
                                           int32_t multiplier_ih_to_gate_input, int32_t multiplier_hh_to_gate_input) {
  const int64_t ih_shifted = rescale(p, static_cast<int64_t>(q_weight_ih_linear) - p.weight_ih_linear.zp,
                                     multiplier_ih_to_gate_input, shift_ih_to_gate_input);  // S_gate_input
  const int64_t hh_shifted = rescale(p, static_cast<int64_t>(q_weight_hh_linear) - p.weight_hh_linear.zp,
                                     multiplier_hh_to_gate_input, shift_hh_to_gate_input);  // S_gate_input
  return saturate(ih_shifted + hh_shifted + gate_input.zp, gate_input.q_min, gate_input.q_max);
}

// C-2a (linear_before_reset = 0 only): r ⊙ h in h's own space, the operand of the step's second GEMM R_n (r ⊙ h).
//   q_reset_hidden = sat_h(rshift_round((q_r - zp_r)(q_h - zp_h), shift_reset_mul_h_to_h) + zp_h)
// The product lives at S_r·S_h; shift_reset_mul_h_to_h (= shift_reset_gate_output) takes it to S_h. With
// |r| <= 1 the value never leaves h's range (the saturation only guards configs whose r space reaches past 1).
QGRU_HD int32_t compute_reset_hidden(const GruCellParamsView& p, int32_t q_reset_gate_output, int32_t q_h_old) {
  const int64_t r_diff = static_cast<int64_t>(q_reset_gate_output) - p.zp_reset_gate_output;  // S_r
  const int64_t h_diff = static_cast<int64_t>(q_h_old) - p.h.zp;                              // S_h
  const int64_t product = r_diff * h_diff;  // S_r*S_h; |r_diff|, |h_diff| < 2^16, so < 2^32
  return saturate(rescale(p, product, p.multiplier_reset_mul_h_to_h, p.shift_reset_mul_h_to_h) + p.h.zp, p.h.q_min,
                  p.h.q_max);  // S_h
}

// C-3 of the linear_before_reset = 0 cell: new_gate_input = ih_n + hh_n, hh_n = R_n (r ⊙ h) + br_n already in
// weight_hh_linear's space: C-1's sum with the new gate's two shifts (each term rounded, then added).
QGRU_HD int32_t compute_new_gate_input_reset_before(const GruCellParamsView& p, int32_t q_weight_ih_linear_n,
                                                    int32_t q_weight_hh_linear_n) {
  return compute_sigmoid_gate_input(p, q_weight_ih_linear_n, q_weight_hh_linear_n, p.shift_weight_ih_linear_to_new_gate_input,
                                    p.shift_weight_hh_linear_to_new_gate_input, p.new_gate_input,
                                    p.multiplier_weight_ih_linear_to_new_gate_input,
                                    p.multiplier_weight_hh_linear_to_new_gate_input);
}

// C-3: new_gate_input = ih_n + r * hh_n, the product rescaled directly into new_gate_input's space.
QGRU_HD int32_t compute_new_gate_input(const GruCellParamsView& p, int32_t q_weight_ih_linear_n,
                                       int32_t q_reset_gate_output, int32_t q_weight_hh_linear_n) {
  const int64_t r_diff = static_cast<int64_t>(q_reset_gate_output) - p.zp_reset_gate_output;  // S_r
  const int64_t hh_diff = static_cast<int64_t>(q_weight_hh_linear_n) - p.weight_hh_linear.zp;  // S_hh
  const int64_t product = r_diff * hh_diff;  // S_r*S_hh; |r_diff|, |hh_diff| < 2^16, so < 2^32
  const int64_t q_rh =
      rescale(p, product, p.multiplier_reset_mul_hh_to_new_gate_input, p.shift_reset_mul_hh_to_new_gate_input);  // S_new_gate_input
  const int64_t ih_shifted = rescale(p, static_cast<int64_t>(q_weight_ih_linear_n) - p.weight_ih_linear.zp,
                                     p.multiplier_weight_ih_linear_to_new_gate_input,
                                     p.shift_weight_ih_linear_to_new_gate_input);  // S_new_gate_input
  return saturate(ih_shifted + q_rh + p.new_gate_input.zp, p.new_gate_input.q_min, p.new_gate_input.q_max);
}

// C-4: h_new = u * h_old + (1 - u) * n, both products at S_update_gate_output * S_h.
// Writes q_new_gate_aligned_to_h when `aligned_out` is not null.
QGRU_HD int32_t compute_hidden_state(const GruCellParamsView& p, int32_t q_update_gate_output,
                                     int32_t q_new_gate_output, int32_t q_h_old, int64_t* aligned_out) {
  // (1) new gate aligned to h's scale (S_h), with h's zero point
  const int64_t n_diff_from_zp = static_cast<int64_t>(q_new_gate_output) - p.zp_new_gate_output;  // S_n
  const int64_t q_new_gate_aligned_to_h =
      rescale(p, n_diff_from_zp, p.multiplier_new_gate_output_to_h, p.shift_new_gate_output_to_h) + p.h.zp;  // S_h
  if (aligned_out) *aligned_out = q_new_gate_aligned_to_h;
  // (2) u * h_old                                                       S_u*S_h
  const int64_t u_diff = static_cast<int64_t>(q_update_gate_output) - p.zp_update_gate_output;
  const int64_t h_diff = static_cast<int64_t>(q_h_old) - p.h.zp;
  const int64_t q_old_contribution_mul = u_diff * h_diff;
  // (3) (1 - u) * n_aligned                                             S_u*S_h
  const int64_t one_minus_u = p.quant_one_in_update_gate_scale - q_update_gate_output;
  const int64_t n_diff_aligned = q_new_gate_aligned_to_h - p.h.zp;
  const int64_t q_new_contribution_mul = one_minus_u * n_diff_aligned;
  // (4) both live at S_u*S_h: add directly, then rescale to S_h by shift_update_gate_output
  const int64_t q_combined = q_old_contribution_mul + q_new_contribution_mul;
  return saturate(rescale(p, q_combined, p.multiplier_update_gate_output, p.shift_update_gate_output) + p.h.zp, p.h.q_min,
                  p.h.q_max);
}

// C-1 .. C-4 for hidden unit j from the linear stage's codes (q_ih, q_hh: gates z, r, n). `trace` may be
// null; it receives every value from q_update_gate_input on. Shared by gru_cell_element and by executors
// that compute B-1/B-2 their own way (the fast CPU executor folds their constants). For the
// linear_before_reset = 0 cell q_hh[2] is R_n (r ⊙ h) + br_n (B-2 on the second GEMM's accumulator) and C-3
// is the sum; trace->q_reset_hidden is then C-2a recomputed from the step's r and h (the value the second
// GEMM was given).
QGRU_HD int32_t gru_cell_gates(const GruCellParamsView& p, const int32_t* q_ih, const int32_t* q_hh, int32_t q_h_old,
                               GruCellTrace* trace) {
  // C-1 update gate
  const int32_t q_update_gate_input = compute_sigmoid_gate_input(
      p, q_ih[0], q_hh[0], p.shift_weight_ih_linear_to_update_gate_input,
      p.shift_weight_hh_linear_to_update_gate_input, p.update_gate_input, p.multiplier_weight_ih_linear_to_update_gate_input,
      p.multiplier_weight_hh_linear_to_update_gate_input);
  const int32_t q_update_gate_output = evaluate_activation(p.update_gate, q_update_gate_input);
  // C-2 reset gate
  const int32_t q_reset_gate_input = compute_sigmoid_gate_input(
      p, q_ih[1], q_hh[1], p.shift_weight_ih_linear_to_reset_gate_input,
      p.shift_weight_hh_linear_to_reset_gate_input, p.reset_gate_input, p.multiplier_weight_ih_linear_to_reset_gate_input,
      p.multiplier_weight_hh_linear_to_reset_gate_input);
  const int32_t q_reset_gate_output = evaluate_activation(p.reset_gate, q_reset_gate_input);
  // C-3 new gate
  const int32_t q_new_gate_input = p.reset_before_linear
                                       ? compute_new_gate_input_reset_before(p, q_ih[2], q_hh[2])
                                       : compute_new_gate_input(p, q_ih[2], q_reset_gate_output, q_hh[2]);
  const int32_t q_new_gate_output = evaluate_activation(p.new_gate, q_new_gate_input);
  // C-4 hidden state
  int64_t q_new_gate_aligned_to_h = 0;
  const int32_t q_h_new = compute_hidden_state(p, q_update_gate_output, q_new_gate_output, q_h_old,
                                               &q_new_gate_aligned_to_h);
  if (trace) {
    trace->q_update_gate_input = q_update_gate_input;
    trace->q_update_gate_output = q_update_gate_output;
    trace->q_reset_gate_input = q_reset_gate_input;
    trace->q_reset_gate_output = q_reset_gate_output;
    trace->q_new_gate_input = q_new_gate_input;
    trace->q_new_gate_output = q_new_gate_output;
    trace->q_new_gate_aligned_to_h = q_new_gate_aligned_to_h;
    trace->q_h_new = q_h_new;
    if (p.reset_before_linear) trace->q_reset_hidden = compute_reset_hidden(p, q_reset_gate_output, q_h_old);
  }
  return q_h_new;
}

// C-2 and C-2a of a linear_before_reset = 0 step from the reset channel's linears: q_reset_hidden of one unit.
QGRU_HD int32_t gru_cell_reset_hidden_gates(const GruCellParamsView& p, int32_t q_ih_r, int32_t q_hh_r, int32_t q_h_old) {
  const int32_t q_reset_gate_input =
      compute_sigmoid_gate_input(p, q_ih_r, q_hh_r, p.shift_weight_ih_linear_to_reset_gate_input,
                                 p.shift_weight_hh_linear_to_reset_gate_input, p.reset_gate_input, p.multiplier_weight_ih_linear_to_reset_gate_input,
      p.multiplier_weight_hh_linear_to_reset_gate_input);
  return compute_reset_hidden(p, evaluate_activation(p.reset_gate, q_reset_gate_input), q_h_old);
}

// The first half of a linear_before_reset = 0 step for hidden unit j: B-1 and B-2 of the reset channel
// (c = H + j), C-2 and C-2a; returns q_reset_hidden[j], the operand of the step's second GEMM. The step is
//   gemm_h[c] = Σ_k q_R[c, k] q_h_old[k] for c < 2H;  q_reset_hidden[j] = gru_cell_reset_hidden(...) for every j;
//   gemm_h[2H + j] = Σ_k q_R[2H + j, k] q_reset_hidden[k];  q_h_new[j] = gru_cell_element(...) (which computes
//   the reset gate again, code for code the same, for C-4's trace and the z/r half it shares with the other cell).
QGRU_HD int32_t gru_cell_reset_hidden(const GruCellParamsView& p, int32_t j, int64_t gemm_x_r, int64_t gemm_h_r,
                                      int32_t q_h_old) {
  const int32_t c = p.hidden_size + j;
  return gru_cell_reset_hidden_gates(p, compute_weight_ih_linear(p, c, gemm_x_r), compute_weight_hh_linear(p, c, gemm_h_r),
                                     q_h_old);
}

// ---- B-1 / B-2 with the channel's constants folded once (callers that run many steps of one cell) ----
//
// A caller whose GEMM hands over a STORED accumulator (the raw one minus a known per-channel term, e.g. the int8
// GEMM of offset operands: raw = stored + operand_offset·W_sum[c], qgru/kernels/int8_gemm_layout.h) folds every
// step-invariant term of B-1 / B-2 into one constant per channel once:
//   offset = accumulator_offset - W_sum[c]·zp_x + bias_in_gemm_x(c)      (B-2: R_sum, zp_h, bias_in_gemm_h)
// and the channel's rescale (multiplier, 1 in a power-of-two model, and shift). Then
//   q_combined = stored + offset
// is the very int64 compute_weight_ih_linear forms as ((stored + accumulator_offset) - W_sum·zp_x) + bias, so
// requantize_linear returns the same code. Exactness: offset is held as uint64_t, the int64 value modulo 2^64
// (unsigned arithmetic wraps, defined), and q_combined is formed modulo 2^64 too; the true q_combined is the
// value check_overflow() bounds by 2^62 ("gemm_x corrected + bias"), so its residue converted back to int64 is
// that value exactly (the conversion is modular: C++20, and every compiler the project builds with before it),
// whatever size the partial sum accumulator_offset - W_sum·zp_x + bias has. The three terms themselves are the
// int64 values compute_weight_ih_linear computes (accumulator_offset the caller's, bounded by its GEMM's note).
struct GruLinearFold {
  uint64_t offset;     // accumulator_offset - W_sum[c]·zp + bias at the GEMM scale, modulo 2^64
  int32_t multiplier;  // the channel's rescale to the linear (1 in a power-of-two model: not read)
  int32_t shift;
};
// The folds of one hidden unit j: B-1 (ih) and B-2 (hh) of its three channels g·H + j, gates z, r, n. 96 bytes.
struct GruUnitFolds {
  GruLinearFold ih[3];
  GruLinearFold hh[3];
};

QGRU_HD GruLinearFold fold_weight_ih_linear(const GruCellParamsView& p, int32_t c, int64_t accumulator_offset) {
  const int64_t compensation = p.W_sum[c] * static_cast<int64_t>(p.zp_x);  // S_W[c]*S_x, as compute_weight_ih_linear
  return {static_cast<uint64_t>(accumulator_offset) - static_cast<uint64_t>(compensation) +
              static_cast<uint64_t>(bias_in_gemm_x(p, c)),
          p.multiplier_scales ? p.multiplier_gemm_x_to_weight_ih_linear[c] : 1, p.shift_gemm_x_to_weight_ih_linear[c]};
}
QGRU_HD GruLinearFold fold_weight_hh_linear(const GruCellParamsView& p, int32_t c, int64_t accumulator_offset) {
  const int64_t compensation = p.R_sum[c] * static_cast<int64_t>(p.h.zp);  // S_R[c]*S_h, as compute_weight_hh_linear
  return {static_cast<uint64_t>(accumulator_offset) - static_cast<uint64_t>(compensation) +
              static_cast<uint64_t>(bias_in_gemm_h(p, c)),
          p.multiplier_scales ? p.multiplier_gemm_h_to_weight_hh_linear[c] : 1, p.shift_gemm_h_to_weight_hh_linear[c]};
}
// The linear's code from a stored accumulator and its channel's fold (`linear`: weight_ih_linear or
// weight_hh_linear, the fold's side). q_combined: see GruLinearFold.
QGRU_HD int32_t linear_from_fold(const GruCellParamsView& p, const GruLinearFold& f, int64_t stored,
                                 const CodeSpace& linear) {
  const auto q_combined = static_cast<int64_t>(static_cast<uint64_t>(stored) + f.offset);  // GEMM scale
  return requantize_linear(p, q_combined, f.multiplier, f.shift, linear);
}
// gru_cell_reset_hidden from stored accumulators and the unit's folds (the r channel's, ih[1] and hh[1]).
QGRU_HD int32_t gru_cell_reset_hidden_folded(const GruCellParamsView& p, const GruUnitFolds& f, int64_t stored_x_r,
                                             int64_t stored_h_r, int32_t q_h_old) {
  return gru_cell_reset_hidden_gates(p, linear_from_fold(p, f.ih[1], stored_x_r, p.weight_ih_linear),
                                     linear_from_fold(p, f.hh[1], stored_h_r, p.weight_hh_linear), q_h_old);
}
// gru_cell_element from stored accumulators (gates z, r, n) and the unit's folds; no trace.
QGRU_HD int32_t gru_cell_element_folded(const GruCellParamsView& p, const GruUnitFolds& f, const int64_t* stored_x,
                                        const int64_t* stored_h, int32_t q_h_old) {
  int32_t q_ih[3];
  int32_t q_hh[3];
  for (int32_t g = 0; g < 3; ++g) {
    q_ih[g] = linear_from_fold(p, f.ih[g], stored_x[g], p.weight_ih_linear);
    q_hh[g] = linear_from_fold(p, f.hh[g], stored_h[g], p.weight_hh_linear);
  }
  return gru_cell_gates(p, q_ih, q_hh, q_h_old, nullptr);
}
// Both folds of unit j, with the stored accumulators' offsets per channel (x_offset·W_sum[c], h_offset·R_sum[c]:
// the caller's GEMM, e.g. raw_gemm_accumulator(0, offset, row_sum)).
QGRU_HD GruUnitFolds fold_unit(const GruCellParamsView& p, int32_t j, int32_t x_operand_offset, int32_t h_operand_offset) {
  GruUnitFolds f;
  for (int32_t g = 0; g < 3; ++g) {
    const int32_t c = g * p.hidden_size + j;
    // int64: |operand offset| <= 2^15 and |row sum| <= K·2^15, the product < 2^62 (the GEMM headers' note)
    f.ih[g] = fold_weight_ih_linear(p, c, static_cast<int64_t>(x_operand_offset) * p.W_sum[c]);
    f.hh[g] = fold_weight_hh_linear(p, c, static_cast<int64_t>(h_operand_offset) * p.R_sum[c]);
  }
  return f;
}

// The whole step for hidden unit j: B-1, B-2, C-1 .. C-4. `trace` may be null.
QGRU_HD int32_t gru_cell_element(const GruCellParamsView& p, int32_t j, const GruCellAccumulators& acc,
                                 int32_t q_h_old, GruCellTrace* trace) {
  const int32_t H = p.hidden_size;
  int32_t q_ih[3];
  int32_t q_hh[3];
  for (int32_t g = 0; g < 3; ++g) {
    q_ih[g] = compute_weight_ih_linear(p, g * H + j, acc.gemm_x[g]);
    q_hh[g] = compute_weight_hh_linear(p, g * H + j, acc.gemm_h[g]);
  }
  if (trace) {
    for (int32_t g = 0; g < 3; ++g) {
      trace->q_weight_ih_linear[g] = q_ih[g];
      trace->q_weight_hh_linear[g] = q_hh[g];
    }
  }
  return gru_cell_gates(p, q_ih, q_hh, q_h_old, trace);
}

}  // namespace qgru
