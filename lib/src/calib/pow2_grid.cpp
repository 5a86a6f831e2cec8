#include "pow2_grid.h"

#include <algorithm>
#include <cmath>

#include "qgru/base/error.h"

namespace qgru::calib_detail {

namespace {

bool covers(const TensorQuant& grid, double lo, double hi) {
  const double q_lo = std::round(std::ldexp(lo, grid.shift)) + grid.zp;
  const double q_hi = std::round(std::ldexp(hi, grid.shift)) + grid.zp;
  return q_lo >= grid.qmin() && q_hi <= grid.qmax();
}

}  // namespace

TensorQuant pow2_grid_at_shift(double min, const TensorQuant& spec, int shift) {
  TensorQuant grid = spec;
  grid.shift = shift;
  const double lo = std::min(min, 0.0);
  grid.zp = spec.symmetric ? 0 : static_cast<int32_t>(grid.qmin() - std::round(std::ldexp(lo, shift)));
  if (!spec.symmetric) grid.zp = std::clamp(grid.zp, grid.qmin(), grid.qmax());
  return grid;
}

TensorQuant finest_pow2_grid(double min, double max, const TensorQuant& spec) {
  const double lo = std::min(min, 0.0);
  const double hi = std::max(max, 0.0);
  if (lo == 0.0 && hi == 0.0) {
    TensorQuant grid = spec;
    grid.shift = spec.is_unsigned ? spec.bits : spec.bits - 1;
    grid.zp = 0;
    return grid;
  }
  auto fits = [&](int shift) {
    TensorQuant grid = spec;
    grid.shift = shift;
    grid.zp = spec.symmetric ? 0 : static_cast<int32_t>(grid.qmin() - std::round(std::ldexp(lo, shift)));
    if (!spec.symmetric && (grid.zp < grid.qmin() || grid.zp > grid.qmax())) return false;
    return covers(grid, lo, hi);
  };
  const double width = spec.symmetric ? std::max(-lo, hi) : hi - lo;
  const double levels = spec.symmetric ? static_cast<double>(spec.qmax()) : static_cast<double>(spec.qmax()) - spec.qmin();
  int shift = std::clamp(static_cast<int>(std::floor(std::log2(levels / width))), kMinShift, kMaxShift);
  while (shift > kMinShift && !fits(shift)) --shift;
  while (shift < kMaxShift && fits(shift + 1)) ++shift;
  if (!fits(shift)) {
    throw Error("range [" + std::to_string(min) + ", " + std::to_string(max) + "] cannot be represented with " +
                std::to_string(spec.bits) + " bits");
  }
  return pow2_grid_at_shift(min, spec, shift);
}

}  // namespace qgru::calib_detail
