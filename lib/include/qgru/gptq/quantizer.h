#pragma once
// The GPTQ weight quantizer, as the reference (IST-DASLab/gptq quant.py, Quantizer with perchannel=True,
// weight=True, mse=False) defines it, per output row over a range of columns:
//   xmin = min(0, min w), xmax = max(0, max w)
//   sym:  xmax = max(|xmin|, xmax); xmin = -xmax where xmin < 0
//   xmin == xmax == 0: xmin = -1, xmax = +1
//   scale = (xmax - xmin) / maxq,  zero = sym ? (maxq + 1) / 2 : round(-xmin / scale)
//   code  = clamp(round(w / scale) + zero, 0, maxq),  dequantized = scale * (code - zero)
// maxq = 2^bits - 1. round is torch.round: to nearest, ties to even (std::nearbyint in the default mode).
// Arithmetic is float64 (the reference runs in float32; results agree except at exact rounding ties).
#include <cstdint>
#include <vector>

#include "qgru/gptq/row_block.h"

namespace qgru::gptq {

inline int64_t max_code(int bits) { return (int64_t{1} << bits) - 1; }

// The bit widths GPTQ checkpoints carry (2, 3, 4, 8); anything else throws qgru::Error.
void check_bits(int bits);

// Per-row parameters for one group (or the whole row).
struct RowParams {
  std::vector<double> scale;  // [N]
  std::vector<double> zero;   // [N], integral values in [0, maxq]
};

// Parameters from columns [col_begin, col_end) of W ([rows, ld] row-major). col_end is clipped to ld.
RowParams find_params(const double* W, int64_t rows, int64_t ld, int64_t col_begin, int64_t col_end, int bits,
                      bool sym);

// code = clamp(round(w / scale) + zero, 0, maxq); the arithmetic of row_block.h, which the device shares.
inline int32_t quantize_code(double w, double scale, double zero, int64_t maxq) {
  return grid_code(w, scale, zero, maxq);
}
inline double dequantize_code(int32_t code, double scale, double zero) { return grid_value(code, scale, zero); }

}  // namespace qgru::gptq
