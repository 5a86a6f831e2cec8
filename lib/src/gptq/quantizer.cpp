#include "qgru/gptq/quantizer.h"

#include <algorithm>
#include <string>

#include "qgru/base/error.h"

namespace qgru::gptq {

void check_bits(int bits) {
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
    throw Error("gptq: bits = " + std::to_string(bits) + " is not supported, expected 2, 3, 4 or 8");
  }
}

RowParams find_params(const double* W, int64_t rows, int64_t ld, int64_t col_begin, int64_t col_end, int bits,
                      bool sym) {
  col_end = std::min(col_end, ld);
  RowParams params;
  params.scale.resize(static_cast<size_t>(rows));
  params.zero.resize(static_cast<size_t>(rows));
  const int64_t count = col_end > col_begin ? col_end - col_begin : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const GridParams p = grid_params(W + r * ld + col_begin, 1, count, max_code(bits), sym);
    params.scale[static_cast<size_t>(r)] = p.scale;
    params.zero[static_cast<size_t>(r)] = p.zero;
  }
  return params;
}

}  // namespace qgru::gptq
