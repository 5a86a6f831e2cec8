#pragma once
// The float GRU cell step for ONE element (hidden unit j of one batch row), host and device: the CPU float
// executor (lib/src/model/run_float_gru.cpp) and the CUDA float executor's elementwise kernel
// (cuda/src/float_gru_cuda.cu) both call exactly this function. haste's variant, qgru/gru_tensors.h.
//
// Numerics (the CPU executor's contract): every quantity is computed in double from the float values stored
// before it and rounded to float once, so that an observer can recompute a step from what it sees:
//   update_gate_input  = f(ih_z + hh_z)             update_gate_output = f(sigmoid(update_gate_input))
//   reset_gate_input   = f(ih_r + hh_r)             reset_gate_output  = f(sigmoid(reset_gate_input))
//   new_gate_input     = f(ih_n + r_out · hh_n)     new_gate_output    = f(tanh(new_gate_input))
//                        (linear_before_reset = false: f(ih_n + hh_n), hh_n = R_n (r ⊙ h) + br_n computed by the
//                        caller from reset_hidden = f(r_out · h_prev) of every unit)
//   h_new              = f(z · h_prev + (1 - z) · n)
// where f rounds a double to float and sigmoid(x) = 1 / (1 + exp(-x)). ih_* = W x + bw and hh_* = R h + br
// of the element's three channels (z, r, n), already rounded to float. On the device exp / tanh are CUDA's
// double functions (at most 2 ulp from the correctly rounded value in double, before the rounding to float)
// and nvcc may contract a multiply-add: the result is within a float ulp or two of the CPU's, which is why
// the GPU is compared with a tolerance (docs/CUDA.md).
#include <math.h>

#include "qgru/hd.h"

namespace qgru {

struct FloatGruElement {
  float update_gate_input, update_gate_output;
  float reset_gate_input, reset_gate_output;
  float new_gate_input, new_gate_output;
  float h_new;
};

QGRU_HD double float_gru_sigmoid(double x) { return 1.0 / (1.0 + ::exp(-x)); }

// The reset gate of one element: reset_gate_output = f(sigmoid(f(ih_r + hh_r))), as float_gru_cell_element
// computes it.
QGRU_HD float float_gru_reset_gate_output(float ih_r, float hh_r) {
  const float reset_gate_input = static_cast<float>(static_cast<double>(ih_r) + static_cast<double>(hh_r));
  return static_cast<float>(float_gru_sigmoid(reset_gate_input));
}

// The linear_before_reset = false cell's input to R_n of one element: reset_hidden = f(r_out · h_prev), r_out the
// element's reset gate. Every unit's reset_hidden is needed before any unit's new gate (hh_n = R_n (r ⊙ h) + br_n),
// so the caller runs this over the whole state first, then the linear, then float_gru_cell_element with that hh_n.
QGRU_HD float float_gru_reset_hidden(float ih_r, float hh_r, float h_prev) {
  return static_cast<float>(static_cast<double>(float_gru_reset_gate_output(ih_r, hh_r)) * static_cast<double>(h_prev));
}

QGRU_HD FloatGruElement float_gru_cell_element(float ih_z, float ih_r, float ih_n, float hh_z, float hh_r, float hh_n,
                                               float h_prev, bool linear_before_reset = true) {
  FloatGruElement e;
  e.update_gate_input = static_cast<float>(static_cast<double>(ih_z) + static_cast<double>(hh_z));
  e.update_gate_output = static_cast<float>(float_gru_sigmoid(e.update_gate_input));
  e.reset_gate_input = static_cast<float>(static_cast<double>(ih_r) + static_cast<double>(hh_r));
  e.reset_gate_output = static_cast<float>(float_gru_sigmoid(e.reset_gate_input));
  e.new_gate_input = linear_before_reset
                         ? static_cast<float>(static_cast<double>(ih_n) + static_cast<double>(e.reset_gate_output) * hh_n)
                         : static_cast<float>(static_cast<double>(ih_n) + static_cast<double>(hh_n));
  e.new_gate_output = static_cast<float>(::tanh(static_cast<double>(e.new_gate_input)));
  const double z = e.update_gate_output;
  e.h_new = static_cast<float>(z * h_prev + (1.0 - z) * e.new_gate_output);
  return e;
}

}  // namespace qgru
