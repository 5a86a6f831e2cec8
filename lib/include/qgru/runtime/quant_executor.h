#pragma once
// The CPU reference executor of a quantized GRU: the obviously-right integer path every faster executor
// (CUDA) is compared with, code for code.
//
// Per layer l and direction d (cell params p = model.cell(l, d)):
//   B-1 once for all steps: gemm_x[t, n, c] = Σ_k q_W[c, k] q_x[t, n, k]  (int32 or int64 accumulator, as
//       proven by quantize: p.gemm_x_int32)
//   for each step t (T-1 .. 0 for the reverse direction):
//     B-2: gemm_h[n, c] = Σ_k q_R[c, k] q_h[n, k]
//       (the linear_before_reset = 0 cell: for c < 2H only; then q_reset_hidden[n, j] = gru_cell_reset_hidden
//       of every unit and gemm_h[n, 2H + j] = Σ_k q_R[2H + j, k] q_reset_hidden[n, k], docs/FIXED_POINT.md §3a)
//     the cell per element (qgru/fixed/gru_cell.h gru_cell_element): q_h[n, j] <- new code
// Layer l's output codes (direction d in cell(l, d)'s h space) are requantized into layer l+1's x space
// (requantize, rounding half away from zero, saturating); the directions are concatenated as the float
// model does: output [T, N, D*H], direction d at columns [d*H, (d+1)*H). That loop over layers and
// directions is run_layer_loop (qgru/runtime/layer_loop.h), shared with the CUDA executor; this file's
// executor supplies the CPU cell.
#include <array>
#include <cstdint>
#include <vector>

#include "qgru/runtime/quantized_gru.h"

namespace qgru {

// Every tensor of one cell's time step as codes, for observers (verify, golden vectors). Pointers are
// valid only during the callback. Shapes: q_x [N, C_layer], q_h_prev / q_h_new [N, H], the two linears
// [N, 3H] (gates z, r, n), gate inputs/outputs [N, H]. Each code is in the space params->q(tensor).
struct QuantStepView {
  int layer = 0;
  int direction = 0;
  int t = 0;  // time index in the input sequence (the reverse direction visits T-1 .. 0)
  int batch = 0;
  int input_size = 0;
  int hidden_size = 0;
  const GruCellQuantParams* params = nullptr;
  const int32_t* q_x = nullptr;
  const int32_t* q_h_prev = nullptr;
  const int32_t* q_weight_ih_linear = nullptr;
  const int32_t* q_weight_hh_linear = nullptr;
  const int32_t* q_update_gate_input = nullptr;
  const int32_t* q_update_gate_output = nullptr;
  const int32_t* q_reset_gate_input = nullptr;
  const int32_t* q_reset_gate_output = nullptr;
  const int32_t* q_new_gate_input = nullptr;
  const int32_t* q_new_gate_output = nullptr;
  const int32_t* q_h_new = nullptr;
  // [N, H] C-2a of the linear_before_reset = 0 cell (r ⊙ h in h's space, the second GEMM's operand); null for
  // the other cell. q_weight_hh_linear's n channels are then R_n (r ⊙ h) + br_n (docs/FIXED_POINT.md §3a).
  const int32_t* q_reset_hidden = nullptr;
  const int32_t* lengths = nullptr;  // [N] or null: rows with t >= lengths[n] are padding (qgru::row_is_valid)

  const TensorQuant& quant(GruTensor tensor) const { return params->q(tensor); }
};

class QuantGruObserver {
 public:
  virtual ~QuantGruObserver() = default;
  virtual void on_step(const QuantStepView& step) = 0;
};

struct QuantGruResult {
  int T = 0, N = 0;
  std::vector<int32_t> output_codes;  // [T, N, D*H], direction d in model.cell(L-1, d)'s h space
  std::vector<float> output;          // [T, N, D*H] dequantized
  std::vector<int32_t> h_n_codes;     // [L*D, N, H], cell (l, d) in its own h space
  std::vector<float> h_n;             // [L*D, N, H] dequantized
};

// Float input x: [T, N, C] time-major, quantized with layer 0's x parameters. h0: [L*D, N, H] floats or
// nullptr for zeros, quantized into each cell's h space.
// lengths: [N] sequence lengths in [0, T] or nullptr, with run_float_gru's meaning (qgru/model/float_gru.h):
// padded steps leave the state unchanged and output zp_h, the code of 0.0.
QuantGruResult run_quantized_gru(const QuantizedGru& model, const float* x, int T, int N, const float* h0,
                                 QuantGruObserver* observer = nullptr, const int32_t* lengths = nullptr);

// Integer input: q_x [T, N, C] codes in layer 0's x space (refused with qgru::Error when outside its code
// range); q_h0 [L*D, N, H] codes in each cell's h space, or nullptr for the code of 0.0 (zp_h).
QuantGruResult run_quantized_gru_codes(const QuantizedGru& model, const int32_t* q_x, int T, int N,
                                       const int32_t* q_h0, QuantGruObserver* observer = nullptr,
                                       const int32_t* lengths = nullptr);

// The codes of float values in a tensor's space (round half away from zero, saturating).
std::vector<int32_t> quantize_values(const TensorQuant& quant, const float* values, size_t count);

// Pieces every integer executor (reference, fast) shares, so that they agree by construction:
// - h0 floats [L*D, N, H] quantized into each cell's own h space (nullptr in, empty out);
std::vector<int32_t> quantize_initial_state(const QuantizedGru& model, const float* h0, int N);
// - q_x [T, N, C] refused with qgru::Error when a code lies outside layer 0's x code range;
void check_input_codes(const QuantizedGru& model, const int32_t* q_x, int T, int N);
// - cell (l, d)'s starting h codes [N, H]: from q_h0 [L*D, N, H] (range-checked) or zp_h (the code of 0.0);
std::vector<int32_t> initial_h_codes(const QuantizedGru& model, const int32_t* q_h0, int layer, int direction, int N);
// - an output code of cell (l, d) requantized into layer l+1's x space (rounding half away from zero,
//   saturating; (q_h - zp_h) shifted by shift_h - shift_x, proven within int64 by the overflow check);
int32_t requantize_h_to_next_x(const QuantizedGru& model, int layer, int direction, int32_t q_h);
// - result.output and result.h_n dequantized from result.output_codes and result.h_n_codes.
void dequantize_result(const QuantizedGru& model, QuantGruResult& result);
// - the same values with float arithmetic the compiler vectorizes, where that is exact for every cell's h
//   (float_dequantize_exact: a power-of-two scale 2^-shift with |shift| <= 100), else dequantize_result;
//   output_done: result.output was written already (by the fast executor's time loop), h_n alone is.
bool float_dequantize_exact(const QuantizedGru& model);
void dequantize_result_fast(const QuantizedGru& model, QuantGruResult& result, bool output_done = false);

}  // namespace qgru
