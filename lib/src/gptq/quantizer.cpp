#include "qgru/gptq/quantizer.h"

#include <algorithm>
#include <cmath>
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
  const double maxq = static_cast<double>(max_code(bits));
  col_end = std::min(col_end, ld);
  RowParams params;
  params.scale.resize(static_cast<size_t>(rows));
  params.zero.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const double* row = W + r * ld;
    double xmin = 0.0, xmax = 0.0;  // min(0, min w), max(0, max w)
    for (int64_t c = col_begin; c < col_end; ++c) {
      xmin = std::min(xmin, row[c]);
      xmax = std::max(xmax, row[c]);
    }
    if (sym) {
      xmax = std::max(std::fabs(xmin), xmax);
      if (xmin < 0) xmin = -xmax;
    }
    if (xmin == 0.0 && xmax == 0.0) {
      xmin = -1.0;
      xmax = 1.0;
    }
    const double scale = (xmax - xmin) / maxq;
    params.scale[static_cast<size_t>(r)] = scale;
    params.zero[static_cast<size_t>(r)] = sym ? (maxq + 1.0) / 2.0 : std::nearbyint(-xmin / scale);
  }
  return params;
}

}  // namespace qgru::gptq
