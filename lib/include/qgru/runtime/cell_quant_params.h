#pragma once
// The quantization parameters of one GRU cell (one layer, one direction) as an artifact holds them and
// both executors read them: every tensor's quantization, the integer weights with their per-channel
// shifts, the row sums of the zero-point compensation and every derived rescale shift
// (docs/FIXED_POINT.md §3, "Derived shifts"). How they are chosen from float weights and ranges is the
// toolchain's business (qgru/quant/gru_quant_params.h); the fixed-point cell reads them through view()
// (qgru/fixed/gru_cell.h).
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "qgru/base/tensor_quant.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/gru_tensors.h"
#include "qgru/runtime/activation_tables.h"
#include "qgru/runtime/bitwidth_config.h"

namespace qgru {

using FloatRange = std::pair<double, double>;  // [min, max]

struct GruCellQuantParams {
  int layer = 0;
  int direction = 0;
  int input_size = 0;   // C of this cell
  int hidden_size = 0;  // H
  // The cell variant (FloatGruModel::linear_before_reset; qgru/fixed/gru_cell.h): false is ONNX's
  // linear_before_reset = 0 cell, r ⊙ h in h's space before R_n (docs/FIXED_POINT.md §3a).
  bool linear_before_reset = true;

  // Activation tensors (x, h, the linears, gate inputs and outputs): bits, signedness, symmetry, shift, zp.
  // Parameter tensors (W, R, bw, br): bits and flags only; their shifts are per channel below.
  std::array<TensorQuant, kGruTensorCount> quant{};
  // The float range each activation quant was derived from (as given by the range provider).
  std::array<FloatRange, kGruTensorCount> range{};

  std::vector<int32_t> q_W;      // [3H, C] codes, |q| <= 2^(bits_W - 1)
  std::vector<int32_t> q_R;      // [3H, H]
  std::vector<int32_t> q_bw;     // [3H]
  std::vector<int32_t> q_br;     // [3H]
  std::vector<int32_t> shift_W;  // [3H] (per-tensor granularity: all equal)
  std::vector<int32_t> shift_R;  // [3H]
  std::vector<int32_t> shift_bw; // [3H]
  std::vector<int32_t> shift_br; // [3H]
  // Multiplier-scale models (docs/FIXED_POINT.md §1a): the per-channel scale mantissas of the parameter tensors,
  // scale of channel c = mantissa_X[c] * 2^-shift_X[c] ([3H] each; 1.0 for a power-of-two tensor). Empty otherwise.
  std::vector<double> mantissa_W, mantissa_R, mantissa_bw, mantissa_br;
  std::vector<int64_t> W_sum;    // [3H] Σ_k q_W[c, k]
  std::vector<int64_t> R_sum;    // [3H] Σ_k q_R[c, k]

  // Derived rescale shifts (docs/FIXED_POINT.md §3), all shift_A_to_B = shift_A - shift_B.
  std::vector<int32_t> shift_gemm_x_to_weight_ih_linear;  // [3H] shift_W[c] + shift_x - shift_weight_ih_linear
  std::vector<int32_t> shift_bw_to_gemm_x;                // [3H] shift_bw[c] - (shift_W[c] + shift_x)
  std::vector<int32_t> shift_gemm_h_to_weight_hh_linear;  // [3H] shift_R[c] + shift_h - shift_weight_hh_linear
  std::vector<int32_t> shift_br_to_gemm_h;                // [3H] shift_br[c] - (shift_R[c] + shift_h)
  int32_t shift_weight_ih_linear_to_update_gate_input = 0;
  int32_t shift_weight_hh_linear_to_update_gate_input = 0;
  int32_t shift_weight_ih_linear_to_reset_gate_input = 0;
  int32_t shift_weight_hh_linear_to_reset_gate_input = 0;
  int32_t shift_weight_ih_linear_to_new_gate_input = 0;
  int32_t shift_reset_mul_hh_to_new_gate_input = 0;  // shift_reset_gate_output + shift_weight_hh_linear - shift_new_gate_input
                                                     // (linear_before_reset only; 0 otherwise)
  int32_t shift_reset_mul_h_to_h = 0;                // C-2a: shift_reset_gate_output + shift_h - shift_h (!linear_before_reset; else 0)
  int32_t shift_weight_hh_linear_to_new_gate_input = 0;  // C-3 sum: shift_weight_hh_linear - shift_new_gate_input (likewise)
  int64_t quant_one_in_update_gate_scale = 0;        // round(1.0 * 2^shift_update_gate_output) + zp_update_gate_output
  int32_t shift_new_gate_output_to_h = 0;            // shift_new_gate_output - shift_h
  int32_t shift_update_gate_output = 0;              // the final S_u*S_h -> S_h rescale

  // true: every rescale above is v * multiplier * 2^-shift (multiply_rshift_round, docs/FIXED_POINT.md §1a), its
  // shift the one stored above and its multiplier below; the shifts are then NOT the differences written above
  // but derived with the multiplier from the ratio of the real scales (multiplier_rescale). false: the
  // multipliers are all 1 (per-channel ones empty) and the formulas above hold.
  bool multiplier_scales = false;
  std::vector<int32_t> multiplier_gemm_x_to_weight_ih_linear;  // [3H] or empty
  std::vector<int32_t> multiplier_bw_to_gemm_x;                // [3H] or empty
  std::vector<int32_t> multiplier_gemm_h_to_weight_hh_linear;  // [3H] or empty
  std::vector<int32_t> multiplier_br_to_gemm_h;                // [3H] or empty
  int32_t multiplier_weight_ih_linear_to_update_gate_input = 1;
  int32_t multiplier_weight_hh_linear_to_update_gate_input = 1;
  int32_t multiplier_weight_ih_linear_to_reset_gate_input = 1;
  int32_t multiplier_weight_hh_linear_to_reset_gate_input = 1;
  int32_t multiplier_weight_ih_linear_to_new_gate_input = 1;
  int32_t multiplier_reset_mul_hh_to_new_gate_input = 1;
  int32_t multiplier_reset_mul_h_to_h = 1;
  int32_t multiplier_weight_hh_linear_to_new_gate_input = 1;
  int32_t multiplier_new_gate_output_to_h = 1;
  int32_t multiplier_update_gate_output = 1;

  std::array<ActivationTables, 3> activation{};  // indexed by GateKind: sigmoid, sigmoid, tanh

  // GEMM accumulator types (true: int32, false: int64), fixed by quantize after the overflow proof.
  bool gemm_x_int32 = false;
  bool gemm_h_int32 = false;

  const TensorQuant& q(GruTensor tensor) const { return quant[static_cast<int>(tensor)]; }
  TensorQuant& q(GruTensor tensor) { return quant[static_cast<int>(tensor)]; }
  // The quantization of channel c of a parameter tensor (W, R, bw, br): shift of that channel, zp 0.
  TensorQuant channel_quant(GruTensor tensor, int c) const;
  // A POD view for the cell (pointers into this object: valid while it lives and is not resized).
  GruCellParamsView view() const;
};

// The float range of every observed tensor of one cell (entries of W, R, bw, br unused).
using CellRanges = std::array<FloatRange, kGruTensorCount>;

// Fill every derived shift and the Step A row sums (row sums) from the base shifts and codes; for a
// multiplier-scale cell (params.multiplier_scales) every rescale's multiplier and shift from the real scales.
void compute_derived_shifts(GruCellQuantParams& params);

// A rescale by the real ratio `ratio` > 0 as v -> multiply_rshift_round(v, multiplier, shift)
// (docs/FIXED_POINT.md §1a): frexp(ratio) = f · 2^e (f in [0.5, 1)); p = the multiplier's bits, the most (at
// most 31) that keep input_bound · 2^p <= 2^62 for the bound on |v|; multiplier = round(f · 2^p) half away from
// zero, in [2^(p-1), 2^p) (2^p is renormalised to 2^(p-1), e + 1); shift = p - e. Relative error of the ratio
// at most 2^-p. Pure double arithmetic in this order, so that any IEEE-754 implementation derives the same.
struct MultiplierRescale {
  int32_t multiplier = 1;
  int32_t shift = 0;
};
MultiplierRescale multiplier_rescale(double ratio, double input_bound);

// The rescale of a layer's h codes into the next layer's x space (docs/FIXED_POINT.md §5): a pure shift
// shift_h - shift_x when both scales are powers of two, else multiplier_rescale(S_h / S_x, q_max_h - q_min_h).
MultiplierRescale h_to_next_x_rescale(const TensorQuant& h, const TensorQuant& next_x);

}  // namespace qgru
