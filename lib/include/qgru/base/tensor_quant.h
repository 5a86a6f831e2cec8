#pragma once
// The quantization of one tensor: power-of-two scale and zero point.
//   scale = 2^-shift (shift a signed integer; negative shifts are legal)
//   quantize:   q = clamp(round(x * 2^shift) + zp, qmin, qmax)      round = half away from zero
//   dequantize: x = (q - zp) * 2^-shift
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
  int shift = 0;             // scale = 2^-shift
  int32_t zp = 0;

  int32_t qmin() const { return is_unsigned ? 0 : static_cast<int32_t>(-(int64_t{1} << (bits - 1))); }
  int32_t qmax() const {
    return static_cast<int32_t>(is_unsigned ? (int64_t{1} << bits) - 1 : (int64_t{1} << (bits - 1)) - 1);
  }
  double scale() const { return std::ldexp(1.0, -shift); }
  double dequantize(int64_t q) const { return static_cast<double>(q - zp) * scale(); }
  // Round half away from zero, then saturate. NaN maps to zp.
  int32_t quantize(double x) const {
    if (std::isnan(x)) return zp;
    const double scaled = std::round(std::ldexp(x, shift)) + zp;
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

// True when the grid of `quant` holds [min, max] (widened to 0) without saturation.
bool quant_covers_range(const TensorQuant& quant, double min, double max);

// True when every code of the tensor lies in [-128, 127] (an int8 operand of a GEMM).
inline bool codes_fit_int8(const TensorQuant& quant) { return quant.qmin() >= -128 && quant.qmax() <= 127; }
std::string describe_quant(const TensorQuant& quant);  // e.g. "u8 asym shift=7 zp=0"

}  // namespace qgru
