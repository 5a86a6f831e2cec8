#pragma once
// The three per-element maps between a quantized GRU's spaces that sit around its cells, QGRU_HD so that the CPU
// executors and the CUDA executor's device flow (cuda/src/device_flow.cu) run the same function:
//   quantize_input_code  float x -> code in layer 0's x space      (TensorQuant::quantize's codes)
//   requantize_h_code    layer l's h code -> layer l+1's x code    (requantize_h_to_next_x's codes)
//   dequantize_code      h code -> float                           (dequantize_result's floats)
// Each takes a small POD map made once on the host from the model (make_*), so the device needs no model.
// test/unit/runtime/code_maps_test.cpp holds each to the CPU path's own function over every code (8- and 16-bit,
// power-of-two and multiplier scales) and, for the quantization, every rounding boundary of every code.
#include <math.h>

#include <cstdint>

#include "qgru/fixed/rounding.h"
#include "qgru/hd.h"

namespace qgru {

struct TensorQuant;
struct QuantizedGru;

// ---- quantization of a float input (TensorQuant::quantize) ----
// steps = (double(x) · 2^shift) / mantissa; both operations correctly rounded in IEEE double on either side
// (2^shift is exact; for a power-of-two scale mantissa = 1 and the division is exact). TensorQuant::quantize
// computes ldexp(x, shift) [/ mantissa]: the same correctly rounded values. Then round half away from zero
// (round() on both sides), + zp in double (|steps| < 2^1023 after the clamp below: no overflow that matters, an
// infinity saturates), saturation; NaN -> zp.
struct InputQuantizer {
  double steps_per_unit = 1.0;  // 2^shift
  double mantissa = 1.0;        // 1 for a power-of-two scale, [0.5, 1) for a real one
  int32_t zp = 0, qmin = 0, qmax = 0;
};

QGRU_HD int32_t quantize_input_code(const InputQuantizer& q, float x) {
  if (x != x) return q.zp;  // NaN (no fast-math anywhere in qgru: x != x is the IEEE test)
  const double steps = (static_cast<double>(x) * q.steps_per_unit) / q.mantissa;
  const double scaled = ::round(steps) + static_cast<double>(q.zp);
  if (scaled <= static_cast<double>(q.qmin)) return q.qmin;
  if (scaled >= static_cast<double>(q.qmax)) return q.qmax;
  return static_cast<int32_t>(scaled);
}
InputQuantizer input_quantizer(const TensorQuant& quant);  // host: the map of a tensor's parameters

// ---- requantization of layer l's h codes into layer l+1's x space (requantize_h_to_next_x) ----
// pure_shift: both scales powers of two: requantize(q_h - zp_h, shift_h - shift_x, ...) (rounding.h);
// else multiply_rshift_round(q_h - zp_h, multiplier, shift) + zp_x, saturated (docs/FIXED_POINT.md §5).
// q_h - zp_h is int64 (codes of at most 16 bits: |diff| < 2^17); the overflow proof bounds both rescales.
struct HToNextXMap {
  int32_t h_zp = 0;
  int32_t pure_shift = 1;  // 1: shift_h_to_x alone; 0: multiplier and shift
  int32_t shift = 0;       // shift_h - shift_x, or the multiplier's shift
  int32_t multiplier = 1;
  int32_t x_zp = 0, x_qmin = 0, x_qmax = 0;
};

QGRU_HD int32_t requantize_h_code(const HToNextXMap& m, int32_t q_h) {
  const int64_t q_diff = static_cast<int64_t>(q_h) - m.h_zp;
  if (m.pure_shift != 0) return requantize(q_diff, m.shift, m.x_zp, m.x_qmin, m.x_qmax);
  return saturate(multiply_rshift_round(q_diff, m.multiplier, m.shift) + m.x_zp, m.x_qmin, m.x_qmax);
}
// host: cell (layer, direction)'s h space into cell (layer + 1, 0)'s x space (shared by layer + 1's directions).
HToNextXMap h_to_next_x_map(const QuantizedGru& model, int layer, int direction);

// ---- dequantization of h codes (dequantize_result) ----
// float(double(q - zp) · mantissa · 2^-shift), left to right: (q - zp) is exact in double (|q - zp| < 2^17), the
// product by the mantissa is TensorQuant::dequantize's one rounding (exact for a power of two: mantissa 1), the
// product by 2^-shift is exact (a normal double result; ldexp on the CPU gives the same value), then one rounding
// to float. No addition: nothing for a compiler to contract into an FMA.
struct CodeDequantizer {
  int32_t zp = 0;
  double mantissa = 1.0;
  double unit = 1.0;  // 2^-shift
};

QGRU_HD float dequantize_code(const CodeDequantizer& d, int32_t q) {
  return static_cast<float>(static_cast<double>(q - d.zp) * d.mantissa * d.unit);
}
CodeDequantizer code_dequantizer(const TensorQuant& quant);  // host

}  // namespace qgru
