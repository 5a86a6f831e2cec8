#pragma once
// GPTQ's per-row arithmetic, shared by the CPU path (gptq.cpp) and the CUDA path (cuda/src/gptq_kernels.cu):
// the quantizer's grid parameters of one row over a column range, one code, and the quantization of one
// row across one lazy-update block. QGRU_HD (qgru/hd.h): the CPU runs these very functions, so the device
// computes the same float64 values as the CPU for the same inputs.
//
// Rounding contract: every operation is one IEEE-754 float64 operation rounded to nearest even, never fused:
// on the device the products and differences go through __dmul_rn / __dsub_rn (nvcc would otherwise contract
// w − e·u into one fma, which rounds once instead of twice); the host build has no fma contraction (the
// project compiles for baseline x86-64 without -ffp-contract=fast and -mfma). Division is IEEE on both
// (nvcc's default -prec-div=true), round to integer is to nearest, ties to even (nearbyint / rint).
#include <cmath>
#include <cstdint>

#include "qgru/hd.h"

namespace qgru::gptq {

QGRU_HD double mul_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

QGRU_HD double sub_rn(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dsub_rn(a, b);
#else
  return a - b;
#endif
}

QGRU_HD double round_half_even(double x) {
#if defined(__CUDA_ARCH__)
  return rint(x);  // the device's rint is round to nearest even (no rounding-mode state on the device)
#else
  return std::nearbyint(x);  // the default rounding mode: to nearest, ties to even (torch.round)
#endif
}

// code = clamp(round(w / scale) + zero, 0, maxq) (qgru/gptq/quantizer.h). zero is integral in [0, maxq],
// so round(w / scale) + zero is exact whenever it lies in [0, maxq]; the int32 cast sees a value in [0, 255].
QGRU_HD int32_t grid_code(double w, double scale, double zero, int64_t maxq) {
  double q = round_half_even(w / scale) + zero;
  if (q < 0) q = 0;
  if (q > static_cast<double>(maxq)) q = static_cast<double>(maxq);
  return static_cast<int32_t>(q);
}

// scale · (code − zero); code − zero is exact (small integers), one rounding in the product.
QGRU_HD double grid_value(int32_t code, double scale, double zero) { return mul_rn(scale, code - zero); }

struct GridParams {
  double scale;
  double zero;  // integral, in [0, maxq]
};

// The quantizer's parameters (quantizer.h) from values[c · stride], c < count.
QGRU_HD GridParams grid_params(const double* values, int64_t stride, int64_t count, int64_t maxq, bool sym) {
  double xmin = 0.0, xmax = 0.0;  // min(0, min w), max(0, max w), as std::min / std::max order them
  for (int64_t c = 0; c < count; ++c) {
    const double v = values[c * stride];
    if (v < xmin) xmin = v;
    if (xmax < v) xmax = v;
  }
  if (sym) {
    const double magnitude = xmin < 0 ? -xmin : xmin;  // fabs without a -0.0 question: xmin <= 0
    xmax = xmax < magnitude ? magnitude : xmax;
    if (xmin < 0) xmin = -xmax;
  }
  if (xmin == 0.0 && xmax == 0.0) {
    xmin = -1.0;
    xmax = 1.0;
  }
  const double dmaxq = static_cast<double>(maxq);
  GridParams params;
  params.scale = (xmax - xmin) / dmaxq;
  params.zero = sym ? (dmaxq + 1.0) / 2.0 : round_half_even(-xmin / params.scale);
  return params;
}

// How far x is from a rounding boundary of round_half_even, in units of the grid step: |x − ⌊x⌋ − ½|, 0 at
// a tie, ½ on a grid point. Two computations of one code that differ by rounding noise may round apart only
// where this is about as small as their difference (the GPU check's "near-tie", docs/GPTQ.md).
QGRU_HD double rounding_margin(double x) {
#if defined(__CUDA_ARCH__)
  const double fraction = x - floor(x) - 0.5;
#else
  const double fraction = x - std::floor(x) - 0.5;
#endif
  return fraction < 0 ? -fraction : fraction;
}

// One output row across one block of `count` columns (processing order), GPTQ's inner loop:
//   for i < count:  q = code(w1[i]),  e = (w1[i] − value(q)) / U[i, i],  w1[j] −= e · U[i, j] for i < j < count
// with w1 starting as the row's block of W. Inputs: w[i · w_stride] (read only), U[i, j] at u[i · ldu + j]
// (the block's diagonal square of U), the parameters of column i at scales[slot[i] · table_stride] and
// zeros[...] (the row's entry of parameter table row slot[i]). Outputs: codes[i · codes_stride],
// err[i · err_stride] (the block's Err1 row, what the lazy update multiplies), and when tie_margin is not
// null, tie_margin[i · tie_stride] = rounding_margin(w1[i] / scale) (for checks; not part of GPTQ).
//
// Tiled by kTile columns so that the device keeps a tile of w1 in registers: a tile first takes the updates
// of every earlier column of the block (their errors are final), in column order, then runs its own columns.
// Each w1[j] therefore sees exactly the subtractions e_0·U[0, j], e_1·U[1, j], ..., e_{j−1}·U[j−1, j], in
// that order, each rounded twice (product, difference) as in the plain loop: the result does not depend on
// kTile (a test holds every tile size to the plain loop).
template <int kTile>
QGRU_HD void gptq_row_block(const double* w, int64_t w_stride, double* err, int64_t err_stride, int32_t* codes,
                            int64_t codes_stride, const double* u, int64_t ldu, int64_t count, const int32_t* slot,
                            const double* scales, const double* zeros, int64_t table_stride, int64_t maxq,
                            double* tie_margin = nullptr, int64_t tie_stride = 0) {
  for (int64_t t0 = 0; t0 < count; t0 += kTile) {
    const int64_t width = count - t0 < kTile ? count - t0 : kTile;
    double tile[kTile];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int j = 0; j < kTile; ++j) tile[j] = j < width ? w[(t0 + j) * w_stride] : 0.0;
    for (int64_t i = 0; i < t0; ++i) {  // earlier tiles' columns, in order
      const double e = err[i * err_stride];
      const double* u_row = u + i * ldu + t0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (int j = 0; j < kTile; ++j) {
        if (j < width) tile[j] = sub_rn(tile[j], mul_rn(e, u_row[j]));
      }
    }
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < kTile; ++i) {  // this tile's columns
      if (i < width) {
        const int64_t col = t0 + i;
        const int64_t s = slot[col] * table_stride;
        const double scale = scales[s], zero = zeros[s];
        const int32_t q = grid_code(tile[i], scale, zero, maxq);
        const double* u_row = u + col * ldu + t0;
        const double e = sub_rn(tile[i], grid_value(q, scale, zero)) / u_row[i];
        codes[col * codes_stride] = q;
        if (tie_margin != nullptr) tie_margin[col * tie_stride] = rounding_margin(tile[i] / scale);
        err[col * err_stride] = e;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int j = i + 1; j < kTile; ++j) {
          if (j < width) tile[j] = sub_rn(tile[j], mul_rn(e, u_row[j]));
        }
      }
    }
  }
}

// The tile width both paths use (the CPU's choice does not change a bit of the result; the device's bounds
// its registers: 32 doubles of tile).
constexpr int kRowBlockTile = 32;

// Word `word` of a GPTQ code stream (qgru/gptq/pack.h): bits [32·word, 32·word + 32) of the little-endian
// stream of `count` codes codes[c · stride], each `bits` wide (2, 3, 4 or 8; codes in [0, 2^bits)). Codes that
// straddle a word boundary (3 bits) give this word their part. Bits past the last code are 0.
QGRU_HD uint32_t stream_word(const int32_t* codes, int64_t stride, int64_t count, int64_t word, int bits) {
  const int64_t first_bit = word * 32;
  const int64_t first = first_bit / bits, last = (first_bit + 31) / bits;  // codes touching this word
  uint32_t value = 0;
  for (int64_t c = first; c <= last && c < count; ++c) {
    const uint64_t code = static_cast<uint32_t>(codes[c * stride]);
    const int64_t shift = c * bits - first_bit;  // in (−bits, 32)
    const uint64_t placed = shift >= 0 ? code << shift : code >> (-shift);
    value |= static_cast<uint32_t>(placed & 0xffffffffu);
  }
  return value;
}

}  // namespace qgru::gptq
