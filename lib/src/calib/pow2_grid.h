#pragma once
// The power-of-two grid a range maps to. This is the rule of quant_from_range (qgru/base/tensor_quant.h),
// restated here because the quant area links against calib and not the other way round; the quant area's
// tests hold quant_from_range, this header must follow it (same widening to 0, same "finest shift whose
// grid holds the range unsaturated", same zero point).
#include "qgru/base/tensor_quant.h"

namespace qgru::calib_detail {

// The finest grid (largest shift) with spec's bits/signedness/symmetry that holds [min, max] (widened to
// contain 0) without saturation; [0, 0] gives shift = bits - 1 (signed) or bits (unsigned), zp = 0.
TensorQuant finest_pow2_grid(double min, double max, const TensorQuant& spec);

// The grid of the given shift placed as quant_from_range places it for a range starting at min (zp maps
// min(min, 0) to qmin; symmetric: zp = 0).
TensorQuant pow2_grid_at_shift(double min, const TensorQuant& spec, int shift);

}  // namespace qgru::calib_detail
