#include "pow2_grid.h"

#include <algorithm>
#include <cmath>

#include "qgru/base/error.h"

namespace qgru::calib_detail {

TensorQuant pow2_grid_at_shift(double min, const TensorQuant& spec, int shift) {
  TensorQuant grid = spec;
  grid.shift = shift;
  const double lo = std::min(min, 0.0);
  grid.zp = spec.symmetric ? 0 : static_cast<int32_t>(grid.qmin() - std::round(std::ldexp(lo, shift)));
  if (!spec.symmetric) grid.zp = std::clamp(grid.zp, grid.qmin(), grid.qmax());
  return grid;
}

TensorQuant finest_pow2_grid(double min, double max, const TensorQuant& spec) {
  // The covering grid is exactly the one quantize derives (one rule, in qgru/base/tensor_quant.h).
  return quant_from_range(min, max, spec.bits, spec.is_unsigned, spec.symmetric).quant;
}

}  // namespace qgru::calib_detail
