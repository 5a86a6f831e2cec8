#pragma once
// The quantization of one tensor: scale and zero point. The scale is a power of two (the default) or, for
// a multiplier-scale model (docs/FIXED_POINT.md §1a), any positive real held as mantissa * 2^-shift:
//   scale = mantissa * 2^-shift    (shift a signed integer; mantissa 1 exactly for a power of two, else in
//                                   [0.5, 1), the frexp mantissa of the real scale)
//   quantize:   q = clamp(round(x * 2^shift / mantissa) + zp, qmin, qmax)      round = half away from zero
//   dequantize: x = (q - zp) * mantissa * 2^-shift
// With mantissa 1 both are the power-of-two formulas bit for bit (x * 2^shift is exact, dividing by 1 too).
// Code ranges: signed b bits [-2^(b-1), 2^(b-1)-1], unsigned [0, 2^b-1]; b in 2..16 for tensors
// (up to 32 for internal accumulator views).
#include <cmath>
#include <cstdint>
#include <string>

namespace qgru {

struct TensorQuant {
  int bits = 8;
  bool is_unsigned = false;  // code range [0, 2^bits-1] instead of [-2^(bits-1), 2^(bits-1)-1]
  bool symmetric = false;    // symmetric => zp == 0
  int shift = 0;             // scale = mantissa * 2^-shift
  int32_t zp = 0;
  double mantissa = 1.0;     // 1: a power-of-two scale; [0.5, 1): a real scale (multiplier-scale models)

  int32_t qmin() const { return is_unsigned ? 0 : static_cast<int32_t>(-(int64_t{1} << (bits - 1))); }
  int32_t qmax() const {
    return static_cast<int32_t>(is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1);
  }
  bool power_of_two() const { return mantissa == 1.0; }
  double scale() const { return std::ldexp(mantissa, -shift); }
  double dequantize(int64_t q) const {
    return power_of_two() ? static_cast<double>(q - zp) * scale() : std::ldexp(static_cast<double>(q - zp) * mantissa, -shift);
  }
  // x / scale: exact for a power of two, one correctly rounded division otherwise.
  double to_steps(double x) const { return power_of_two() ? std::ldexp(x, shift) : std::ldexp(x, shift) / mantissa; }
  // Round half away from zero, then saturate. NaN maps to zp.
  int32_t quantize(double x) const {
    if (std::isnan(x)) return zp;
    const double scaled = std::round(to_steps(x)) + zp;
    if (scaled <= qmin()) return qmin();
    if (scaled >= qmax()) return qmax();
    return static_cast<int32_t>(scaled);
  }
};

// Shift and zero point for a float range [min, max] (the range is first widened to contain 0, so that
// zero is exactly representable and zp lies inside the code range):
// - the largest shift (finest power-of-two scale) whose grid covers the widened range without clipping,
//   i.e. quantize(min) and quantize(max) are not saturated;
// - asymmetric: zp = qmin - round(min * 2^shift); symmetric: zp = 0 and |min|, |max| both fit.
// A zero-width range [0, 0] gets shift = bits - 1 for signed data (bits for unsigned), zp at 0's code, and
// `degenerate` set so that callers can log it. Shifts are confined to [kMinShift, kMaxShift].
constexpr int kMinShift = -32;
constexpr int kMaxShift = 40;

struct RangeQuantResult {
  TensorQuant quant;
  bool degenerate = false;
};

RangeQuantResult quant_from_range(double min, double max, int bits, bool is_unsigned, bool symmetric);

// The real-scale counterpart (multiplier-scale models): the range widened to 0 is spread over the whole code
// range, scale = (hi - lo) / (qmax - qmin) (symmetric: max(|lo|, hi) / qmax), held as mantissa * 2^-shift
// (frexp: mantissa in [0.5, 1)); asymmetric zp = qmin - round(lo / scale), clamped into the code range. A
// zero-width range gets quant_from_range's degenerate answer (a power of two).
RangeQuantResult real_quant_from_range(double min, double max, int bits, bool is_unsigned, bool symmetric);

// True when the grid of `quant` holds [min, max] (widened to 0) without saturation.
bool quant_covers_range(const TensorQuant& quant, double min, double max);

// True when every code of the tensor lies in [-128, 127] (an int8 operand of a GEMM).
inline bool codes_fit_int8(const TensorQuant& quant) { return quant.qmin() >= -128 && quant.qmax() <= 127; }
std::string describe_quant(const TensorQuant& quant);  // e.g. "u8 asym shift=7 zp=0"

}  // namespace qgru
