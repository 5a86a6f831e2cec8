// The AVX2 level's cell step on int64 lanes (contracts in fast_kernels.h: cell_rows_avx2 and its multiplier-scale
// form, reset_hidden_avx2): the avx512-vnni level's cell_rows_avx512 (gru_cell_element's integer operations in the
// same order) on four int64 lanes, for cells outside the int32 proof (16-bit activations), multiplier-scale cells and
// the linear_before_reset = 0 cell's C-2 / C-2a. AVX2 has no 64-bit multiply, min, max or abs: products of code
// differences by vpmuldq (exact for factors within int32: cell_avx2_i64_applies proves it per cell), a value times a
// multiplier by two 32-bit multiplies (mul64x32), min/max by compare and blend, |v| as (v ^ s) - s. Compiled for any x86-64: every function carries
// __attribute__((target("avx2"))) and is only called after the CPU was found to have AVX2
// (fast_plan.cpp, choose_isa); on other architectures the entry points exist but are never called.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "avx2_target.h"
#include "../model/cell_bounds.h"
#include "fast_kernels.h"

namespace qgru::fast {

namespace {
constexpr int64_t kFactorLimit = (int64_t{1} << 31) - 1;  // vpmuldq multiplies the low 32 bits as int32
bool shift_in_range(int s) { return s >= -62 && s <= 62; }

// Every per-channel shift of B-1 / B-2 in -62..62 and, in a multiplier-scale cell, every multiplier positive (mul64x32
// reads it as an unsigned and a signed 32-bit factor).
bool linears_apply(const GruCellParamsView& p) {
  for (int c = 0; c < 3 * p.hidden_size; ++c) {
    if (!shift_in_range(p.shift_gemm_x_to_weight_ih_linear[c]) || !shift_in_range(p.shift_gemm_h_to_weight_hh_linear[c])) return false;
    if (p.multiplier_scales && (p.multiplier_gemm_x_to_weight_ih_linear[c] < 1 || p.multiplier_gemm_h_to_weight_hh_linear[c] < 1)) {
      return false;
    }
  }
  return true;
}
// The uniform rescales: shifts in -62..62, multipliers positive.
bool rescales_apply(const GruCellParamsView& p, std::initializer_list<std::pair<int32_t, int32_t>> rescales) {
  for (const auto& [multiplier, shift] : rescales) {
    if (!shift_in_range(shift) || (p.multiplier_scales && multiplier < 1)) return false;
  }
  return true;
}
bool gate_applies(const GruCellParamsView& p, const SigmoidGateRescales& g) {
  return rescales_apply(p, {{g.multiplier_ih, g.shift_ih}, {g.multiplier_hh, g.shift_hh}});
}
}  // namespace

bool cell_avx2_i64_applies(const GruCellParamsView& p) {
  if (p.update_gate.impl != ActivationImpl::Table || p.reset_gate.impl != ActivationImpl::Table ||
      p.new_gate.impl != ActivationImpl::Table) {
    return false;
  }
  if (!linears_apply(p)) return false;
  if (!gate_applies(p, update_gate_rescales(p)) || !gate_applies(p, reset_gate_rescales(p)) ||
      !rescales_apply(p, {{p.multiplier_weight_ih_linear_to_new_gate_input, p.shift_weight_ih_linear_to_new_gate_input},
                          {p.multiplier_reset_mul_hh_to_new_gate_input, p.shift_reset_mul_hh_to_new_gate_input},
                          {p.multiplier_new_gate_output_to_h, p.shift_new_gate_output_to_h},
                          {p.multiplier_update_gate_output, p.shift_update_gate_output}})) {
    return false;
  }
  // the six factors of C-3 and C-4 within int32
  const int64_t d_hh = max_abs_diff(p.weight_hh_linear.q_min, p.weight_hh_linear.q_max, p.weight_hh_linear.zp);
  const int64_t d_r = max_abs_diff(p.reset_gate.q_out_min, p.reset_gate.q_out_max, p.zp_reset_gate_output);
  const int64_t d_u = max_abs_diff(p.update_gate.q_out_min, p.update_gate.q_out_max, p.zp_update_gate_output);
  const int64_t d_h = max_abs_diff(p.h.q_min, p.h.q_max, p.h.zp);
  const int64_t one = p.quant_one_in_update_gate_scale;
  const int64_t one_minus_u = std::max(std::abs(one - p.update_gate.q_out_min), std::abs(one - p.update_gate.q_out_max));
  const int64_t d_n = max_abs_diff(p.new_gate.q_out_min, p.new_gate.q_out_max, p.zp_new_gate_output);
  // |n - zp_n|·m <= 2^16·2^31 (int64), the rescale's bound taken from it
  const int64_t n_times_m = d_n * (p.multiplier_scales ? int64_t{p.multiplier_new_gate_output_to_h} : 1);
  const int64_t n_aligned = shifted_bound(n_times_m, p.shift_new_gate_output_to_h, int64_t{1} << 62, 62);
  for (int64_t factor : {d_hh, d_r, d_u, d_h, one_minus_u, n_aligned}) {
    if (factor > kFactorLimit) return false;
  }
  return true;
}

bool reset_hidden_avx2_applies(const GruCellParamsView& p) {
  if (p.reset_gate.impl != ActivationImpl::Table || !linears_apply(p)) return false;
  if (!gate_applies(p, reset_gate_rescales(p)) || !rescales_apply(p, {{p.multiplier_reset_mul_h_to_h, p.shift_reset_mul_h_to_h}})) {
    return false;
  }
  // the two factors of C-2a within int32
  const int64_t d_r = max_abs_diff(p.reset_gate.q_out_min, p.reset_gate.q_out_max, p.zp_reset_gate_output);
  const int64_t d_h = max_abs_diff(p.h.q_min, p.h.q_max, p.h.zp);
  return d_r <= kFactorLimit && d_h <= kFactorLimit;
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

// v·m for an int64 lane v and m in 1..2^31-1 (a multiplier, as int64 lanes): v = hi·2^32 + lo with hi the signed
// high half (int32) and lo the unsigned low half; lo·m by vpmuludq (< 2^32·2^31 = 2^63, exact in uint64), hi·m by
// vpmuldq (both within int32, exact), and (hi·m)·2^32 + lo·m in wrapping 64-bit arithmetic is v·m modulo 2^64,
// which is v·m itself since the overflow proof bounds |v|·m by 2^62.
QGRU_AVX2 inline __m256i mul64x32(__m256i v, __m256i m) {
  const __m256i lo = _mm256_mul_epu32(v, m);
  const __m256i hi = _mm256_mul_epi32(_mm256_srli_epi64(v, 32), m);  // vpmuldq reads the high half as int32
  return _mm256_add_epi64(lo, _mm256_slli_epi64(hi, 32));
}

// A rescale the same for every lane (gru_cell.h's rescale): its shift and, in a multiplier-scale cell, its multiplier.
struct UniformRescale {
  UniformShift shift;
  __m256i multiplier;
};
QGRU_AVX2 inline UniformRescale uniform_rescale(int32_t multiplier, int s) { return {uniform_shift(s), _mm256_set1_epi64x(multiplier)}; }
// rshift_round(v, s), or with Mult multiply_rshift_round(v, m, s) = rshift_round(v·m, s) (v·m by mul64x32, exact).
template <bool Mult>
QGRU_AVX2 inline __m256i rescale_u(__m256i v, const UniformRescale& r) {
  if constexpr (Mult) v = mul64x32(v, r.multiplier);
  return rshift_round_u(v, r.shift);
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

// requantize_gemm_x / _h (gru_cell.h) of accumulator + folded offset into a linear's code space, per-channel shifts
// and, with Mult, per-channel multipliers (sum·m by mul64x32: exact, the overflow proof bounds |sum|·m by 2^62).
template <bool Mult, class AT>
QGRU_AVX2 inline __m256i linear_v(const AT* acc, const int64_t* offset, const int32_t* shift, const int32_t* multiplier,
                                  int count, const SpaceV& space) {
  __m256i sum = _mm256_add_epi64(load4(acc, count), load4(offset, count));  // S_W[c]·S_x
  if constexpr (Mult) sum = mul64x32(sum, load4(multiplier, count));
  return saturate_v(_mm256_add_epi64(rshift_round_v(sum, load4(shift, count)), space.zp), space);
}

// A sigmoid gate's input (compute_sigmoid_gate_input, C-1 / C-2): each linear's code difference rescaled into the
// gate input's space, the two added with its zero point, saturated (each term bounded by the overflow proof).
struct SigmoidGateV {
  UniformRescale ih, hh;
  SpaceV input;
};
template <bool Mult>
QGRU_AVX2 inline __m256i sigmoid_gate_input_v(const SigmoidGateV& g, __m256i ih_diff, __m256i hh_diff) {
  return saturate_v(_mm256_add_epi64(_mm256_add_epi64(rescale_u<Mult>(ih_diff, g.ih), rescale_u<Mult>(hh_diff, g.hh)), g.input.zp),
                    g.input);
}
QGRU_AVX2 inline SigmoidGateV sigmoid_gate_v(const SigmoidGateRescales& g) {
  return {uniform_rescale(g.multiplier_ih, g.shift_ih), uniform_rescale(g.multiplier_hh, g.shift_hh), space_v(g.input)};
}

// Codes of [j, j + count) from four int64 lanes (within int16: h's codes, checked at pack time) into int32 lanes.
QGRU_AVX2 inline __m128i low_halves(__m256i v) {
  return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(v, _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6)));
}
// Four int16 codes of [j, j + count) as int64 lanes (masked-off lanes 0).
QGRU_AVX2 inline __m256i load_h4(const int16_t* h, int count) {
  int16_t four[4] = {0, 0, 0, 0};
  std::memcpy(four, h, static_cast<size_t>(std::min(count, 4)) * sizeof(int16_t));
  return _mm256_cvtepi16_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(four)));
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

template <bool Mult, class GX, class GH>
QGRU_AVX2 void cell_impl64(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const GX* gx,
                           const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,
                           int32_t h_bias, int32_t* dst) {
  const int H = p.hidden_size;
  const SpaceV ih_space = space_v(p.weight_ih_linear), hh_space = space_v(p.weight_hh_linear);
  const SpaceV n_in = space_v(p.new_gate_input);
  const SpaceV h_space = space_v(p.h);
  const SigmoidGateV z_gate = sigmoid_gate_v(update_gate_rescales(p)), r_gate = sigmoid_gate_v(reset_gate_rescales(p));
  const UniformRescale s_ih_n = uniform_rescale(p.multiplier_weight_ih_linear_to_new_gate_input, p.shift_weight_ih_linear_to_new_gate_input);
  const UniformRescale s_rh_n = uniform_rescale(p.multiplier_reset_mul_hh_to_new_gate_input, p.shift_reset_mul_hh_to_new_gate_input);
  const UniformRescale s_n_h = uniform_rescale(p.multiplier_new_gate_output_to_h, p.shift_new_gate_output_to_h);
  const UniformRescale s_u = uniform_rescale(p.multiplier_update_gate_output, p.shift_update_gate_output);
  const __m256i zp_z_out = _mm256_set1_epi64x(p.zp_update_gate_output);
  const __m256i zp_r_out = _mm256_set1_epi64x(p.zp_reset_gate_output);
  const __m256i zp_n_out = _mm256_set1_epi64x(p.zp_new_gate_output);
  const __m256i one_u = _mm256_set1_epi64x(p.quant_one_in_update_gate_scale);
  const TableV tz{p.update_gate.table, _mm256_set1_epi64x(p.update_gate.q_in_min), _mm256_set1_epi64x(p.update_gate.q_in_max)};
  const TableV tr{p.reset_gate.table, _mm256_set1_epi64x(p.reset_gate.q_in_min), _mm256_set1_epi64x(p.reset_gate.q_in_max)};
  const TableV tn{p.new_gate.table, _mm256_set1_epi64x(p.new_gate.q_in_min), _mm256_set1_epi64x(p.new_gate.q_in_max)};
  const int32_t* shift_x = p.shift_gemm_x_to_weight_ih_linear;
  const int32_t* shift_h = p.shift_gemm_h_to_weight_hh_linear;
  const int32_t* mult_x = p.multiplier_gemm_x_to_weight_ih_linear;  // read only with Mult
  const int32_t* mult_h = p.multiplier_gemm_h_to_weight_hh_linear;

  for (int j = j0; j < j1; j += 4) {
    const int count = std::min(4, j1 - j);
    __m256i ih_diff[3], hh_diff[3];  // S_weight_ih_linear, S_weight_hh_linear
    for (int g = 0; g < 3; ++g) {
      const size_t c = static_cast<size_t>(g) * H + j;
      ih_diff[g] = _mm256_sub_epi64(linear_v<Mult>(gx + c, offset_x + c, shift_x + c, Mult ? mult_x + c : nullptr, count, ih_space), ih_space.zp);
      hh_diff[g] = _mm256_sub_epi64(linear_v<Mult>(gh + c, offset_h + c, shift_h + c, Mult ? mult_h + c : nullptr, count, hh_space), hh_space.zp);
    }
    // C-1, C-2 (compute_sigmoid_gate_input): each term rescaled into the gate input's space, then added
    const __m256i q_update_gate_output = activation_v(tz, sigmoid_gate_input_v<Mult>(z_gate, ih_diff[0], hh_diff[0]));
    const __m256i q_reset_gate_output = activation_v(tr, sigmoid_gate_input_v<Mult>(r_gate, ih_diff[1], hh_diff[1]));
    // C-3 (compute_new_gate_input); both factors within int32 (cell_avx2_i64_applies)
    const __m256i product = mul64(_mm256_sub_epi64(q_reset_gate_output, zp_r_out), hh_diff[2]);  // S_r·S_hh
    const __m256i q_rh = rescale_u<Mult>(product, s_rh_n);                                          // S_new_gate_input
    const __m256i ih_shifted = rescale_u<Mult>(ih_diff[2], s_ih_n);                                 // S_new_gate_input
    const __m256i q_new_gate_input = saturate_v(_mm256_add_epi64(_mm256_add_epi64(ih_shifted, q_rh), n_in.zp), n_in);
    const __m256i q_new_gate_output = activation_v(tn, q_new_gate_input);
    // C-4 (compute_hidden_state); every factor within int32 (cell_avx2_i64_applies)
    const __m256i q_h_old = load_h4(h_old + j, count);
    const __m256i q_new_gate_aligned_to_h =
        _mm256_add_epi64(rescale_u<Mult>(_mm256_sub_epi64(q_new_gate_output, zp_n_out), s_n_h), h_space.zp);  // S_h
    const __m256i q_old_contribution_mul =
        mul64(_mm256_sub_epi64(q_update_gate_output, zp_z_out), _mm256_sub_epi64(q_h_old, h_space.zp));  // S_u·S_h
    const __m256i q_new_contribution_mul =
        mul64(_mm256_sub_epi64(one_u, q_update_gate_output), _mm256_sub_epi64(q_new_gate_aligned_to_h, h_space.zp));  // S_u·S_h
    const __m256i q_combined = _mm256_add_epi64(q_old_contribution_mul, q_new_contribution_mul);  // S_u·S_h
    const __m256i q_h_new = saturate_v(_mm256_add_epi64(rescale_u<Mult>(q_combined, s_u), h_space.zp), h_space);
    alignas(16) int32_t out32[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(out32), low_halves(q_h_new));
    for (int i = 0; i < count; ++i) {
      dst[j + i] = out32[i];
      h_new16[j + i] = static_cast<int16_t>(out32[i]);
      if (h_new_u8) h_new_u8[j + i] = static_cast<uint8_t>(out32[i] + h_bias);  // codes + h_bias in [0, 255]
    }
  }
}

// C-2 and C-2a of the linear_before_reset = 0 cell on four int64 lanes (reset_hidden_avx512's operations):
// (r - zp_r)·(h - zp_h) by vpmuldq, both factors within int32 (reset_hidden_avx2_applies), |.| < 2^32.
template <bool Mult, class GX, class GH>
QGRU_AVX2 void reset_hidden_impl(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const GX* gx,
                                 const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* q_reset_hidden) {
  const int H = p.hidden_size;
  const SpaceV ih_space = space_v(p.weight_ih_linear), hh_space = space_v(p.weight_hh_linear);
  const SpaceV h_space = space_v(p.h);
  const SigmoidGateV r_gate = sigmoid_gate_v(reset_gate_rescales(p));
  const UniformRescale s_rh = uniform_rescale(p.multiplier_reset_mul_h_to_h, p.shift_reset_mul_h_to_h);
  const __m256i zp_r_out = _mm256_set1_epi64x(p.zp_reset_gate_output);
  const TableV tr{p.reset_gate.table, _mm256_set1_epi64x(p.reset_gate.q_in_min), _mm256_set1_epi64x(p.reset_gate.q_in_max)};
  const int32_t* mult_x = p.multiplier_gemm_x_to_weight_ih_linear;  // read only with Mult
  const int32_t* mult_h = p.multiplier_gemm_h_to_weight_hh_linear;
  for (int j = j0; j < j1; j += 4) {
    const int count = std::min(4, j1 - j);
    const size_t c = static_cast<size_t>(H) + j;  // the reset channel
    const __m256i q_ih = linear_v<Mult>(gx + c, offset_x + c, p.shift_gemm_x_to_weight_ih_linear + c, Mult ? mult_x + c : nullptr, count, ih_space);
    const __m256i q_hh = linear_v<Mult>(gh + c, offset_h + c, p.shift_gemm_h_to_weight_hh_linear + c, Mult ? mult_h + c : nullptr, count, hh_space);
    const __m256i q_reset_gate_output =
        activation_v(tr, sigmoid_gate_input_v<Mult>(r_gate, _mm256_sub_epi64(q_ih, ih_space.zp), _mm256_sub_epi64(q_hh, hh_space.zp)));
    // C-2a (compute_reset_hidden)
    const __m256i product =
        mul64(_mm256_sub_epi64(q_reset_gate_output, zp_r_out), _mm256_sub_epi64(load_h4(h_old + j, count), h_space.zp));  // S_r·S_h
    const __m256i q = saturate_v(_mm256_add_epi64(rescale_u<Mult>(product, s_rh), h_space.zp), h_space);  // S_h
    alignas(16) int32_t out32[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(out32), low_halves(q));
    for (int i = 0; i < count; ++i) q_reset_hidden[j + i] = static_cast<int16_t>(out32[i]);  // h's codes fit int16
  }
}

}  // namespace

#define QGRU_CELL_AVX2_I64(GX, GH)                                                                                          \
  QGRU_AVX2 void cell_rows_avx2(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const GX* gx,   \
                                const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,     \
                                int32_t h_bias, int32_t* dst) {                                                              \
    cell_impl64<false>(p, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);                        \
  }                                                                                                                          \
  QGRU_AVX2 void cell_rows_avx2_multiplier(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h,      \
                                           const GX* gx, const GH* gh, const int16_t* h_old, int j0, int j1,                 \
                                           int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {              \
    cell_impl64<true>(p, offset_x, offset_h, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);                         \
  }                                                                                                                          \
  QGRU_AVX2 void reset_hidden_avx2(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, const GX* gx, \
                                   const GH* gh, const int16_t* h_old, int j0, int j1, int16_t* q_reset_hidden) {            \
    reset_hidden_impl<false>(p, offset_x, offset_h, gx, gh, h_old, j0, j1, q_reset_hidden);                                  \
  }                                                                                                                          \
  QGRU_AVX2 void reset_hidden_avx2_multiplier(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h,   \
                                              const GX* gx, const GH* gh, const int16_t* h_old, int j0, int j1,              \
                                              int16_t* q_reset_hidden) {                                                     \
    reset_hidden_impl<true>(p, offset_x, offset_h, gx, gh, h_old, j0, j1, q_reset_hidden);                                   \
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
  }                                                                                                                       \
  void cell_rows_avx2_multiplier(const GruCellParamsView&, const int64_t*, const int64_t*, const GX*, const GH*,          \
                                 const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*) {                       \
    std::abort();                                                                                                         \
  }                                                                                                                       \
  void reset_hidden_avx2(const GruCellParamsView&, const int64_t*, const int64_t*, const GX*, const GH*, const int16_t*,  \
                         int, int, int16_t*) {                                                                            \
    std::abort();                                                                                                         \
  }                                                                                                                       \
  void reset_hidden_avx2_multiplier(const GruCellParamsView&, const int64_t*, const int64_t*, const GX*, const GH*,       \
                                    const int16_t*, int, int, int16_t*) {                                                 \
    std::abort();                                                                                                         \
  }
QGRU_CELL_AVX2_I64(int32_t, int32_t)
QGRU_CELL_AVX2_I64(int32_t, int64_t)
QGRU_CELL_AVX2_I64(int64_t, int32_t)
QGRU_CELL_AVX2_I64(int64_t, int64_t)
#undef QGRU_CELL_AVX2_I64

#endif

}  // namespace qgru::fast
