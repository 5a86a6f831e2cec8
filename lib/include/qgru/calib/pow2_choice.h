#pragma once
// Power-of-two aware range choice: a range maps to a shift (the finest grid covering it, as quant_from_range
// in qgru/base/tensor_quant.h). The method's range lies between two power-of-two grids: the covering one
// (just coarser than the range's ideal scale) and the next finer one, which clips the range's ends. Both are
// evaluated under the method's own objective and the better is kept (ties keep the covering shift). A grid
// coarser than the covering one is no candidate: it clips nothing more and only loses resolution (and KL,
// which spreads each level evenly over its bins, cannot see resolution on flat densities).
#include <string>

#include "qgru/calib/tensor_stats.h"
#include "qgru/base/tensor_quant.h"

namespace qgru {

enum class Pow2Objective {
  Mse,          // grid_mse (range_methods.h); used by mse, minmax, ema and bounds
  Kl,           // KL(P‖Q) of the |x| histogram clipped at the grid's edge with the grid's step as levels
  ClippedMass,  // percentile: the finest grid whose clipped mass per tail stays within (100 - p)%
};

struct Pow2Choice {
  double min = 0, max = 0;  // a range whose finest covering grid has `shift`
  int shift = 0;
  int covering_shift = 0;   // the shift of the method's range
  std::string detail;       // both candidates and their objective values
};

Pow2Choice choose_pow2_range(const TensorStats& stats, double min, double max, const TensorQuant& spec,
                             Pow2Objective objective, double percentile, bool include_zeros);

}  // namespace qgru
