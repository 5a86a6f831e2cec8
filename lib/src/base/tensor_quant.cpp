#include "qgru/base/tensor_quant.h"

#include <algorithm>
#include <cstdio>

#include "qgru/base/error.h"

namespace qgru {
namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

bool quant_covers_range(const TensorQuant& quant, double min, double max) {
  const double lo = std::min(min, 0.0);
  const double hi = std::max(max, 0.0);
  // Codes before clamping: round(v * 2^shift) + zp must lie inside [qmin, qmax].
  const double q_lo = std::round(quant.to_steps(lo)) + quant.zp;
  const double q_hi = std::round(quant.to_steps(hi)) + quant.zp;
  return q_lo >= quant.qmin() && q_hi <= quant.qmax();
}

RangeQuantResult quant_from_range(double min, double max, int bits, bool is_unsigned, bool symmetric) {
  if (bits < 2 || bits > 32) throw Error("bit width " + std::to_string(bits) + " outside 2..32");
  if (!(std::isfinite(min) && std::isfinite(max)) || min > max) {
    throw Error("range [" + number(min) + ", " + number(max) + "] is not a finite interval");
  }
  RangeQuantResult result;
  result.quant.bits = bits;
  result.quant.is_unsigned = is_unsigned;
  result.quant.symmetric = symmetric;
  const double lo = std::min(min, 0.0);
  const double hi = std::max(max, 0.0);
  if (lo == 0.0 && hi == 0.0) {
    result.degenerate = true;
    result.quant.shift = is_unsigned ? bits : bits - 1;
    result.quant.zp = 0;  // 0 is inside every code range and is the code of 0.0
    return result;
  }
  // Start from an estimate and walk to the largest shift that still covers the range.
  const double width = symmetric ? std::max(-lo, hi) : hi - lo;
  const double levels = symmetric ? static_cast<double>(result.quant.qmax()) : static_cast<double>(result.quant.qmax()) - result.quant.qmin();
  // Clamped in double before the conversion: a width of 1e-300 or an infinite one (hi - lo beyond double) gives
  // an estimate far outside int, or -inf.
  const double estimate = std::floor(std::log2(levels / width));
  int shift = static_cast<int>(std::clamp(std::isnan(estimate) ? 0.0 : estimate, static_cast<double>(kMinShift),
                                          static_cast<double>(kMaxShift)));
  auto fits = [&](int candidate) {
    TensorQuant trial = result.quant;
    trial.shift = candidate;
    trial.zp = 0;
    if (!symmetric) {
      // The zero point in double first: for a range of 1e30 it is far beyond int32 and only then refused.
      const double zp = trial.qmin() - std::round(std::ldexp(lo, candidate));
      if (zp < trial.qmin() || zp > trial.qmax()) return false;
      trial.zp = static_cast<int32_t>(zp);
    }
    return quant_covers_range(trial, lo, hi);
  };
  while (shift > kMinShift && !fits(shift)) --shift;
  while (shift < kMaxShift && fits(shift + 1)) ++shift;
  if (!fits(shift)) {
    throw Error("range [" + number(min) + ", " + number(max) + "] cannot be represented with " +
                std::to_string(bits) + " bits and a shift in [" + std::to_string(kMinShift) + ", " +
                std::to_string(kMaxShift) + "]");
  }
  result.quant.shift = shift;
  result.quant.zp = symmetric ? 0 : static_cast<int32_t>(result.quant.qmin() - std::round(std::ldexp(lo, shift)));
  return result;
}

RangeQuantResult real_quant_from_range(double min, double max, int bits, bool is_unsigned, bool symmetric) {
  RangeQuantResult result = quant_from_range(min, max, bits, is_unsigned, symmetric);  // validates; degenerate case
  if (result.degenerate) return result;
  TensorQuant& q = result.quant;
  const double lo = std::min(min, 0.0);
  const double hi = std::max(max, 0.0);
  const double scale = symmetric ? std::max(-lo, hi) / q.qmax() : (hi - lo) / (static_cast<double>(q.qmax()) - q.qmin());
  int exponent = 0;
  const double mantissa = std::frexp(scale, &exponent);  // scale = mantissa * 2^exponent, mantissa in [0.5, 1)
  if (!(scale > 0.0) || !std::isfinite(scale) || -exponent < kMinShift || -exponent > kMaxShift) {
    throw Error("range [" + number(min) + ", " + number(max) + "] gives the scale " + number(scale) +
                ", outside 2^" + std::to_string(-kMaxShift) + " .. 2^" + std::to_string(-kMinShift));
  }
  q.shift = -exponent;
  q.mantissa = mantissa;
  q.zp = 0;
  if (!symmetric) {
    const double zp = q.qmin() - std::round(q.to_steps(lo));
    q.zp = static_cast<int32_t>(std::clamp(zp, static_cast<double>(q.qmin()), static_cast<double>(q.qmax())));
  }
  return result;
}

std::string describe_quant(const TensorQuant& quant) {
  std::string text = std::string(quant.is_unsigned ? "u" : "i") + std::to_string(quant.bits) +
                     (quant.symmetric ? " sym" : " asym") + " shift=" + std::to_string(quant.shift);
  if (!quant.power_of_two()) text += " mantissa=" + number(quant.mantissa);
  return text + " zp=" + std::to_string(quant.zp);
}

}  // namespace qgru
