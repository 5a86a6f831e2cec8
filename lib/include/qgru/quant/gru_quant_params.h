#pragma once
// Quantization parameters of one GRU cell (one layer, one direction), seed 001 Appendix B:
// - shift/zp of every activation tensor from its float range (quant_from_range: the finest power-of-two
//   grid covering the range);
// - W, R symmetric per output channel (row) from max |w| of the row, or per tensor; bw, br likewise;
// - the row sums W_sum[c], R_sum[c] (zero-point compensation W_sum[c] * zp_x, Step A);
// - every derived rescale shift of B.8 (compute_derived_shifts);
// - the activation tables of the three gates (generate_activation).
// The fixed-point cell reads these through view() (qgru/fixed/gru_cell.h).
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "qgru/fixed/gru_cell.h"
#include "qgru/gru_tensors.h"
#include "qgru/model/float_gru.h"
#include "qgru/quant/activation_tables.h"
#include "qgru/quant/bitwidth_config.h"
#include "qgru/quant/tensor_quant.h"

namespace qgru {

using FloatRange = std::pair<double, double>;  // [min, max]

struct GruCellQuantParams {
  int layer = 0;
  int direction = 0;
  int input_size = 0;   // C of this cell
  int hidden_size = 0;  // H

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
  std::vector<int64_t> W_sum;    // [3H] Σ_k q_W[c, k]
  std::vector<int64_t> R_sum;    // [3H] Σ_k q_R[c, k]

  // Derived rescale shifts (seed 001, B.8), all shift_A_to_B = shift_A - shift_B.
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
  int64_t quant_one_in_update_gate_scale = 0;        // round(1.0 * 2^shift_update_gate_output) + zp_update_gate_output
  int32_t shift_new_gate_output_to_h = 0;            // shift_new_gate_output - shift_h
  int32_t shift_update_gate_output = 0;              // the final S_u*S_h -> S_h rescale

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

// Quantize a [rows, cols] matrix (or a [rows] bias with cols = 1) symmetrically with `bits`, one shift per
// row (per_channel) or one for all. An all-zero row gets the degenerate shift and zero codes; the number
// of such rows is returned in `zero_rows`.
struct QuantizedRows {
  std::vector<int32_t> codes;
  std::vector<int32_t> shift;  // [rows]
  int zero_rows = 0;
};
QuantizedRows quantize_rows_symmetric(const std::vector<float>& values, int rows, int cols, int bits, bool per_channel);

// Fill every derived quantity of B.8 and Step A (row sums) from the base shifts and codes.
void compute_derived_shifts(GruCellQuantParams& params);

// The whole derivation for one cell. Logs all-zero rows and degenerate ranges as warnings.
GruCellQuantParams make_cell_quant_params(const GruCellWeights& weights, const BitwidthConfig& config,
                                          const CellRanges& ranges, int layer, int direction);

}  // namespace qgru
