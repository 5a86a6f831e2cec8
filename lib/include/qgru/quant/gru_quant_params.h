#pragma once
// Quantization parameters of one GRU cell (one layer, one direction), from float weights,
// ranges and a bit-width config (docs/FIXED_POINT.md §2, §3):
// - shift/zp of every activation tensor from its float range (quant_from_range: the finest power-of-two
//   grid covering the range);
// - W, R symmetric per output channel (row) from max |w| of the row, or per tensor; bw, br likewise;
// - the row sums W_sum[c], R_sum[c] (zero-point compensation W_sum[c] * zp_x, Step A);
// - every derived rescale shift (compute_derived_shifts);
// - the activation tables of the three gates (generate_activation).
// The fixed-point cell reads these through view() (qgru/fixed/gru_cell.h).
#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "qgru/model/float_gru.h"
#include "qgru/runtime/cell_quant_params.h"

namespace qgru {

// Quantize a [rows, cols] matrix (or a [rows] bias with cols = 1) symmetrically with `bits`, one shift per
// row (per_channel) or one for all. An all-zero row gets the degenerate shift and zero codes; the number
// of such rows is returned in `zero_rows`. real_scale: each row's scale is max |w| / (2^(bits-1) - 1) exactly
// (mantissa * 2^-shift, real_quant_from_range) instead of the finest power of two covering it.
struct QuantizedRows {
  std::vector<int32_t> codes;
  std::vector<int32_t> shift;      // [rows]
  std::vector<double> mantissa;    // [rows] 1.0 for a power-of-two scale
  int zero_rows = 0;
};
QuantizedRows quantize_rows_symmetric(const std::vector<float>& values, int rows, int cols, int bits, bool per_channel,
                                      bool real_scale = false);


// The whole derivation for one cell. Logs all-zero rows and degenerate ranges as warnings. linear_before_reset:
// the cell variant (FloatGruModel::linear_before_reset); false derives the shifts of docs/FIXED_POINT.md §3a.
GruCellQuantParams make_cell_quant_params(const GruCellWeights& weights, const BitwidthConfig& config,
                                          const CellRanges& ranges, int layer, int direction,
                                          bool linear_before_reset = true);

}  // namespace qgru
