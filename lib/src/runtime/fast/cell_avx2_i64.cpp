// The AVX2 level's cell step on int64 lanes (contract in fast_kernels.h: cell_rows_avx2): the avx512-vnni
// level's cell_rows_avx512 (gru_cell_element's integer operations in the same order) on four int64 lanes,
// for cells outside the int32 proof (16-bit activations). AVX2 has no 64-bit multiply, min, max or abs:
// products by vpmuldq (exact for factors within int32: cell_avx2_i64_applies proves it per cell), min/max by
// compare and blend, |v| as (v ^ s) - s. Compiled for any x86-64: every function carries
// __attribute__((target("avx2"))) and is only called after the CPU was found to have AVX2
// (fast_plan.cpp, choose_isa); on other architectures the entry points exist but are never called.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "avx2_target.h"
#include "../model/cell_bounds.h"
#include "fast_kernels.h"

namespace qgru::fast {

namespace {
constexpr int64_t kFactorLimit = (int64_t{1} << 31) - 1;  // vpmuldq multiplies the low 32 bits as int32
bool shift_in_range(int s) { return s >= -62 && s <= 62; }
}  // namespace

bool cell_avx2_i64_applies(const GruCellParamsView& p) {
  if (p.update_gate.impl != ActivationImpl::Table || p.reset_gate.impl != ActivationImpl::Table ||
      p.new_gate.impl != ActivationImpl::Table) {
    return false;
  }
  for (int c = 0; c < 3 * p.hidden_size; ++c) {
    if (!shift_in_range(p.shift_gemm_x_to_weight_ih_linear[c]) || !shift_in_range(p.shift_gemm_h_to_weight_hh_linear[c])) return false;
  }
  for (int s : {p.shift_weight_ih_linear_to_update_gate_input, p.shift_weight_hh_linear_to_update_gate_input,
                p.shift_weight_ih_linear_to_reset_gate_input, p.shift_weight_hh_linear_to_reset_gate_input,
                p.shift_weight_ih_linear_to_new_gate_input, p.shift_reset_mul_hh_to_new_gate_input,
                p.shift_new_gate_output_to_h, p.shift_update_gate_output}) {
    if (!shift_in_range(s)) return false;
  }
  // the six factors of C-3 and C-4 within int32
  const int64_t d_hh = max_abs_diff(p.weight_hh_linear.q_min, p.weight_hh_linear.q_max, p.weight_hh_linear.zp);
  const int64_t d_r = max_abs_diff(p.reset_gate.q_out_min, p.reset_gate.q_out_max, p.zp_reset_gate_output);
  const int64_t d_u = max_abs_diff(p.update_gate.q_out_min, p.update_gate.q_out_max, p.zp_update_gate_output);
  const int64_t d_h = max_abs_diff(p.h.q_min, p.h.q_max, p.h.zp);
  const int64_t one = p.quant_one_in_update_gate_scale;
  const int64_t one_minus_u = std::max(std::abs(one - p.update_gate.q_out_min), std::abs(one - p.update_gate.q_out_max));
  const int64_t d_n = max_abs_diff(p.new_gate.q_out_min, p.new_gate.q_out_max, p.zp_new_gate_output);
  const int64_t n_aligned = shifted_bound(d_n, p.shift_new_gate_output_to_h, int64_t{1} << 62, 62);
  for (int64_t factor : {d_hh, d_r, d_u, d_h, one_minus_u, n_aligned}) {
    if (factor > kFactorLimit) return false;
  }
  return true;
}

#if QGRU_FAST_HAVE_AVX2

namespace {

// ---- int64 lane helpers (AVX2 has compare, add, sub and logical shifts on int64, nothing else) ----------
QGRU_AVX2 inline __m256i min64(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
QGRU_AVX2 inline __m256i max64(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a)); }
// all ones in the lanes where v < 0
QGRU_AVX2 inline __m256i negative64(__m256i v) { return _mm256_cmpgt_epi64(_mm256_setzero_si256(), v); }
// (m ^ s) - s: -m where s is all ones, m where s is 0 (exact for |m| < 2^63)
QGRU_AVX2 inline __m256i apply_sign64(__m256i m, __m256i s) { return _mm256_sub_epi64(_mm256_xor_si256(m, s), s); }
// the exact product of two lanes whose values lie within int32 (vpmuldq reads the low 32 bits as int32)
QGRU_AVX2 inline __m256i mul64(__m256i a, __m256i b) { return _mm256_mul_epi32(a, b); }

// rshift_round (rounding.h) with per-lane shifts s in -62..62 (rshift_round_v of the AVX-512 level):
//   s > 0: sign(v)·((|v| + 2^(s-1)) >> s) (|v| <= 2^62 by the artifact's overflow proof: no wrap);
//   s <= 0: v·2^-s (the proof bounds it below 2^62). Counts outside 0..63 give 0 in vpsllvq/vpsrlvq; the lanes
//   where that happens are not selected.
QGRU_AVX2 inline __m256i rshift_round_v(__m256i v, __m256i s) {
  const __m256i zero = _mm256_setzero_si256();
  const __m256i one = _mm256_set1_epi64x(1);
  const __m256i sign = negative64(v);
  const __m256i magnitude = apply_sign64(v, sign);
  const __m256i half = _mm256_sllv_epi64(one, _mm256_sub_epi64(s, one));  // 2^(s-1) for s > 0
  const __m256i rounded = apply_sign64(_mm256_srlv_epi64(_mm256_add_epi64(magnitude, half), s), sign);
  const __m256i left = _mm256_sllv_epi64(v, _mm256_sub_epi64(zero, s));
  return _mm256_blendv_epi8(left, rounded, _mm256_cmpgt_epi64(s, zero));
}

// A shift that is the same for every lane, with its rounding constant prepared once.
struct UniformShift {
  int s = 0;
  __m128i count;  // s > 0: s; s < 0: -s
  __m256i half;   // s > 0: 2^(s-1)
};
QGRU_AVX2 inline UniformShift uniform_shift(int s) {  // s in -62..62 (cell_avx2_i64_applies)
  UniformShift u;
  u.s = s;
  u.count = _mm_cvtsi32_si128(s > 0 ? s : -s);
  u.half = _mm256_set1_epi64x(s > 0 ? int64_t{1} << (s - 1) : 0);
  return u;
}
QGRU_AVX2 inline __m256i rshift_round_u(__m256i v, const UniformShift& u) {
  if (u.s > 0) {
    const __m256i sign = negative64(v);
    return apply_sign64(_mm256_srl_epi64(_mm256_add_epi64(apply_sign64(v, sign), u.half), u.count), sign);
  }
  if (u.s == 0) return v;
  return _mm256_sll_epi64(v, u.count);  // v·2^-s
}

struct SpaceV {
  __m256i zp, q_min, q_max;
};
QGRU_AVX2 inline SpaceV space_v(const CodeSpace& c) {
  return {_mm256_set1_epi64x(c.zp), _mm256_set1_epi64x(c.q_min), _mm256_set1_epi64x(c.q_max)};
}
QGRU_AVX2 inline __m256i saturate_v(__m256i v, const SpaceV& s) { return min64(max64(v, s.q_min), s.q_max); }

// Four lanes of [j, j + count): whole (count 4) or the first `count` through a copy (masked-off lanes 0).
template <class T>
QGRU_AVX2 inline __m256i load4(const T* p, int count) {
  int64_t lanes[4] = {0, 0, 0, 0};
  if (count >= 4) {
    if constexpr (sizeof(T) == 8) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if constexpr (sizeof(T) == 4) return _mm256_cvtepi32_epi64(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  for (int i = 0; i < std::min(count, 4); ++i) lanes[i] = p[i];
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lanes));
}

// requantize (rounding.h) of accumulator + folded offset into a linear's code space, per-channel shifts.
template <class AT>
QGRU_AVX2 inline __m256i linear_v(const AT* acc, const int64_t* offset, const int32_t* shift, int count, const SpaceV& space) {
  const __m256i sum = _mm256_add_epi64(load4(acc, count), load4(offset, count));  // S_W[c]·S_x
  return saturate_v(_mm256_add_epi64(rshift_round_v(sum, load4(shift, count)), space.zp), space);
}

// evaluate_activation of a Table activation: table[sat(q) - q_in_min] (the index saturated into the table).
struct TableV {
  const int32_t* table;
  __m256i q_in_min, q_in_max;
};
QGRU_AVX2 inline __m256i activation_v(const TableV& t, __m256i q) {
  const __m256i index = _mm256_sub_epi64(min64(max64(q, t.q_in_min), t.q_in_max), t.q_in_min);
  return _mm256_cvtepi32_epi64(_mm256_i64gather_epi32(reinterpret_cast<const int*>(t.table), index, 4));
}

template <class GX, class GH>
QGRU_AVX2 void cell_impl64(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const GX* gx,
                           const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,
                           int32_t h_bias, int32_t* dst) {
  const int H = p.hidden_size;
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
  const __m256i zp_z_out = _mm256_set1_epi64x(p.zp_update_gate_output);
  const __m256i zp_r_out = _mm256_set1_epi64x(p.zp_reset_gate_output);
  const __m256i zp_n_out = _mm256_set1_epi64x(p.zp_new_gate_output);
  const __m256i one_u = _mm256_set1_epi64x(p.quant_one_in_update_gate_scale);
  const TableV tz{p.update_gate.table, _mm256_set1_epi64x(p.update_gate.q_in_min), _mm256_set1_epi64x(p.update_gate.q_in_max)};
  const TableV tr{p.reset_gate.table, _mm256_set1_epi64x(p.reset_gate.q_in_min), _mm256_set1_epi64x(p.reset_gate.q_in_max)};
  const TableV tn{p.new_gate.table, _mm256_set1_epi64x(p.new_gate.q_in_min), _mm256_set1_epi64x(p.new_gate.q_in_max)};
  const int32_t* shift_x = p.shift_gemm_x_to_weight_ih_linear;
  const int32_t* shift_h = p.shift_gemm_h_to_weight_hh_linear;

  for (int j = j0; j < j1; j += 4) {
    const int count = std::min(4, j1 - j);
    __m256i ih_diff[3], hh_diff[3];  // S_weight_ih_linear, S_weight_hh_linear
    for (int g = 0; g < 3; ++g) {
      const size_t c = static_cast<size_t>(g) * H + j;
      ih_diff[g] = _mm256_sub_epi64(linear_v(gx + c, offset_x + c, shift_x + c, count, ih_space), ih_space.zp);
      hh_diff[g] = _mm256_sub_epi64(linear_v(gh + c, offset_h + c, shift_h + c, count, hh_space), hh_space.zp);
    }
    // C-1, C-2 (compute_sigmoid_gate_input): each term rounded into the gate input's space, then added
    const __m256i q_update_gate_input = saturate_v(
        _mm256_add_epi64(_mm256_add_epi64(rshift_round_u(ih_diff[0], s_ih_z), rshift_round_u(hh_diff[0], s_hh_z)), z_in.zp), z_in);
    const __m256i q_update_gate_output = activation_v(tz, q_update_gate_input);
    const __m256i q_reset_gate_input = saturate_v(
        _mm256_add_epi64(_mm256_add_epi64(rshift_round_u(ih_diff[1], s_ih_r), rshift_round_u(hh_diff[1], s_hh_r)), r_in.zp), r_in);
    const __m256i q_reset_gate_output = activation_v(tr, q_reset_gate_input);
    // C-3 (compute_new_gate_input); both factors within int32 (cell_avx2_i64_applies)
    const __m256i product = mul64(_mm256_sub_epi64(q_reset_gate_output, zp_r_out), hh_diff[2]);  // S_r·S_hh
    const __m256i q_rh = rshift_round_u(product, s_rh_n);                                           // S_new_gate_input
    const __m256i ih_shifted = rshift_round_u(ih_diff[2], s_ih_n);                                  // S_new_gate_input
    const __m256i q_new_gate_input = saturate_v(_mm256_add_epi64(_mm256_add_epi64(ih_shifted, q_rh), n_in.zp), n_in);
    const __m256i q_new_gate_output = activation_v(tn, q_new_gate_input);
    // C-4 (compute_hidden_state); every factor within int32 (cell_avx2_i64_applies)
    int16_t old4[4] = {0, 0, 0, 0};
    std::memcpy(old4, h_old + j, static_cast<size_t>(count) * sizeof(int16_t));
    const __m256i q_h_old = _mm256_cvtepi16_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(old4)));
    const __m256i q_new_gate_aligned_to_h =
        _mm256_add_epi64(rshift_round_u(_mm256_sub_epi64(q_new_gate_output, zp_n_out), s_n_h), h_space.zp);  // S_h
    const __m256i q_old_contribution_mul =
        mul64(_mm256_sub_epi64(q_update_gate_output, zp_z_out), _mm256_sub_epi64(q_h_old, h_space.zp));  // S_u·S_h
    const __m256i q_new_contribution_mul =
        mul64(_mm256_sub_epi64(one_u, q_update_gate_output), _mm256_sub_epi64(q_new_gate_aligned_to_h, h_space.zp));  // S_u·S_h
    const __m256i q_combined = _mm256_add_epi64(q_old_contribution_mul, q_new_contribution_mul);  // S_u·S_h
    const __m256i q_h_new = saturate_v(_mm256_add_epi64(rshift_round_u(q_combined, s_u), h_space.zp), h_space);
    // the four codes (within int16: checked at pack time) from the low halves of the int64 lanes
    const __m128i q32 = _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(q_h_new, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
    alignas(16) int32_t out32[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(out32), q32);
    for (int i = 0; i < count; ++i) {
      dst[j + i] = out32[i];
      h_new16[j + i] = static_cast<int16_t>(out32[i]);
      if (h_new_u8) h_new_u8[j + i] = static_cast<uint8_t>(out32[i] + h_bias);  // codes + h_bias in [0, 255]
    }
  }
}

}  // namespace

#define QGRU_CELL_AVX2_I64(GX, GH)                                                                                       \
  QGRU_AVX2 void cell_rows_avx2(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const GX* gx, \
                                const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,  \
                                int32_t h_bias, int32_t* dst) {                                                           \
    cell_impl64(p, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);                            \
  }
QGRU_CELL_AVX2_I64(int32_t, int32_t)
QGRU_CELL_AVX2_I64(int32_t, int64_t)
QGRU_CELL_AVX2_I64(int64_t, int32_t)
QGRU_CELL_AVX2_I64(int64_t, int64_t)
#undef QGRU_CELL_AVX2_I64

#else  // not x86-64: the fast executor never calls these (avx2_kernels_built() is false)

#define QGRU_CELL_AVX2_I64(GX, GH)                                                                                        \
  void cell_rows_avx2(const GruCellParamsView&, const int64_t*, const int64_t*, const GX*, const GH*, const int16_t*, int, \
                      int, int16_t*, uint8_t*, int32_t, int32_t*) {                                                       \
    std::abort();                                                                                                         \
  }
QGRU_CELL_AVX2_I64(int32_t, int32_t)
QGRU_CELL_AVX2_I64(int32_t, int64_t)
QGRU_CELL_AVX2_I64(int64_t, int32_t)
QGRU_CELL_AVX2_I64(int64_t, int64_t)
#undef QGRU_CELL_AVX2_I64

#endif

}  // namespace qgru::fast
