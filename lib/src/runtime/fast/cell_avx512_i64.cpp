// The avx512-vnni level's cell step on eight int64 lanes (contracts in fast_kernels.h: cell_rows_avx512 and its
// multiplier-scale form, reset_hidden_avx512), for cells outside the int32 proof, multiplier-scale cells, and the
// linear_before_reset = 0 cell's C-2 / C-2a. Compiled for any x86-64: every function here carries QGRU_AVX512 and is
// only called after cpu_has_avx512_vnni() (fast_plan.cpp, choose_isa); on other architectures the entry points
// exist but are never called.
#include "avx512_target.h"
#include "fast_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <type_traits>

namespace qgru::fast {

#if QGRU_FAST_HAVE_AVX512

namespace {

// ---- the cell step --------------------------------------------------------------------------------------

// rshift_round (qgru/fixed/rounding.h) on eight int64 lanes with per-lane shifts s in -62..62:
//   s > 0: sign(v)·((|v| + 2^(s-1)) >> s), which is floor(|v| / 2^s) + [|v| mod 2^s >= 2^(s-1)], i.e.
//          half away from zero. |v| <= 2^62 (the overflow proof), so |v| + 2^61 does not wrap.
//   s <= 0: v·2^-s as a left shift (s = 0: v); the proof bounds the product below 2^62.
// Shift counts outside 0..63 give 0 in vpsllvq/vpsrlvq; the lanes where that happens are not selected.
QGRU_AVX512 inline __m512i rshift_round_v(__m512i v, __m512i s) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i one = _mm512_set1_epi64(1);
  const __mmask8 right = _mm512_cmpgt_epi64_mask(s, zero);
  const __mmask8 negative = _mm512_cmplt_epi64_mask(v, zero);
  const __m512i magnitude = _mm512_abs_epi64(v);
  const __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(s, one));  // 2^(s-1) for s > 0
  const __m512i rounded = _mm512_srlv_epi64(_mm512_add_epi64(magnitude, half), s);
  const __m512i signed_rounded = _mm512_mask_sub_epi64(rounded, negative, zero, rounded);
  const __m512i left = _mm512_sllv_epi64(v, _mm512_sub_epi64(zero, s));
  return _mm512_mask_blend_epi64(right, left, signed_rounded);
}

// A shift that is the same for every lane (a cell constant), with its rounding constants prepared once.
struct UniformShift {
  int s = 0;
  __m128i count;   // s > 0: s; s < 0: -s (the left shift)
  __m512i half;    // s > 0: 2^(s-1)
};
QGRU_AVX512 inline UniformShift uniform_shift(int s) {
  UniformShift u;
  u.s = s;
  u.count = _mm_cvtsi32_si128(s > 0 ? s : -s);
  u.half = _mm512_set1_epi64(s > 0 ? int64_t{1} << (s - 1) : 0);
  return u;
}
// rshift_round with a uniform shift: the same formulas as rshift_round_v.
QGRU_AVX512 inline __m512i rshift_round_u(__m512i v, const UniformShift& u) {
  if (u.s > 0) {
    const __mmask8 negative = _mm512_movepi64_mask(v);
    const __m512i rounded = _mm512_srl_epi64(_mm512_add_epi64(_mm512_abs_epi64(v), u.half), u.count);
    return _mm512_mask_sub_epi64(rounded, negative, _mm512_setzero_si512(), rounded);
  }
  if (u.s == 0) return v;
  return _mm512_sll_epi64(v, u.count);  // v·2^-s
}

// A rescale the same for every lane (a cell constant, gru_cell.h's rescale): its shift and, in a multiplier-scale
// cell, its multiplier (1..2^31-1) as int64 lanes.
struct UniformRescale {
  UniformShift shift;
  __m512i multiplier;
};
QGRU_AVX512 inline UniformRescale uniform_rescale(int32_t multiplier, int s) {
  return {uniform_shift(s), _mm512_set1_epi64(multiplier)};
}
// rescale on eight lanes: rshift_round(v, s), or with Mult multiply_rshift_round(v, m, s) = rshift_round(v·m, s).
// v·m by vpmullq, the low 64 bits of the product: the exact int64 product, because the overflow proof bounds
// |v|·m by 2^62 for every rescale of the model (rshift_round's input contract).
template <bool Mult>
QGRU_AVX512 inline __m512i rescale_u(__m512i v, const UniformRescale& r) {
  if constexpr (Mult) v = _mm512_mullo_epi64(v, r.multiplier);
  return rshift_round_u(v, r.shift);
}

// One code space's zero point and range as lanes.
struct SpaceV {
  __m512i zp, q_min, q_max;
};
QGRU_AVX512 inline SpaceV space_v(const CodeSpace& c) {
  return {_mm512_set1_epi64(c.zp), _mm512_set1_epi64(c.q_min), _mm512_set1_epi64(c.q_max)};
}
QGRU_AVX512 inline __m512i saturate_v(__m512i v, const SpaceV& s) {
  return _mm512_min_epi64(_mm512_max_epi64(v, s.q_min), s.q_max);
}

// Eight accumulators as int64 lanes (masked lanes read as 0).
QGRU_AVX512 inline __m512i load_acc(const int32_t* p, __mmask8 k) {
  return _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, p));
}
QGRU_AVX512 inline __m512i load_acc(const int64_t* p, __mmask8 k) { return _mm512_maskz_loadu_epi64(k, p); }

// requantize_gemm_x / _h (gru_cell.h) of accumulator + folded offset into a linear's code space, per-channel
// shifts and, with Mult, per-channel multipliers (the int64 sum times the multiplier by vpmullq: exact, the overflow
// proof bounds |sum|·m by 2^62).
template <bool Mult, class AT>
QGRU_AVX512 inline __m512i linear_v(const AT* acc, const int64_t* offset, const int32_t* shift, const int32_t* multiplier,
                                    __mmask8 k, const SpaceV& space) {
  __m512i sum = _mm512_add_epi64(load_acc(acc, k), _mm512_maskz_loadu_epi64(k, offset));  // S_W[c]·S_x
  if constexpr (Mult) sum = _mm512_mullo_epi64(sum, _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, multiplier)));
  const __m512i s = _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, shift));
  return saturate_v(_mm512_add_epi64(rshift_round_v(sum, s), space.zp), space);
}

// A sigmoid gate's input (compute_sigmoid_gate_input, C-1 / C-2): each linear's code difference rescaled into the
// gate input's space, the two added with its zero point, saturated. Each rescaled term is bounded by the overflow
// proof (|.| <= 2^62 / 2^s + 1 <= 2^61 + 1 for the right shifts the proof allows, and the proof bounds left shifts),
// the 16-bit zero point adds nothing that reaches 2^63.
struct SigmoidGateV {
  UniformRescale ih, hh;
  SpaceV input;
};
template <bool Mult>
QGRU_AVX512 inline __m512i sigmoid_gate_input_v(const SigmoidGateV& g, __m512i ih_diff, __m512i hh_diff) {
  return saturate_v(_mm512_add_epi64(_mm512_add_epi64(rescale_u<Mult>(ih_diff, g.ih), rescale_u<Mult>(hh_diff, g.hh)), g.input.zp),
                    g.input);
}
QGRU_AVX512 inline SigmoidGateV sigmoid_gate_v(const SigmoidGateRescales& g) {
  return {uniform_rescale(g.multiplier_ih, g.shift_ih), uniform_rescale(g.multiplier_hh, g.shift_hh), space_v(g.input)};
}

// evaluate_activation (activation.h) of a Table activation: table[sat(q) - q_in_min], from the byte form
// (CellByteTables, four zmm registers read with vpermt2b) when there is one, else by a 32-bit gather. The
// index is saturated into the table first, so either read stays inside it.
struct TableV {
  const int32_t* table = nullptr;
  __m512i q_in_min, q_in_max;
  bool bytes = false;
  bool is_signed = false;
};
QGRU_AVX512 inline TableV table_v(const ActivationView& a, const CellByteTables& b, int g, __m512i* regs) {
  TableV t;
  t.table = a.table;
  t.q_in_min = _mm512_set1_epi64(a.q_in_min);
  t.q_in_max = _mm512_set1_epi64(a.q_in_max);
  t.bytes = b.bytes[g];
  t.is_signed = b.is_signed[g];
  for (int i = 0; i < 4; ++i) regs[i] = _mm512_load_si512(b.table[g] + 64 * i);
  return t;
}

QGRU_AVX512 inline __m512i activation_v(const TableV& t, const __m512i* regs, __m512i q) {
  const __m512i index = _mm512_sub_epi64(_mm512_min_epi64(_mm512_max_epi64(q, t.q_in_min), t.q_in_max), t.q_in_min);
  if (!t.bytes) return _mm512_cvtepi32_epi64(_mm512_i64gather_epi32(index, t.table, 4));
  // index in 0..255 as bytes 0..7; vpermt2b picks from the 128 bytes regs[0..1] (bit 7 clear) or regs[2..3].
  const __m512i idx8 = _mm512_castsi128_si512(_mm512_cvtepi64_epi8(index));
  const __m512i from_lo = _mm512_permutex2var_epi8(regs[0], idx8, regs[1]);
  const __m512i from_hi = _mm512_permutex2var_epi8(regs[2], idx8, regs[3]);
  const __mmask64 upper = _mm512_movepi8_mask(idx8);  // bit 7 of each index byte
  const __m128i bytes = _mm512_castsi512_si128(_mm512_mask_blend_epi8(upper, from_lo, from_hi));
  return t.is_signed ? _mm512_cvtepi8_epi64(bytes) : _mm512_cvtepu8_epi64(bytes);
}

template <bool Mult, class GX, class GH>
QGRU_AVX512 void cell_impl(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                           const GX* gx, const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                           uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {
  const int H = p.hidden_size;
  // Every cell constant as lanes, once (the loop below stores through pointers that could alias p).
  const SpaceV ih_space = space_v(p.weight_ih_linear), hh_space = space_v(p.weight_hh_linear);
  const SpaceV n_in = space_v(p.new_gate_input);
  const SpaceV h_space = space_v(p.h);
  const SigmoidGateV z_gate = sigmoid_gate_v(update_gate_rescales(p)), r_gate = sigmoid_gate_v(reset_gate_rescales(p));
  const UniformRescale s_ih_n = uniform_rescale(p.multiplier_weight_ih_linear_to_new_gate_input, p.shift_weight_ih_linear_to_new_gate_input);
  const UniformRescale s_rh_n = uniform_rescale(p.multiplier_reset_mul_hh_to_new_gate_input, p.shift_reset_mul_hh_to_new_gate_input);
  const UniformRescale s_n_h = uniform_rescale(p.multiplier_new_gate_output_to_h, p.shift_new_gate_output_to_h);
  const UniformRescale s_u = uniform_rescale(p.multiplier_update_gate_output, p.shift_update_gate_output);
  const __m512i zp_z_out = _mm512_set1_epi64(p.zp_update_gate_output);
  const __m512i zp_r_out = _mm512_set1_epi64(p.zp_reset_gate_output);
  const __m512i zp_n_out = _mm512_set1_epi64(p.zp_new_gate_output);
  const __m512i one_u = _mm512_set1_epi64(p.quant_one_in_update_gate_scale);
  const __m512i bias_u8 = _mm512_set1_epi64(h_bias);
  __m512i rz[4], rr[4], rn[4];
  const TableV tz = table_v(p.update_gate, byte_tables, 0, rz);
  const TableV tr = table_v(p.reset_gate, byte_tables, 1, rr);
  const TableV tn = table_v(p.new_gate, byte_tables, 2, rn);
  const int32_t* shift_x = p.shift_gemm_x_to_weight_ih_linear;
  const int32_t* shift_h = p.shift_gemm_h_to_weight_hh_linear;
  const int32_t* mult_x = p.multiplier_gemm_x_to_weight_ih_linear;  // read only with Mult
  const int32_t* mult_h = p.multiplier_gemm_h_to_weight_hh_linear;

  for (int j = j0; j < j1; j += 8) {
    const int left = j1 - j;
    const __mmask8 k = left >= 8 ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>((1u << left) - 1u);
    __m512i ih_diff[3], hh_diff[3];  // S_weight_ih_linear, S_weight_hh_linear
    for (int g = 0; g < 3; ++g) {
      const size_t c = static_cast<size_t>(g) * H + j;
      const __m512i q_ih = linear_v<Mult>(gx + c, offset_x + c, shift_x + c, Mult ? mult_x + c : nullptr, k, ih_space);
      const __m512i q_hh = linear_v<Mult>(gh + c, offset_h + c, shift_h + c, Mult ? mult_h + c : nullptr, k, hh_space);
      ih_diff[g] = _mm512_sub_epi64(q_ih, ih_space.zp);
      hh_diff[g] = _mm512_sub_epi64(q_hh, hh_space.zp);
    }
    // C-1, C-2 (compute_sigmoid_gate_input): each term rescaled into the gate input's space, then added
    const __m512i q_update_gate_output = activation_v(tz, rz, sigmoid_gate_input_v<Mult>(z_gate, ih_diff[0], hh_diff[0]));
    const __m512i q_reset_gate_output = activation_v(tr, rr, sigmoid_gate_input_v<Mult>(r_gate, ih_diff[1], hh_diff[1]));
    // C-3 (compute_new_gate_input)
    const __m512i r_diff = _mm512_sub_epi64(q_reset_gate_output, zp_r_out);   // S_r
    const __m512i product = _mm512_mullo_epi64(r_diff, hh_diff[2]);          // S_r·S_hh, |.| < 2^32
    const __m512i q_rh = rescale_u<Mult>(product, s_rh_n);                    // S_new_gate_input
    const __m512i ih_shifted = rescale_u<Mult>(ih_diff[2], s_ih_n);           // S_new_gate_input
    const __m512i q_new_gate_input = saturate_v(_mm512_add_epi64(_mm512_add_epi64(ih_shifted, q_rh), n_in.zp), n_in);
    const __m512i q_new_gate_output = activation_v(tn, rn, q_new_gate_input);
    // C-4 (compute_hidden_state)
    const __m512i q_h_old = _mm512_cvtepi16_epi64(_mm_maskz_loadu_epi16(k, h_old + j));
    const __m512i q_new_gate_aligned_to_h =
        _mm512_add_epi64(rescale_u<Mult>(_mm512_sub_epi64(q_new_gate_output, zp_n_out), s_n_h), h_space.zp);  // S_h
    const __m512i u_diff = _mm512_sub_epi64(q_update_gate_output, zp_z_out);
    const __m512i q_old_contribution_mul = _mm512_mullo_epi64(u_diff, _mm512_sub_epi64(q_h_old, h_space.zp));  // S_u·S_h
    const __m512i one_minus_u = _mm512_sub_epi64(one_u, q_update_gate_output);
    const __m512i q_new_contribution_mul =
        _mm512_mullo_epi64(one_minus_u, _mm512_sub_epi64(q_new_gate_aligned_to_h, h_space.zp));  // S_u·S_h
    const __m512i q_combined = _mm512_add_epi64(q_old_contribution_mul, q_new_contribution_mul);  // S_u·S_h
    const __m512i q_h_new = saturate_v(_mm512_add_epi64(rescale_u<Mult>(q_combined, s_u), h_space.zp), h_space);
    _mm512_mask_cvtepi64_storeu_epi32(dst + j, k, q_h_new);
    _mm512_mask_cvtepi64_storeu_epi16(h_new16 + j, k, q_h_new);  // h's codes fit int16 (checked at pack time)
    if (h_new_u8) _mm512_mask_cvtepi64_storeu_epi8(h_new_u8 + j, k, _mm512_add_epi64(q_h_new, bias_u8));
  }
}

// C-2 and C-2a of the linear_before_reset = 0 cell (gru_cell_reset_hidden_gates after B-1 / B-2 of the reset channel
// c = H + j with the folded offsets): r from the two linears, then r ⊙ h in h's space. Types: the linears, the gate
// input and r are int64 lanes as in cell_impl; (r - zp_r)·(h - zp_h) by vpmullq, |.| < 2^16·2^16 = 2^32 (code ranges
// of at most 16 bits), exact; its rescale as every other (the overflow proof bounds |product|·m by 2^62).
template <bool Mult, class GX, class GH>
QGRU_AVX512 void reset_hidden_impl(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x,
                                   const int64_t* offset_h, const GX* gx, const GH* gh, const int16_t* h_old, int j0, int j1,
                                   int16_t* q_reset_hidden) {
  const int H = p.hidden_size;
  const SpaceV ih_space = space_v(p.weight_ih_linear), hh_space = space_v(p.weight_hh_linear);
  const SpaceV h_space = space_v(p.h);
  const SigmoidGateV r_gate = sigmoid_gate_v(reset_gate_rescales(p));
  const UniformRescale s_rh = uniform_rescale(p.multiplier_reset_mul_h_to_h, p.shift_reset_mul_h_to_h);
  const __m512i zp_r_out = _mm512_set1_epi64(p.zp_reset_gate_output);
  __m512i rr[4];
  const TableV tr = table_v(p.reset_gate, byte_tables, 1, rr);
  const int32_t* mult_x = p.multiplier_gemm_x_to_weight_ih_linear;  // read only with Mult
  const int32_t* mult_h = p.multiplier_gemm_h_to_weight_hh_linear;
  for (int j = j0; j < j1; j += 8) {
    const int left = j1 - j;
    const __mmask8 k = left >= 8 ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>((1u << left) - 1u);
    const size_t c = static_cast<size_t>(H) + j;  // the reset channel
    const __m512i q_ih = linear_v<Mult>(gx + c, offset_x + c, p.shift_gemm_x_to_weight_ih_linear + c, Mult ? mult_x + c : nullptr, k, ih_space);
    const __m512i q_hh = linear_v<Mult>(gh + c, offset_h + c, p.shift_gemm_h_to_weight_hh_linear + c, Mult ? mult_h + c : nullptr, k, hh_space);
    const __m512i q_reset_gate_output = activation_v(
        tr, rr, sigmoid_gate_input_v<Mult>(r_gate, _mm512_sub_epi64(q_ih, ih_space.zp), _mm512_sub_epi64(q_hh, hh_space.zp)));
    // C-2a (compute_reset_hidden)
    const __m512i q_h_old = _mm512_cvtepi16_epi64(_mm_maskz_loadu_epi16(k, h_old + j));
    const __m512i product =
        _mm512_mullo_epi64(_mm512_sub_epi64(q_reset_gate_output, zp_r_out), _mm512_sub_epi64(q_h_old, h_space.zp));  // S_r·S_h
    const __m512i q = saturate_v(_mm512_add_epi64(rescale_u<Mult>(product, s_rh), h_space.zp), h_space);  // S_h
    _mm512_mask_cvtepi64_storeu_epi16(q_reset_hidden + j, k, q);  // h's codes fit int16 (checked at pack time)
  }
}

}  // namespace

#define QGRU_CELL_AVX512_I64(GX, GH)                                                                                         \
  QGRU_AVX512 void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x,  \
                                    const int64_t* offset_h, const GX* gx, const GH* gh, const int16_t* h_old, int j0, int j1, \
                                    int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {                    \
    cell_impl<false>(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);             \
  }                                                                                                                          \
  QGRU_AVX512 void cell_rows_avx512_multiplier(const GruCellParamsView& p, const CellByteTables& byte_tables,                \
                                               const int64_t* offset_x, const int64_t* offset_h, const GX* gx, const GH* gh, \
                                               const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,   \
                                               int32_t h_bias, int32_t* dst) {                                               \
    cell_impl<true>(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);              \
  }                                                                                                                          \
  QGRU_AVX512 void reset_hidden_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, \
                                       const int64_t* offset_h, const GX* gx, const GH* gh, const int16_t* h_old, int j0,     \
                                       int j1, int16_t* q_reset_hidden) {                                                    \
    reset_hidden_impl<false>(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, q_reset_hidden);                     \
  }                                                                                                                          \
  QGRU_AVX512 void reset_hidden_avx512_multiplier(const GruCellParamsView& p, const CellByteTables& byte_tables,             \
                                                  const int64_t* offset_x, const int64_t* offset_h, const GX* gx,           \
                                                  const GH* gh, const int16_t* h_old, int j0, int j1,                       \
                                                  int16_t* q_reset_hidden) {                                                 \
    reset_hidden_impl<true>(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, q_reset_hidden);                      \
  }
QGRU_CELL_AVX512_I64(int32_t, int32_t)
QGRU_CELL_AVX512_I64(int32_t, int64_t)
QGRU_CELL_AVX512_I64(int64_t, int32_t)
QGRU_CELL_AVX512_I64(int64_t, int64_t)
#undef QGRU_CELL_AVX512_I64

#else  // not x86-64: the fast executor never calls these (avx512_kernels_built() is false)

#define QGRU_CELL_AVX512_I64(GX, GH)                                                                                        \
  void cell_rows_avx512(const GruCellParamsView&, const CellByteTables&, const int64_t*, const int64_t*, const GX*,         \
                        const GH*, const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*) {                       \
    std::abort();                                                                                                           \
  }                                                                                                                         \
  void cell_rows_avx512_multiplier(const GruCellParamsView&, const CellByteTables&, const int64_t*, const int64_t*,         \
                                   const GX*, const GH*, const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*) { \
    std::abort();                                                                                                           \
  }                                                                                                                         \
  void reset_hidden_avx512(const GruCellParamsView&, const CellByteTables&, const int64_t*, const int64_t*, const GX*,      \
                           const GH*, const int16_t*, int, int, int16_t*) {                                                 \
    std::abort();                                                                                                           \
  }                                                                                                                         \
  void reset_hidden_avx512_multiplier(const GruCellParamsView&, const CellByteTables&, const int64_t*, const int64_t*,      \
                                      const GX*, const GH*, const int16_t*, int, int, int16_t*) {                           \
    std::abort();                                                                                                           \
  }
QGRU_CELL_AVX512_I64(int32_t, int32_t)
QGRU_CELL_AVX512_I64(int32_t, int64_t)
QGRU_CELL_AVX512_I64(int64_t, int32_t)
QGRU_CELL_AVX512_I64(int64_t, int64_t)
#undef QGRU_CELL_AVX512_I64

#endif

}  // namespace qgru::fast
