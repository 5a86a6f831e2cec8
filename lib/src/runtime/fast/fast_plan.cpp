// The fast executor's plan (fast_plan.h): the level, the packed weights with their proofs, and per matrix and per
// cell the kernels of fast_kernels.h chosen once.
#include "fast_plan.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "qgru/fixed/rounding.h"

namespace qgru {

bool cpu_has_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  return fast::avx2_kernels_built() && __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

bool cpu_has_avx512_vnni() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // libgcc's feature bits include the OS's consent (XCR0) to save the zmm and mask registers.
  return fast::avx512_kernels_built() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vbmi");
#else
  return false;
#endif
}

namespace fast {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

int pad16(int k) { return (k + 15) / 16 * 16; }

int64_t max_abs_code(const TensorQuant& q) { return std::max<int64_t>(-static_cast<int64_t>(q.qmin()), q.qmax()); }

bool fits_int16(const TensorQuant& q) { return q.qmin() >= -32768 && q.qmax() <= 32767; }

// ---- the matrices' kernels (the function pointers of PackedMatrix) --------------------------------------------

// U8: the VNNI GEMM on codes + a_bias (fast::gemm_vnni_u8s8 and its GEMVs).
void gemm_u8(const PackedMatrix& M, const Operand& a, size_t lda, int rows, int c0, int c1, int32_t* C, size_t ldc) {
  gemm_vnni_u8s8(a.u8, lda, rows, M.packed_vnni.data(), M.Kp, M.bias_rowsum.data(), c0, c1, C, ldc);
}
void gemv_u8(const PackedMatrix& M, const Operand& a, int c0, int c1, int32_t* C, bool descending) {
  gemv_vnni_u8s8(a.u8, M.packed_vnni.data(), M.Kp, M.bias_rowsum.data(), c0, c1, C, descending);
}
void gemv_part_u8(const PackedMatrix& M, const Operand& a, int c0, int c1, int32_t* C, int k0, int k1, bool accumulate) {
  gemv_vnni_u8s8_part(a.u8, M.packed_vnni.data(), M.Kp, M.bias_rowsum.data(), c0, c1, C, false, k0, k1, accumulate);
}
void operand_u8(const PackedMatrix& M, const int16_t* a16, size_t count, uint8_t* a, uint8_t*) {
  int16_to_u8_biased(a16, count, M.a_bias, a);  // codes + a_bias in [0, 255] (pack_vnni)
}

// Planes: the two-plane VNNI GEMM of 16-bit operand codes (fast::gemm_vnni_s16s8).
template <class OT>
void gemm_planes(const PackedMatrix& M, const Operand& a, size_t lda, int rows, int c0, int c1, OT* C, size_t ldc) {
  gemm_vnni_s16s8(a.u8, a.hi, lda, rows, M.packed_vnni.data(), M.Kp, M.bias_rowsum.data(), c0, c1, C, ldc);
}
void gemv_planes(const PackedMatrix& M, const Operand& a, int c0, int c1, int32_t* C, bool) {
  gemm_planes<int32_t>(M, a, static_cast<size_t>(M.Kp), 1, c0, c1, C, static_cast<size_t>(M.rows));
}
void operand_planes(const PackedMatrix&, const int16_t* a16, size_t count, uint8_t* a, uint8_t* b) {
  int16_to_planes(a16, count, a, b);
}

// The avx2 level's packed int8 GEMMs on int16 codes (fast::gemm_avx2_packed_part; the s8 form for 8-bit operand
// codes and weights in [-127, 127], fast::gemm_avx2_packed_s8_part), over the whole k or a part of it.
template <bool S8>
void gemm_packed_part(const PackedMatrix& M, const Operand& a, size_t lda, int rows, int c0, int c1, int32_t* C,
                      size_t ldc, int k0, int k1, bool accumulate) {
  if constexpr (S8) {
    gemm_avx2_packed_s8_part(a.i16, lda, rows, M.packed_vnni.data(), M.Kp, c0, c1, C, ldc, k0, k1, accumulate);
  } else {
    gemm_avx2_packed_part(a.i16, lda, rows, M.packed_vnni.data(), M.Kp, c0, c1, C, ldc, k0, k1, accumulate);
  }
}
template <bool S8>
void gemm_packed(const PackedMatrix& M, const Operand& a, size_t lda, int rows, int c0, int c1, int32_t* C, size_t ldc) {
  gemm_packed_part<S8>(M, a, lda, rows, c0, c1, C, ldc, 0, M.Kp, false);
}
template <bool S8>
void gemv_packed(const PackedMatrix& M, const Operand& a, int c0, int c1, int32_t* C, bool) {
  gemm_packed_part<S8>(M, a, static_cast<size_t>(M.Kp), 1, c0, c1, C, static_cast<size_t>(M.rows), 0, M.Kp, false);
}
template <bool S8>
void gemv_part_packed(const PackedMatrix& M, const Operand& a, int c0, int c1, int32_t* C, int k0, int k1, bool accumulate) {
  gemm_packed_part<S8>(M, a, static_cast<size_t>(M.Kp), 1, c0, c1, C, static_cast<size_t>(M.rows), k0, k1, accumulate);
}

// The madd GEMM on int16 codes against int8 or int16 weights (fast::gemm_avx2, int32 or int64 sums).
template <class WT>
const WT* weights(const PackedMatrix& M) {
  if constexpr (std::is_same_v<WT, int8_t>) {
    return M.q8.data();
  } else {
    return M.q16.data();
  }
}
template <class WT, class OT>
void gemm_madd(const PackedMatrix& M, const Operand& a, size_t lda, int rows, int c0, int c1, OT* C, size_t ldc) {
  gemm_avx2(a.i16, lda, rows, weights<WT>(M) + static_cast<size_t>(c0) * M.Kp, static_cast<size_t>(M.Kp), c1 - c0, M.Kp,
            M.chunk_vecs, C + c0, ldc);
}
template <class WT>
void gemv_madd(const PackedMatrix& M, const Operand& a, int c0, int c1, int32_t* C, bool) {
  gemm_madd<WT, int32_t>(M, a, static_cast<size_t>(M.Kp), 1, c0, c1, C, static_cast<size_t>(M.rows));
}
void operand_int16(const PackedMatrix&, const int16_t*, size_t, uint8_t*, uint8_t*) {}

// Pack `codes` and prove the GEMM against operands with |code| <= operand_max_abs. Returns "" when supported,
// else why not.
std::string pack(PackedMatrix& M, const std::vector<int32_t>& codes, int rows, int K, int64_t operand_max_abs) {
  M.rows = rows;
  M.K = K;
  M.Kp = pad16(K);
  int64_t wmax = 0;
  for (int32_t q : codes) wmax = std::max<int64_t>(wmax, q < 0 ? -static_cast<int64_t>(q) : q);
  M.int8 = true;
  for (int32_t q : codes) M.int8 = M.int8 && q >= -128 && q <= 127;
  if (wmax > 32767) return "a weight code of magnitude " + std::to_string(wmax) + " does not fit int16";
  const int64_t lane = 2 * wmax * operand_max_abs;  // one madd lane: two products
  if (lane > kInt32Max) {
    return "one madd pair 2*" + std::to_string(wmax) + "*" + std::to_string(operand_max_abs) + " overflows int32";
  }
  M.chunk_vecs = lane == 0 ? std::numeric_limits<int>::max()
                           : static_cast<int>(std::min<int64_t>(kInt32Max / lane, std::numeric_limits<int>::max()));
  M.acc_max_abs = static_cast<int64_t>(M.Kp) * wmax * operand_max_abs;
  M.out_int32 = M.acc_max_abs <= kInt32Max;
  if (M.int8) {
    M.q8.assign(static_cast<size_t>(rows) * M.Kp, 0);
  } else {
    M.q16.assign(static_cast<size_t>(rows) * M.Kp, 0);
  }
  for (int r = 0; r < rows; ++r) {
    for (int k = 0; k < K; ++k) {
      const int32_t q = codes[static_cast<size_t>(r) * K + k];
      if (M.int8) {
        M.q8[static_cast<size_t>(r) * M.Kp + k] = static_cast<int8_t>(q);
      } else {
        M.q16[static_cast<size_t>(r) * M.Kp + k] = static_cast<int16_t>(q);
      }
    }
  }
  return "";
}

void pack_vnni_layout(PackedMatrix& M) {
  M.packed_vnni.assign(static_cast<size_t>(vnni_padded_rows(M.rows)) * M.Kp, 0);
  pack_vnni_u8s8(M.q8.data(), M.rows, M.Kp, M.packed_vnni.data());
}

// The madd kernels (the fallback of both levels).
void choose_madd(PackedMatrix& M) {
  M.form = OperandForm::Int16;
  M.to_operand = operand_int16;
  if (M.out_int32) {
    M.gemm32 = M.int8 ? gemm_madd<int8_t, int32_t> : gemm_madd<int16_t, int32_t>;
    M.gemv = M.int8 ? gemv_madd<int8_t> : gemv_madd<int16_t>;
  } else {
    M.gemm64 = M.int8 ? gemm_madd<int8_t, int64_t> : gemm_madd<int16_t, int64_t>;
  }
}

// The avx512-vnni level: the VNNI layout when the weights are 8-bit and K <= kVnniMaxK: for 8-bit operand codes
// (range [q_min, q_max] within [-128, 127] or [0, 255]) the u8 x s8 GEMM (U8; its sums always fit int32:
// Kp·128·255 < 2^31 for Kp <= 65536), for other operand codes within int16 the two-plane GEMM (Planes,
// fast::gemm_vnni_s16s8); otherwise the madd GEMM.
void choose_avx512(PackedMatrix& M, const TensorQuant& operand) {
  choose_madd(M);
  if (!M.int8 || M.Kp > kVnniMaxK) return;
  bool planes = false;
  int32_t a_bias = 0;
  if (operand.qmin() >= -128 && operand.qmax() <= 127) {
    a_bias = 128;
  } else if (operand.qmin() >= 0 && operand.qmax() <= 255) {
    a_bias = 0;
  } else if (operand.qmin() >= -32768 && operand.qmax() <= 32767) {
    a_bias = 128;  // the high plane's bias (the low plane has none)
    planes = true;
  } else {
    return;
  }
  if (!planes && !M.out_int32) return;  // not reached (the bound above); the U8 kernels write int32 sums only
  M.a_bias = a_bias;
  pack_vnni_layout(M);
  M.bias_rowsum.assign(static_cast<size_t>(vnni_padded_rows(M.rows)), 0);
  for (int r = 0; r < M.rows; ++r) {
    int32_t sum = 0;  // |Σ_k W[r, k]| <= 128·Kp <= 2^23
    for (int k = 0; k < M.Kp; ++k) sum += M.q8[static_cast<size_t>(r) * M.Kp + k];
    M.bias_rowsum[static_cast<size_t>(r)] = M.a_bias * sum;
  }
  if (planes) {
    M.form = OperandForm::Planes;
    M.to_operand = operand_planes;
    M.gemm32 = M.out_int32 ? gemm_planes<int32_t> : nullptr;
    M.gemm64 = M.out_int32 ? nullptr : gemm_planes<int64_t>;
    M.gemv = M.out_int32 ? gemv_planes : nullptr;
    return;
  }
  M.form = OperandForm::U8;
  M.to_operand = operand_u8;
  M.int8_packed = true;
  M.gemm32 = gemm_u8;
  M.gemv = gemv_u8;
  M.gemv_part = gemv_part_u8;
}

// The avx2 level: int8 weights whose every sum fits int32 in the VNNI layout (no bias), read by the packed GEMMs
// against int16 operand codes (the s8 form for 8-bit operand codes and no weight -128); otherwise the madd GEMM.
void choose_avx2(PackedMatrix& M, const TensorQuant& operand) {
  choose_madd(M);
  if (!M.int8 || !M.out_int32) return;
  pack_vnni_layout(M);
  const bool s8 = operand.qmin() >= -128 && operand.qmax() <= 127 &&
                  std::none_of(M.q8.begin(), M.q8.end(), [](int8_t w) { return w == -128; });
  M.gemm32 = s8 ? gemm_packed<true> : gemm_packed<false>;
  M.gemv = s8 ? gemv_packed<true> : gemv_packed<false>;
  M.gemv_part = s8 ? gemv_part_packed<true> : gemv_part_packed<false>;
  M.int8_packed = true;
}

// ---- the cells' kernels (the function pointers of CellKernels) -----------------------------------------------

// gru_cell_element (qgru/fixed/gru_cell.h) with B-1/B-2's constants folded (FoldedOffsets), no trace:
// C-1 .. C-4 are gru_cell_gates itself.
template <class GX, class GH>
inline int32_t fused_cell_element(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h,
                                  int32_t j, const GX* gx, const GH* gh, int32_t q_h_old) {
  const int32_t H = p.hidden_size;
  int32_t q_ih[3];
  int32_t q_hh[3];
  for (int32_t g = 0; g < 3; ++g) {
    const int32_t c = g * H + j;
    q_ih[g] = requantize_gemm_x(p, c, static_cast<int64_t>(gx[c]) + offset_x[c]);
    q_hh[g] = requantize_gemm_h(p, c, static_cast<int64_t>(gh[c]) + offset_h[c]);
  }
  return gru_cell_gates(p, q_ih, q_hh, q_h_old, nullptr);
}

// Element by element: every cell the vector kernels do not take (Pwl activations, the linear_before_reset = 0 cell
// outside the product form, a cell outside the avx2 level's int64 proof).
template <class GX, class GH>
void cell_element(const PackedCell& pc, const void* gx_, const void* gh_, const int16_t* hc, int j0, int j1, int16_t* hn,
                  uint8_t* hn_u8, int32_t* dst, const FloatOutput& out_f, float* y) {
  const GX* gx = static_cast<const GX*>(gx_);
  const GH* gh = static_cast<const GH*>(gh_);
  const int64_t* offset_x = pc.folded.x.data();
  const int64_t* offset_h = pc.folded.h.data();
  for (int j = j0; j < j1; ++j) {
    const int32_t q_h_new = fused_cell_element(pc.view, offset_x, offset_h, j, gx, gh, hc[j]);
    hn[j] = static_cast<int16_t>(q_h_new);  // h's code range fits int16 (checked at pack time)
    dst[j] = q_h_new;
    if (hn_u8) hn_u8[j] = static_cast<uint8_t>(q_h_new + pc.R.a_bias);  // h codes + a_bias lie in [0, 255]
  }
  if (y) out_f.rows_of(dst, y, j0, j1);
}

// The int64-lane kernels (fast::cell_rows_avx2 with products by vpmuldq, fast::cell_rows_avx512), power-of-two or
// (Mult) multiplier-scale rescales.
template <bool Mult, class GX, class GH>
void cell_avx2_i64(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1, int16_t* hn,
                   uint8_t* hn_u8, int32_t* dst, const FloatOutput& out_f, float* y) {
  const GX* gx_ = static_cast<const GX*>(gx);
  const GH* gh_ = static_cast<const GH*>(gh);
  if constexpr (Mult) {
    cell_rows_avx2_multiplier(pc.view, pc.folded.x.data(), pc.folded.h.data(), gx_, gh_, hc, j0, j1, hn, hn_u8, pc.R.a_bias, dst);
  } else {
    cell_rows_avx2(pc.view, pc.folded.x.data(), pc.folded.h.data(), gx_, gh_, hc, j0, j1, hn, hn_u8, pc.R.a_bias, dst);
  }
  if (y) out_f.rows_of(dst, y, j0, j1);
}
template <bool Mult, class GX, class GH>
void cell_avx512_i64(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1, int16_t* hn,
                     uint8_t* hn_u8, int32_t* dst, const FloatOutput& out_f, float* y) {
  const GX* gx_ = static_cast<const GX*>(gx);
  const GH* gh_ = static_cast<const GH*>(gh);
  if constexpr (Mult) {
    cell_rows_avx512_multiplier(pc.view, pc.byte_tables, pc.folded.x.data(), pc.folded.h.data(), gx_, gh_, hc, j0, j1, hn,
                                hn_u8, pc.R.a_bias, dst);
  } else {
    cell_rows_avx512(pc.view, pc.byte_tables, pc.folded.x.data(), pc.folded.h.data(), gx_, gh_, hc, j0, j1, hn, hn_u8,
                     pc.R.a_bias, dst);
  }
  if (y) out_f.rows_of(dst, y, j0, j1);
}

// C-2 / C-2a of the linear_before_reset = 0 cell (ResetHiddenFn): element by element, gru_cell_reset_hidden_gates
// itself after B-1 / B-2 of the reset channel with the folded offsets (the fallback), or the vector kernels.
template <class GX, class GH>
void reset_hidden_element(const PackedCell& pc, const void* gx_, const void* gh_, const int16_t* hc, int j0, int j1,
                          int16_t* q_reset_hidden) {
  const GruCellParamsView& view = pc.reset_view;
  const GX* gx = static_cast<const GX*>(gx_);
  const GH* gh = static_cast<const GH*>(gh_);
  for (int j = j0; j < j1; ++j) {
    const int32_t c = view.hidden_size + j;
    const int32_t q_ih_r = requantize_gemm_x(view, c, static_cast<int64_t>(gx[c]) + pc.folded.x[static_cast<size_t>(c)]);
    const int32_t q_hh_r = requantize_gemm_h(view, c, static_cast<int64_t>(gh[c]) + pc.folded.h[static_cast<size_t>(c)]);
    q_reset_hidden[j] = static_cast<int16_t>(gru_cell_reset_hidden_gates(view, q_ih_r, q_hh_r, hc[j]));  // h's codes fit int16
  }
}
// On int32 lanes (the cell's int32 plan; both sides' sums int32).
template <bool Avx512>
void reset_hidden_i32_row(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1,
                          int16_t* q_reset_hidden) {
  const int32_t* gx32 = static_cast<const int32_t*>(gx);
  const int32_t* gh32 = static_cast<const int32_t*>(gh);
  if constexpr (Avx512) {
    reset_hidden_avx512_i32(pc.reset_view, pc.reset_byte_tables, pc.plan32, gx32, gh32, hc, j0, j1, q_reset_hidden);
  } else {
    reset_hidden_avx2_i32(pc.reset_view, pc.plan32, gx32, gh32, hc, j0, j1, q_reset_hidden);
  }
}
template <bool Mult, class GX, class GH>
void reset_hidden_avx2_row(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1,
                           int16_t* q_reset_hidden) {
  const GX* gx_ = static_cast<const GX*>(gx);
  const GH* gh_ = static_cast<const GH*>(gh);
  if constexpr (Mult) {
    reset_hidden_avx2_multiplier(pc.reset_view, pc.folded.x.data(), pc.folded.h.data(), gx_, gh_, hc, j0, j1, q_reset_hidden);
  } else {
    reset_hidden_avx2(pc.reset_view, pc.folded.x.data(), pc.folded.h.data(), gx_, gh_, hc, j0, j1, q_reset_hidden);
  }
}
template <bool Mult, class GX, class GH>
void reset_hidden_avx512_row(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1,
                             int16_t* q_reset_hidden) {
  const GX* gx_ = static_cast<const GX*>(gx);
  const GH* gh_ = static_cast<const GH*>(gh);
  if constexpr (Mult) {
    reset_hidden_avx512_multiplier(pc.reset_view, pc.reset_byte_tables, pc.folded.x.data(), pc.folded.h.data(), gx_, gh_, hc,
                                   j0, j1, q_reset_hidden);
  } else {
    reset_hidden_avx512(pc.reset_view, pc.reset_byte_tables, pc.folded.x.data(), pc.folded.h.data(), gx_, gh_, hc, j0, j1,
                        q_reset_hidden);
  }
}

// The int32-lane kernels (both sides' sums int32, cell_fits_int32 proved): AVX2 (then the floats from dst) and
// AVX-512 (the floats written beside the codes, FloatCopy), on B-1's sums or on the x terms.
template <bool XTerms>
void cell_avx2_i32(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1, int16_t* hn,
                   uint8_t* hn_u8, int32_t* dst, const FloatOutput& out_f, float* y) {
  const int32_t* gx32 = static_cast<const int32_t*>(gx);
  const int32_t* gh32 = static_cast<const int32_t*>(gh);
  if constexpr (XTerms) {
    cell_rows_avx2_i32_xterms(pc.view, pc.plan32, gx32, gh32, hc, j0, j1, hn, hn_u8, pc.R.a_bias, dst);
  } else {
    cell_rows_avx2_i32(pc.view, pc.plan32, gx32, gh32, hc, j0, j1, hn, hn_u8, pc.R.a_bias, dst);
  }
  if (y) out_f.rows_of(dst, y, j0, j1);
}
template <bool XTerms>
void cell_avx512_i32(const PackedCell& pc, const void* gx, const void* gh, const int16_t* hc, int j0, int j1, int16_t* hn,
                     uint8_t* hn_u8, int32_t* dst, const FloatOutput& out_f, float* y) {
  const int32_t* gx32 = static_cast<const int32_t*>(gx);
  const int32_t* gh32 = static_cast<const int32_t*>(gh);
  const FloatCopy copy{y, out_f.scale, out_f.zp};
  if constexpr (XTerms) {
    cell_rows_avx512_i32_xterms(pc.view, pc.byte_tables, pc.plan32, gx32, gh32, hc, j0, j1, hn, hn_u8, pc.R.a_bias, dst, copy);
  } else {
    cell_rows_avx512_i32(pc.view, pc.byte_tables, pc.plan32, gx32, gh32, hc, j0, j1, hn, hn_u8, pc.R.a_bias, dst, copy);
  }
}

// A kernel template for the cell's accumulator types (W's and R's sums: int32 when their proofs say so).
template <template <class, class> class K>
auto for_types(bool gx32, bool gh32) -> std::remove_const_t<decltype(K<int32_t, int32_t>::fn)> {
  if (gx32 && gh32) return K<int32_t, int32_t>::fn;
  if (gx32) return K<int32_t, int64_t>::fn;
  if (gh32) return K<int64_t, int32_t>::fn;
  return K<int64_t, int64_t>::fn;
}
template <class GX, class GH>
struct ElementKernel {
  static constexpr CellRowFn fn = cell_element<GX, GH>;
};
template <bool Mult>
struct Avx2I64 {
  template <class GX, class GH>
  struct Kernel {
    static constexpr CellRowFn fn = cell_avx2_i64<Mult, GX, GH>;
  };
};
template <bool Mult>
struct Avx512I64 {
  template <class GX, class GH>
  struct Kernel {
    static constexpr CellRowFn fn = cell_avx512_i64<Mult, GX, GH>;
  };
};
template <class GX, class GH>
struct ResetHiddenElement {
  static constexpr ResetHiddenFn fn = reset_hidden_element<GX, GH>;
};
template <bool Mult>
struct ResetHiddenAvx2 {
  template <class GX, class GH>
  struct Kernel {
    static constexpr ResetHiddenFn fn = reset_hidden_avx2_row<Mult, GX, GH>;
  };
};
template <bool Mult>
struct ResetHiddenAvx512 {
  template <class GX, class GH>
  struct Kernel {
    static constexpr ResetHiddenFn fn = reset_hidden_avx512_row<Mult, GX, GH>;
  };
};

// The cell's constants and kernel table for level `isa` (the constructor's setup, once per cell).
void prepare_cell(const GruCellQuantParams& params, FastIsa isa, PackedCell& pc) {
  pc.view = params.view();
  pc.folded.fill(pc.view);
  pc.tabulated.apply(pc.view);
  pc.reset_view = pc.view;
  pc.reset_form.apply(pc.view);  // the linear_before_reset = 0 cell's second half for the kernels below
  const GruCellParamsView& v = pc.view;
  const bool all_tables = v.update_gate.impl == ActivationImpl::Table && v.reset_gate.impl == ActivationImpl::Table &&
                          v.new_gate.impl == ActivationImpl::Table;
  const bool avx2 = isa == FastIsa::Avx2;
  const bool multiplier = v.multiplier_scales;
  bool vector_cell = isa == FastIsa::Avx512Vnni && all_tables;  // the avx512-vnni level's cell kernels
  prepare_byte_tables(v, &pc.byte_tables);
  // The int32 cells shift only (their proof has no multipliers): a multiplier-scale cell takes the int64 lanes.
  bool cell32 = (vector_cell || (avx2 && all_tables)) && !multiplier && pc.W.out_int32 && pc.R.out_int32 &&
                cell_fits_int32(v, pc.W.acc_max_abs, pc.R.acc_max_abs, pc.folded.x.data(), pc.folded.h.data());
  if (cell32) prepare_cell32_plan(v, pc.folded.x.data(), pc.folded.h.data(), &pc.plan32);  // narrowing proved exact above
  bool cell64_avx2 = avx2 && !cell32 && cell_avx2_i64_applies(v);
  // Not in the product form: element by element, gru_cell_gates itself (docs/BENCHMARKS.md has its cost).
  if (v.reset_before_linear) vector_cell = cell32 = cell64_avx2 = false;
  // The avx512-vnni int32 cell's per-channel additions (the offset, and in the floor form half) folded into
  // the u8 VNNI GEMMs' bias row sums, so that each linear of the cell does two operations and a load fewer
  // (Cell32Plan::sums_folded_x, _h). Only where nothing else reads those sums: not for the
  // linear_before_reset = 0 cell, whose C-2 reads B-2's raw sums (reset_before_step).
  if (cell32 && vector_cell && params.linear_before_reset) {
    auto fold = [&](PackedMatrix& M, bool x_side) {
      if (M.form != OperandForm::U8) return false;
      for (size_t c = 0; c < static_cast<size_t>(M.rows); ++c) {
        // bias' = bias - fold in u32 (the GEMM's lanes wrap as well; the sum it ends with fits int32)
        const uint32_t folded = static_cast<uint32_t>(M.bias_rowsum[c]) - static_cast<uint32_t>(cell32_sum_fold(pc.plan32, x_side, c));
        M.bias_rowsum[c] = static_cast<int32_t>(folded);  // the low 32 bits (GCC, Clang; C++20 requires it)
      }
      return true;
    };
    pc.plan32.sums_folded_x = fold(pc.W, true);
    pc.plan32.sums_folded_h = fold(pc.R, false);
  }
  CellKernels& k = pc.kernels;
  const bool gx32 = pc.W.out_int32, gh32 = pc.R.out_int32;
  if (cell32 && avx2) {
    k = {"avx2 int32", cell_avx2_i32<false>, cell_avx2_i32<true>, x_terms_avx2_i32, nullptr};
  } else if (cell32) {
    k = {"avx512 int32", cell_avx512_i32<false>, cell_avx512_i32<true>, x_terms_avx512_i32, nullptr};
    // Batch 1 on one thread, H in {16, 32, 48, 64}: the whole time loop in one kernel over R's VNNI layout.
    if (pc.R.form == OperandForm::U8 && small_recurrence_applies(v.hidden_size, pc.R.Kp)) {
      k.small_recurrence = recurrence_small_avx512_i32;
    }
  } else if (cell64_avx2) {
    k = {multiplier ? "avx2 int64 multiplier" : "avx2 int64",
         multiplier ? for_types<Avx2I64<true>::Kernel>(gx32, gh32) : for_types<Avx2I64<false>::Kernel>(gx32, gh32)};
  } else if (vector_cell) {
    k = {multiplier ? "avx512 int64 multiplier" : "avx512 int64",
         multiplier ? for_types<Avx512I64<true>::Kernel>(gx32, gh32) : for_types<Avx512I64<false>::Kernel>(gx32, gh32)};
  } else {
    k = {"element", for_types<ElementKernel>(gx32, gh32)};
  }
  // The linear_before_reset = 0 cell's C-2 / C-2a (reset_before_step) on the cell's own view: on int32 lanes with the
  // int32 cell (its plan, reset_hidden_fits_int32); else on int64 lanes where the reset gate is a table (the
  // avx512-vnni level; the avx2 level with reset_hidden_avx2_applies); else element by element.
  const GruCellParamsView& rv = pc.reset_view;
  if (!rv.reset_before_linear) return;
  if (isa == FastIsa::Avx512Vnni && rv.reset_gate.impl == ActivationImpl::Table) prepare_byte_tables(rv, &pc.reset_byte_tables);
  if (cell32 && rv.reset_gate.impl == ActivationImpl::Table && reset_hidden_fits_int32(rv)) {
    k.reset_hidden_name = avx2 ? "avx2 int32" : "avx512 int32";
    k.reset_hidden = avx2 ? reset_hidden_i32_row<false> : reset_hidden_i32_row<true>;
  } else if (isa == FastIsa::Avx512Vnni && rv.reset_gate.impl == ActivationImpl::Table) {
    k.reset_hidden_name = multiplier ? "avx512 int64 multiplier" : "avx512 int64";
    k.reset_hidden = multiplier ? for_types<ResetHiddenAvx512<true>::Kernel>(gx32, gh32)
                                : for_types<ResetHiddenAvx512<false>::Kernel>(gx32, gh32);
  } else if (avx2 && reset_hidden_avx2_applies(rv)) {
    k.reset_hidden_name = multiplier ? "avx2 int64 multiplier" : "avx2 int64";
    k.reset_hidden = multiplier ? for_types<ResetHiddenAvx2<true>::Kernel>(gx32, gh32)
                                : for_types<ResetHiddenAvx2<false>::Kernel>(gx32, gh32);
  } else {
    k.reset_hidden_name = "element";
    k.reset_hidden = for_types<ResetHiddenElement>(gx32, gh32);
  }
}

// The level a run uses: options.isa, or QGRU_FAST_ISA when Auto, or the best the CPU has. Returns "" and the
// level, or why none applies ("reference" forced, or a level this CPU lacks).
std::string choose_isa(const FastExecutorOptions& options, FastIsa* isa) {
  FastIsa want = options.isa;
  if (want == FastIsa::Auto) {
    const char* env = std::getenv("QGRU_FAST_ISA");
    const std::string e = env ? env : "";
    if (e == "avx2") {
      want = FastIsa::Avx2;
    } else if (e == "avx512-vnni") {
      want = FastIsa::Avx512Vnni;
    } else if (e == "reference") {
      return "QGRU_FAST_ISA=reference";
    } else if (!e.empty()) {
      return "QGRU_FAST_ISA=" + e + " is not one of avx2, avx512-vnni, reference";
    }
  }
  if (want == FastIsa::Auto) want = cpu_has_avx512_vnni() ? FastIsa::Avx512Vnni : FastIsa::Avx2;
  if (!cpu_has_avx2()) return "this CPU has no AVX2";
  if (want == FastIsa::Avx512Vnni && !cpu_has_avx512_vnni()) return "this CPU has no AVX-512 VNNI (avx512f/bw/dq/vl/vnni/vbmi)";
  *isa = want;
  return "";
}

}  // namespace

void FoldedOffsets::fill(const GruCellParamsView& v) {
  const int G = 3 * v.hidden_size;
  x.resize(static_cast<size_t>(G));
  h.resize(static_cast<size_t>(G));
  for (int c = 0; c < G; ++c) {
    x[static_cast<size_t>(c)] = bias_in_gemm_x(v, c) - v.W_sum[c] * static_cast<int64_t>(v.zp_x);
    h[static_cast<size_t>(c)] = bias_in_gemm_h(v, c) - v.R_sum[c] * static_cast<int64_t>(v.h.zp);
  }
}

void TabulatedActivations::apply(GruCellParamsView& v) {
  ActivationView* gates[3] = {&v.update_gate, &v.reset_gate, &v.new_gate};
  for (int g = 0; g < 3; ++g) {
    ActivationView& a = *gates[g];
    const int64_t count = static_cast<int64_t>(a.q_in_max) - a.q_in_min + 1;
    if (a.impl != ActivationImpl::Pwl || count <= 0 || count > (int64_t{1} << 17)) continue;
    std::vector<int32_t>& t = tables[g];
    t.resize(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) t[static_cast<size_t>(i)] = evaluate_activation(a, static_cast<int32_t>(a.q_in_min + i));
    a.impl = ActivationImpl::Table;
    a.table = t.data();
  }
}

bool ResetBeforeForm::apply(GruCellParamsView& v) {
  ActivationView& r = v.reset_gate;
  const int64_t unit = static_cast<int64_t>(v.zp_reset_gate_output) + 1;
  if (!v.reset_before_linear || r.impl != ActivationImpl::Table || unit > r.q_out_max) return false;
  unit_reset_table.assign(static_cast<size_t>(static_cast<int64_t>(r.q_in_max) - r.q_in_min + 1), static_cast<int32_t>(unit));
  r.table = unit_reset_table.data();
  v.shift_reset_mul_hh_to_new_gate_input = v.shift_weight_hh_linear_to_new_gate_input;
  v.multiplier_reset_mul_hh_to_new_gate_input = v.multiplier_weight_hh_linear_to_new_gate_input;  // rescale(1 · v) too
  v.reset_before_linear = false;
  return true;
}

}  // namespace fast

FastPathSupport make_fast_plan(const QuantizedGru& model, const FastExecutorOptions& options) {
  FastPathSupport s;
  FastIsa isa = FastIsa::Avx2;
  if (!options.allow_simd) {
    s.reason = "SIMD disabled by the caller";
    return s;
  }
  s.reason = fast::choose_isa(options, &isa);
  if (!s.reason.empty()) return s;
  if (model.cells.empty() || model.cells.size() != static_cast<size_t>(model.num_layers) * model.num_directions) {
    s.reason = "the model's cell list does not match its layers x directions";
    return s;
  }
  auto plan = std::make_shared<FastPlan>();
  plan->isa = isa;
  plan->cells.reserve(model.cells.size());
  for (const GruCellQuantParams& p : model.cells) {
    const std::string where = "cell (layer " + std::to_string(p.layer) + ", direction " + std::to_string(p.direction) + ")";
    const TensorQuant& x = p.q(GruTensor::x);
    const TensorQuant& h = p.q(GruTensor::h);
    if (!fast::fits_int16(x) || !fast::fits_int16(h)) {
      s.reason = where + ": x or h codes do not fit int16 (" + describe_quant(x) + ", " + describe_quant(h) + ")";
      return s;
    }
    plan->cells.emplace_back();
    fast::PackedCell& pc = plan->cells.back();
    std::string why = fast::pack(pc.W, p.q_W, 3 * p.hidden_size, p.input_size, fast::max_abs_code(x));
    if (why.empty()) why = fast::pack(pc.R, p.q_R, 3 * p.hidden_size, p.hidden_size, fast::max_abs_code(h));
    if (!why.empty()) {
      s.reason = where + ": " + why;
      return s;
    }
  }
  for (size_t i = 0; i < model.cells.size(); ++i) {
    fast::PackedCell& pc = plan->cells[i];
    const GruCellQuantParams& p = model.cells[i];
    if (isa == FastIsa::Avx512Vnni) {
      fast::choose_avx512(pc.W, p.q(GruTensor::x));
      fast::choose_avx512(pc.R, p.q(GruTensor::h));
    } else {
      fast::choose_avx2(pc.W, p.q(GruTensor::x));
      fast::choose_avx2(pc.R, p.q(GruTensor::h));
    }
    fast::prepare_cell(p, isa, pc);
  }
  // Layer 0's x as one set of VNNI operand rows (the linear_before_reset = 0 cell's time loop reads int16 x codes).
  plan->layer0_u8_rows = true;
  plan->layer0_a_bias = plan->cells[0].W.a_bias;
  for (int d = 0; d < model.num_directions; ++d) {
    const fast::PackedMatrix& W = plan->cells[static_cast<size_t>(d)].W;
    if (W.form != fast::OperandForm::U8 || W.a_bias != plan->layer0_a_bias || !model.cell(0, d).linear_before_reset) {
      plan->layer0_u8_rows = false;
    }
  }
  s.supported = true;
  s.isa = isa == FastIsa::Avx512Vnni ? "avx512-vnni" : "avx2";
  s.plan = std::move(plan);
  return s;
}

FastPathSupport fast_path_support(const QuantizedGru& model, const FastExecutorOptions& options) {
  return make_fast_plan(model, options);
}

}  // namespace qgru
