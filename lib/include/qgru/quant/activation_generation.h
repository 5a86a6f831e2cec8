#pragma once
// Generation of the integer data evaluated by evaluate_activation() (qgru/fixed/activation.h) from a gate's
// input and output quantization, and its exhaustive error measurement.
//
// "Correctly rounded" output for an input code q (the reference every error here is measured against):
//   y = f((q - zp_in) * 2^-shift_in) in double, q_out = clamp(round(y * 2^shift_out) + zp_out)
// with round half away from zero, i.e. output.quantize(f(input.dequantize(q))).
//
// Piecewise-linear design (impl Pwl). In the code space the target is the real-valued curve
//   t(q) = clamp(f((q - zp_in) 2^-shift_in) * 2^shift_out + zp_out, q_out_min, q_out_max)
// and a segment's line approximates t over that segment's input codes:
// - Breakpoints are forced where t changes character: where it leaves the lower clamp, at the inflection
//   point of f (x = 0, i.e. q = zp_in) and where it enters the upper clamp. Between them t is flat,
//   convex or concave, so the best (minimax) line over a segment's codes has the chord's slope and
//   its error is half the largest distance between chord and curve.
// - The remaining breakpoints are placed greedily, each segment as long as its minimax error stays
//   below a bound E, and E is bisected to the smallest value that fits the segment budget. This puts
//   short segments where the curvature is high and one flat segment on each saturated side.
// - Each line is then fitted on the segment's exact codes, its slope quantized to pwl_q_b with the
//   largest shift that keeps |q_b| < 2^30 and |term_c| < 2^52, and its intercept term_c re-centred on
//   the quantized slope's residuals. A fit error E < 1 output LSB guarantees at most 1 LSB after
//   rounding.
// - Finally each intercept, left to right, is nudged (within +-1 LSB, steps of 1/16 LSB) to the value
//   with the smallest max, then summed, integer error against the correctly rounded codes of its
//   segment, preferring values whose first output is not below the previous segment's last one. Slopes
//   are >= 0, so the result is monotone (as sigmoid and tanh are) whenever that nudge suffices: at every
//   default segment count in the tests; very coarse fits (errors of tens of LSB) may step down at a
//   breakpoint.
#include <cstdint>

#include "qgru/base/tensor_quant.h"
#include "qgru/runtime/activation_tables.h"

namespace qgru {

// Recommended Pwl segment counts per output width: the smallest counts measured to keep every input code
// within 1 output LSB of the correctly rounded value. Measured exhaustively (max LSB error over sigmoid
// into unsigned and tanh into symmetric outputs, inputs of 8, 12 and 16 bits with x spanning +-2 to +-8
// and a non-zero zero point):
//   output bits | max LSB error at 8 / 16 / 24 / 32 / 48 / 64 / 96 / 128 / 160 segments
//        8      |  3 /  1 /  1 /  1 /  1 / 1 / 1 / 1 / 1
//       10      | 11 /  2 /  1 /  1 /  1 / 1 / 1 / 1 / 1
//       12      | 44 /  8 /  3 /  2 /  1 / 1 / 1 / 1 / 1
//       14      | 181 / 31 / 13 / 7 /  3 / 2 / 1 / 1 / 1
//       16      | 745 / 125 / 50 / 27 / 12 / 7 / 3 / 2 / 1
// The error falls with the square of the segment count (linear segments on a smooth curve), and one LSB
// of a wider output is finer, hence about twice the segments per 2 more output bits. The bounds are
// asserted in test/unit/quant/activation_test.cpp. Evaluation cost grows only with log2(segments).
constexpr int default_pwl_segments(int output_bits) {
  return output_bits <= 8 ? 16 : output_bits <= 10 ? 24 : output_bits <= 12 ? 48 : output_bits <= 14 ? 96 : 160;
}

// f(x) in double: sigmoid 1 / (1 + e^-x), tanh.
double activation_reference(ActivationFunction function, double x);
// The correctly rounded output code for input code q_in (definition at the top of this header).
int32_t activation_reference_code(ActivationFunction function, const TensorQuant& input,
                                  const TensorQuant& output, int32_t q_in);

// Built offline in double precision from the gate's input and output quantization.
// impl Table: input widths up to 12 bits (else qgru::Error); exact (0 LSB) by construction.
// impl Pwl: input widths up to 16 bits, `segments` >= 1 (at most one segment per input code is used;
// the result may use fewer segments than asked when fewer reach the smallest error). Widths 2..16.
ActivationTables generate_activation(ActivationFunction function, ActivationImpl impl, int segments,
                                     const TensorQuant& input, const TensorQuant& output);

// Error of the evaluated activation against the correctly rounded one, exhaustively over every input code.
struct ActivationError {
  int64_t max_lsb_error = 0;        // max |q_out - q_out_reference|
  double mean_abs_lsb_error = 0.0;  // mean of |q_out - q_out_reference| over all input codes
  int32_t worst_q_in = 0;           // the smallest input code reaching max_lsb_error
};
ActivationError measure_activation_error(const ActivationTables& tables);

}  // namespace qgru
