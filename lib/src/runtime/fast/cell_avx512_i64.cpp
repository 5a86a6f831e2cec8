// The avx512-vnni level's cell step on eight int64 lanes (contract in fast_kernels.h: cell_rows_avx512), for cells
// outside the int32 proof. Compiled for any x86-64: every function here carries QGRU_AVX512 and is only called after
// cpu_has_avx512_vnni() (fast_plan.cpp, choose_isa); on other architectures the entry points exist but are never called.
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

// requantize (rounding.h) of accumulator + folded offset into a linear's code space, per-channel shifts.
template <class AT>
QGRU_AVX512 inline __m512i linear_v(const AT* acc, const int64_t* offset, const int32_t* shift, __mmask8 k,
                                    const SpaceV& space) {
  const __m512i sum = _mm512_add_epi64(load_acc(acc, k), _mm512_maskz_loadu_epi64(k, offset));  // S_W[c]·S_x
  const __m512i s = _mm512_cvtepi32_epi64(_mm256_maskz_loadu_epi32(k, shift));
  return saturate_v(_mm512_add_epi64(rshift_round_v(sum, s), space.zp), space);
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

template <class GX, class GH>
QGRU_AVX512 void cell_impl(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                           const GX* gx, const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                           uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {
  const int H = p.hidden_size;
  // Every cell constant as lanes, once (the loop below stores through pointers that could alias p).
  const SpaceV ih_space = space_v(p.weight_ih_linear), hh_space = space_v(p.weight_hh_linear);
  const SpaceV z_in = space_v(p.update_gate_input), r_in = space_v(p.reset_gate_input), n_in = space_v(p.new_gate_input);
  const SpaceV h_space = space_v(p.h);
  const UniformShift s_ih_z = uniform_shift(p.shift_weight_ih_linear_to_update_gate_input);
  const UniformShift s_hh_z = uniform_shift(p.shift_weight_hh_linear_to_update_gate_input);
  const UniformShift s_ih_r = uniform_shift(p.shift_weight_ih_linear_to_reset_gate_input);
  const UniformShift s_hh_r = uniform_shift(p.shift_weight_hh_linear_to_reset_gate_input);
  const UniformShift s_ih_n = uniform_shift(p.shift_weight_ih_linear_to_new_gate_input);
  const UniformShift s_rh_n = uniform_shift(p.shift_reset_mul_hh_to_new_gate_input);
  const UniformShift s_n_h = uniform_shift(p.shift_new_gate_output_to_h);
  const UniformShift s_u = uniform_shift(p.shift_update_gate_output);
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

  for (int j = j0; j < j1; j += 8) {
    const int left = j1 - j;
    const __mmask8 k = left >= 8 ? static_cast<__mmask8>(0xFF) : static_cast<__mmask8>((1u << left) - 1u);
    __m512i q_ih[3];
    __m512i q_hh[3];
    for (int g = 0; g < 3; ++g) {
      const size_t c = static_cast<size_t>(g) * H + j;
      q_ih[g] = linear_v(gx + c, offset_x + c, shift_x + c, k, ih_space);  // weight_ih_linear codes
      q_hh[g] = linear_v(gh + c, offset_h + c, shift_h + c, k, hh_space);  // weight_hh_linear codes
    }
    __m512i ih_diff[3], hh_diff[3];  // S_weight_ih_linear, S_weight_hh_linear
    for (int g = 0; g < 3; ++g) {
      ih_diff[g] = _mm512_sub_epi64(q_ih[g], ih_space.zp);
      hh_diff[g] = _mm512_sub_epi64(q_hh[g], hh_space.zp);
    }
    // C-1, C-2 (compute_sigmoid_gate_input): each term rounded into the gate input's space, then added
    const __m512i q_update_gate_input = saturate_v(
        _mm512_add_epi64(_mm512_add_epi64(rshift_round_u(ih_diff[0], s_ih_z), rshift_round_u(hh_diff[0], s_hh_z)), z_in.zp), z_in);
    const __m512i q_update_gate_output = activation_v(tz, rz, q_update_gate_input);
    const __m512i q_reset_gate_input = saturate_v(
        _mm512_add_epi64(_mm512_add_epi64(rshift_round_u(ih_diff[1], s_ih_r), rshift_round_u(hh_diff[1], s_hh_r)), r_in.zp), r_in);
    const __m512i q_reset_gate_output = activation_v(tr, rr, q_reset_gate_input);
    // C-3 (compute_new_gate_input)
    const __m512i r_diff = _mm512_sub_epi64(q_reset_gate_output, zp_r_out);   // S_r
    const __m512i product = _mm512_mullo_epi64(r_diff, hh_diff[2]);          // S_r·S_hh, |.| < 2^32
    const __m512i q_rh = rshift_round_u(product, s_rh_n);                     // S_new_gate_input
    const __m512i ih_shifted = rshift_round_u(ih_diff[2], s_ih_n);            // S_new_gate_input
    const __m512i q_new_gate_input = saturate_v(_mm512_add_epi64(_mm512_add_epi64(ih_shifted, q_rh), n_in.zp), n_in);
    const __m512i q_new_gate_output = activation_v(tn, rn, q_new_gate_input);
    // C-4 (compute_hidden_state)
    const __m512i q_h_old = _mm512_cvtepi16_epi64(_mm_maskz_loadu_epi16(k, h_old + j));
    const __m512i q_new_gate_aligned_to_h =
        _mm512_add_epi64(rshift_round_u(_mm512_sub_epi64(q_new_gate_output, zp_n_out), s_n_h), h_space.zp);  // S_h
    const __m512i u_diff = _mm512_sub_epi64(q_update_gate_output, zp_z_out);
    const __m512i q_old_contribution_mul = _mm512_mullo_epi64(u_diff, _mm512_sub_epi64(q_h_old, h_space.zp));  // S_u·S_h
    const __m512i one_minus_u = _mm512_sub_epi64(one_u, q_update_gate_output);
    const __m512i q_new_contribution_mul =
        _mm512_mullo_epi64(one_minus_u, _mm512_sub_epi64(q_new_gate_aligned_to_h, h_space.zp));  // S_u·S_h
    const __m512i q_combined = _mm512_add_epi64(q_old_contribution_mul, q_new_contribution_mul);  // S_u·S_h
    const __m512i q_h_new = saturate_v(_mm512_add_epi64(rshift_round_u(q_combined, s_u), h_space.zp), h_space);
    _mm512_mask_cvtepi64_storeu_epi32(dst + j, k, q_h_new);
    _mm512_mask_cvtepi64_storeu_epi16(h_new16 + j, k, q_h_new);  // h's codes fit int16 (checked at pack time)
    if (h_new_u8) _mm512_mask_cvtepi64_storeu_epi8(h_new_u8 + j, k, _mm512_add_epi64(q_h_new, bias_u8));
  }
}

}  // namespace

QGRU_AVX512 void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                                  const int32_t* gx, const int32_t* gh, const int16_t* h_old, int j0, int j1,
                                  int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {
  cell_impl(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
}
QGRU_AVX512 void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                                  const int32_t* gx, const int64_t* gh, const int16_t* h_old, int j0, int j1,
                                  int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {
  cell_impl(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
}
QGRU_AVX512 void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                                  const int64_t* gx, const int32_t* gh, const int16_t* h_old, int j0, int j1,
                                  int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {
  cell_impl(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
}
QGRU_AVX512 void cell_rows_avx512(const GruCellParamsView& p, const CellByteTables& byte_tables, const int64_t* offset_x, const int64_t* offset_h,
                                  const int64_t* gx, const int64_t* gh, const int16_t* h_old, int j0, int j1,
                                  int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {
  cell_impl(p, byte_tables, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
}

#else  // not x86-64: the fast executor never calls these (avx512_kernels_built() is false)

void cell_rows_avx512(const GruCellParamsView&, const CellByteTables&, const int64_t*, const int64_t*, const int32_t*, const int32_t*,
                      const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*) { std::abort(); }
void cell_rows_avx512(const GruCellParamsView&, const CellByteTables&, const int64_t*, const int64_t*, const int32_t*, const int64_t*,
                      const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*) { std::abort(); }
void cell_rows_avx512(const GruCellParamsView&, const CellByteTables&, const int64_t*, const int64_t*, const int64_t*, const int32_t*,
                      const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*) { std::abort(); }
void cell_rows_avx512(const GruCellParamsView&, const CellByteTables&, const int64_t*, const int64_t*, const int64_t*, const int64_t*,
                      const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*) { std::abort(); }

#endif

}  // namespace qgru::fast
