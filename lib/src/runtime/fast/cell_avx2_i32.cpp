// The AVX2 level's int32 cell step (contract in fast_kernels.h: cell_rows_avx2_i32 and friends): the
// avx512-vnni level's cell_block32 on eight int32 lanes, the same operations in the same order on the same
// plan (prepare_cell32_plan), every intermediate within ±2^30 by cell_fits_int32. Compiled for any x86-64:
// every function carries __attribute__((target("avx2"))) and is only called after the CPU was found to have
// AVX2 (fast_plan.cpp, choose_isa); on other architectures the entry points exist but are never called.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "avx2_target.h"
#include "fast_kernels.h"


namespace qgru::fast {

#if QGRU_FAST_HAVE_AVX2

namespace {

// Eight lanes of a Cell32Lanes row (all sixteen hold the same value; the row is 64-byte aligned).
QGRU_AVX2 inline __m256i lanes8(const int32_t (&row)[16]) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(row)); }

// The units [j, j + count) of one vector: all eight, or the first `count` (count < 8) through a lane mask;
// masked-off lanes read as 0 and are never stored.
struct Lanes {
  bool full;
  __m256i mask;  // all ones in the lanes that are read and written
};
QGRU_AVX2 inline Lanes lanes_for(int count) {
  if (count >= 8) return Lanes{true, _mm256_set1_epi32(-1)};
  return Lanes{false, _mm256_cmpgt_epi32(_mm256_set1_epi32(count), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7))};
}
QGRU_AVX2 inline __m256i load8(const int32_t* p, const Lanes& k) {
  return k.full ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_maskload_epi32(p, k.mask);
}

// -magnitude in the lanes where v is negative, magnitude elsewhere ((m ^ s) - s with s = v >> 31; the
// magnitudes here stay below 2^31, so the negation is exact).
QGRU_AVX2 inline __m256i with_sign_of(__m256i magnitude, __m256i v) {
  const __m256i sign = _mm256_srai_epi32(v, 31);
  return _mm256_sub_epi32(_mm256_xor_si256(magnitude, sign), sign);
}

// rshift_round(v, s) for 1 <= s <= 30 and |v| <= 2^30 in the floor form (Cell32Plan::floor_x):
// (v + 2^(s-1) + (v >> 31)) >> s with arithmetic shifts; the sum lies within ±(2^30 + 2^29), no wrap.
QGRU_AVX2 inline __m256i rshift_round_floor(__m256i v, __m256i count, __m256i half) {
  return _mm256_srav_epi32(_mm256_add_epi32(_mm256_add_epi32(v, half), _mm256_srai_epi32(v, 31)), count);
}

// rshift_round by the plan's uniform shift i (rshift_round_u32 of the AVX-512 level): 1 <= s <= 30: the floor
// form above; other s > 0:
// sign(v)·((|v| + 2^(s-1)) >> s) (|v| <= 2^30 proved, so |v| + 2^(s-1) <= 2^31 + 2^30 fits the unsigned lane
// vpsrlvd shifts; counts of 32 and more give 0, rshift_round's result for |v| < 2^(s-1)); s <= 0: v·2^-s
// (exact: cell_fits_int32 bounds the result).
QGRU_AVX2 inline __m256i rshift_round_u32(__m256i v, const Cell32Lanes& L, int i) {
  if (L.shift_floor[i]) return rshift_round_floor(v, lanes8(L.shift_count[i]), lanes8(L.shift_half[i]));
  if (L.shift_sign[i] > 0) {
    const __m256i rounded =
        _mm256_srlv_epi32(_mm256_add_epi32(_mm256_abs_epi32(v), lanes8(L.shift_half[i])), lanes8(L.shift_count[i]));
    return with_sign_of(rounded, v);
  }
  if (L.shift_sign[i] == 0) return v;
  return _mm256_sllv_epi32(v, lanes8(L.shift_count[i]));
}

// rshift_round with the per-channel shift split by prepare_cell32_plan: sign(v)·(((|v| + half) >> right) << left)
// (|v| <= 2^30, the same bounds as above).
QGRU_AVX2 inline __m256i rshift_round_split32(__m256i v, __m256i right, __m256i left, __m256i half) {
  const __m256i magnitude = _mm256_sllv_epi32(_mm256_srlv_epi32(_mm256_add_epi32(_mm256_abs_epi32(v), half), right), left);
  return with_sign_of(magnitude, v);
}

// A linear's code minus its zero point: min(max(rshift_round(acc + offset, s), q_min - zp), q_max - zp).
// Floor: every channel's s in [1, 30] (Cell32Plan::floor_x / floor_h), `left` is not read.
template <bool Floor>
QGRU_AVX2 inline __m256i linear_diff32(const int32_t* acc, const int32_t* offset, const int32_t* right, const int32_t* left,
                                       const int32_t* half, const Lanes& k, __m256i lo, __m256i hi) {
  const __m256i sum = _mm256_add_epi32(load8(acc, k), load8(offset, k));  // |.| <= 2^30
  __m256i shifted;
  if constexpr (Floor) {
    shifted = rshift_round_floor(sum, load8(right, k), load8(half, k));
  } else {
    shifted = rshift_round_split32(sum, load8(right, k), load8(left, k), load8(half, k));
  }
  return _mm256_min_epi32(_mm256_max_epi32(shifted, lo), hi);
}

// The x side of gate g (x_term32 of the AVX-512 level).
template <bool Floor>
QGRU_AVX2 inline __m256i x_term32(const Cell32Plan& plan, const int32_t* gx, size_t c, const Lanes& k, int g) {
  const Cell32Lanes& L = plan.lanes;
  const int shift = g == 0 ? Cell32Lanes::IhZ : g == 1 ? Cell32Lanes::IhR : Cell32Lanes::IhN;
  return rshift_round_u32(linear_diff32<Floor>(gx, plan.offset_x.data() + c, plan.right_x.data() + c, plan.left_x.data() + c,
                                               plan.half_x.data() + c, k, lanes8(L.ih_lo), lanes8(L.ih_hi)),
                          L, shift);
}

// A gate's table index (always inside the table, see Cell32Plan) and the table entry there.
QGRU_AVX2 inline __m256i gate_output32(__m256i sum, const Cell32Lanes& L, int g, const int32_t* table) {
  const __m256i index =
      _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(sum, lanes8(L.gate_lo[g])), lanes8(L.gate_hi[g])), lanes8(L.gate_add[g]));
  return _mm256_i32gather_epi32(reinterpret_cast<const int*>(table), index, 4);
}

// C-1 .. C-4 on eight units (cell_block32 of the AVX-512 level, operation for operation).
QGRU_AVX2 inline __m256i cell_block32(const Cell32Lanes& L, const int32_t* t_z, const int32_t* t_r, const int32_t* t_n,
                                      const __m256i x_term[3], const __m256i hh_diff[3], __m256i q_h_old) {
  // C-1, C-2: the two shifted terms (|sum| + |zp| <= 2^30, proved), saturated and clamped into the table at once
  const __m256i z_sum = _mm256_add_epi32(x_term[0], rshift_round_u32(hh_diff[0], L, Cell32Lanes::HhZ));
  const __m256i q_update_gate_output = gate_output32(z_sum, L, 0, t_z);
  const __m256i r_sum = _mm256_add_epi32(x_term[1], rshift_round_u32(hh_diff[1], L, Cell32Lanes::HhR));
  const __m256i q_reset_gate_output = gate_output32(r_sum, L, 1, t_r);
  // C-3
  const __m256i product = _mm256_mullo_epi32(_mm256_sub_epi32(q_reset_gate_output, lanes8(L.zp_reset_gate_output)), hh_diff[2]);  // S_r·S_hh
  const __m256i n_sum = _mm256_add_epi32(x_term[2], rshift_round_u32(product, L, Cell32Lanes::RhN));
  const __m256i q_new_gate_output = gate_output32(n_sum, L, 2, t_n);
  // C-4
  const __m256i n_diff_aligned =
      rshift_round_u32(_mm256_sub_epi32(q_new_gate_output, lanes8(L.zp_new_gate_output)), L, Cell32Lanes::NToH);  // aligned - zp_h
  const __m256i q_old_contribution_mul =
      _mm256_mullo_epi32(_mm256_sub_epi32(q_update_gate_output, lanes8(L.zp_update_gate_output)), _mm256_sub_epi32(q_h_old, lanes8(L.h_zp)));  // S_u·S_h
  const __m256i q_new_contribution_mul =
      _mm256_mullo_epi32(_mm256_sub_epi32(lanes8(L.one_in_update_gate_scale), q_update_gate_output), n_diff_aligned);
  const __m256i q_combined = _mm256_add_epi32(q_old_contribution_mul, q_new_contribution_mul);  // S_u·S_h
  return _mm256_min_epi32(
      _mm256_max_epi32(_mm256_add_epi32(rshift_round_u32(q_combined, L, Cell32Lanes::U), lanes8(L.h_zp)), lanes8(L.h_min)),
      lanes8(L.h_max));
}

// The int16 codes of [j, j + count) as int32 lanes: all eight, or the first `count` (the other lanes 0).
QGRU_AVX2 inline __m256i load_h8(const int16_t* h, const Lanes& k, int count) {
  if (k.full) return _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
  alignas(16) int16_t part[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(part, h, static_cast<size_t>(count) * sizeof(int16_t));
  return _mm256_cvtepi16_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(part)));
}

// XTerms: gx holds x_terms_avx2_i32's output instead of the raw B-1 accumulators. FloorX, FloorH: the plan's
// floor_x, floor_h (the rounding form of the two linears).
template <bool XTerms, bool FloorX, bool FloorH>
QGRU_AVX2 void cell_impl32(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* gx, const int32_t* gh,
                           const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias,
                           int32_t* dst) {
  const int H = p.hidden_size;
  const Cell32Lanes& L = plan.lanes;
  for (int j = j0; j < j1; j += 8) {
    const int count = std::min(8, j1 - j);
    const Lanes k = lanes_for(count);
    __m256i x_term[3], hh_diff[3];  // x_term: S_*_gate_input (gate g's x side); hh_diff: S_weight_hh_linear
    for (int g = 0; g < 3; ++g) {
      const size_t c = static_cast<size_t>(g) * H + j;
      if constexpr (XTerms) {
        x_term[g] = load8(gx + c, k);
      } else {
        x_term[g] = x_term32<FloorX>(plan, gx + c, c, k, g);
      }
      hh_diff[g] = linear_diff32<FloorH>(gh + c, plan.offset_h.data() + c, plan.right_h.data() + c, plan.left_h.data() + c,
                                 plan.half_h.data() + c, k, lanes8(L.hh_lo), lanes8(L.hh_hi));
    }
    const __m256i q_h_new = cell_block32(L, p.update_gate.table, p.reset_gate.table, p.new_gate.table, x_term, hh_diff,
                                         load_h8(h_old + j, k, count));
    // h's codes lie in int16 (and, with the u8 copy, codes + h_bias in [0, 255]): the saturating packs are exact
    const __m128i h16 = _mm_packs_epi32(_mm256_castsi256_si128(q_h_new), _mm256_extracti128_si256(q_h_new, 1));
    const __m128i hu8 = _mm_packus_epi16(_mm_add_epi16(h16, _mm_set1_epi16(static_cast<int16_t>(h_bias))), _mm_setzero_si128());
    if (k.full) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + j), q_h_new);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(h_new16 + j), h16);
      if (h_new_u8) _mm_storel_epi64(reinterpret_cast<__m128i*>(h_new_u8 + j), hu8);
    } else {
      _mm256_maskstore_epi32(dst + j, k.mask, q_h_new);
      alignas(16) int16_t part16[8];
      alignas(16) uint8_t part8[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(part16), h16);
      _mm_store_si128(reinterpret_cast<__m128i*>(part8), hu8);
      std::memcpy(h_new16 + j, part16, static_cast<size_t>(count) * sizeof(int16_t));
      if (h_new_u8) std::memcpy(h_new_u8 + j, part8, static_cast<size_t>(count));
    }
  }
}

// cell_impl32 for the plan's rounding forms.
template <bool XTerms>
QGRU_AVX2 void cell_dispatch32(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* gx, const int32_t* gh,
                               const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias,
                               int32_t* dst) {
  const bool floor_x = plan.floor_x || XTerms;  // with XTerms the x side was shifted beforehand
  if (floor_x && plan.floor_h) {
    cell_impl32<XTerms, true, true>(p, plan, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
  } else if (floor_x) {
    cell_impl32<XTerms, true, false>(p, plan, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
  } else if (plan.floor_h) {
    cell_impl32<XTerms, false, true>(p, plan, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
  } else {
    cell_impl32<XTerms, false, false>(p, plan, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
  }
}

// C-2 / C-2a of the linear_before_reset = 0 cell on eight int32 lanes (reset_hidden_avx512_i32's operations; contract
// and bounds in fast_kernels.h). FloorX, FloorH: the plan's rounding forms of the two linears.
template <bool FloorX, bool FloorH>
QGRU_AVX2 void reset_hidden_impl32(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* gx, const int32_t* gh,
                                   const int16_t* h_old, int j0, int j1, int16_t* q_reset_hidden) {
  const int H = p.hidden_size;
  const Cell32Lanes& L = plan.lanes;
  for (int j = j0; j < j1; j += 8) {
    const int count = std::min(8, j1 - j);
    const Lanes k = lanes_for(count);
    const size_t c = static_cast<size_t>(H) + j;  // the reset channel
    const __m256i hh_diff = linear_diff32<FloorH>(gh + c, plan.offset_h.data() + c, plan.right_h.data() + c,
                                                  plan.left_h.data() + c, plan.half_h.data() + c, k, lanes8(L.hh_lo), lanes8(L.hh_hi));
    // C-2: the two shifted terms (|sum| + |zp| <= 2^30, cell_fits_int32), saturated and clamped into the table at once
    const __m256i r_sum = _mm256_add_epi32(x_term32<FloorX>(plan, gx + c, c, k, 1), rshift_round_u32(hh_diff, L, Cell32Lanes::HhR));
    const __m256i q_reset_gate_output = gate_output32(r_sum, L, 1, p.reset_gate.table);
    // C-2a: |(r - zp_r)·(h - zp_h)| <= 2^30 (reset_hidden_fits_int32), exact in vpmulld
    const __m256i product = _mm256_mullo_epi32(_mm256_sub_epi32(q_reset_gate_output, lanes8(L.zp_reset_gate_output)),
                                               _mm256_sub_epi32(load_h8(h_old + j, k, count), lanes8(L.h_zp)));  // S_r·S_h
    const __m256i q = _mm256_min_epi32(
        _mm256_max_epi32(_mm256_add_epi32(rshift_round_u32(product, L, Cell32Lanes::RhH), lanes8(L.h_zp)), lanes8(L.h_min)),
        lanes8(L.h_max));  // S_h
    // h's codes lie in int16: the saturating pack is exact
    const __m128i q16 = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    if (k.full) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q_reset_hidden + j), q16);
    } else {
      alignas(16) int16_t part16[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(part16), q16);
      std::memcpy(q_reset_hidden + j, part16, static_cast<size_t>(count) * sizeof(int16_t));
    }
  }
}

// x_terms_avx2_i32 for one rounding form of the x side.
template <bool Floor>
QGRU_AVX2 void x_terms_impl(const GruCellParamsView& p, const Cell32Plan& plan, int32_t* gx, size_t ldg, int rows, int j0, int j1) {
  const int H = p.hidden_size;
  for (int r = 0; r < rows; ++r) {
    int32_t* row = gx + static_cast<size_t>(r) * ldg;
    for (int g = 0; g < 3; ++g) {
      for (int j = j0; j < j1; j += 8) {
        const Lanes k = lanes_for(j1 - j);
        const size_t c = static_cast<size_t>(g) * H + j;
        const __m256i term = x_term32<Floor>(plan, row + c, c, k, g);
        if (k.full) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(row + c), term);
        } else {
          _mm256_maskstore_epi32(row + c, k.mask, term);
        }
      }
    }
  }
}

}  // namespace

QGRU_AVX2 void cell_rows_avx2_i32(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* gx, const int32_t* gh,
                                  const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias,
                                  int32_t* dst) {
  cell_dispatch32<false>(p, plan, gx, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
}

QGRU_AVX2 void cell_rows_avx2_i32_xterms(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* x_terms,
                                         const int32_t* gh, const int16_t* h_old, int j0, int j1, int16_t* h_new16,
                                         uint8_t* h_new_u8, int32_t h_bias, int32_t* dst) {
  cell_dispatch32<true>(p, plan, x_terms, gh, h_old, j0, j1, h_new16, h_new_u8, h_bias, dst);
}

QGRU_AVX2 void x_terms_avx2_i32(const GruCellParamsView& p, const Cell32Plan& plan, int32_t* gx, size_t ldg, int rows,
                                int j0, int j1) {
  if (plan.floor_x) {
    x_terms_impl<true>(p, plan, gx, ldg, rows, j0, j1);
  } else {
    x_terms_impl<false>(p, plan, gx, ldg, rows, j0, j1);
  }
}

QGRU_AVX2 void reset_hidden_avx2_i32(const GruCellParamsView& p, const Cell32Plan& plan, const int32_t* gx, const int32_t* gh,
                                     const int16_t* h_old, int j0, int j1, int16_t* q_reset_hidden) {
  if (plan.floor_x && plan.floor_h) {
    reset_hidden_impl32<true, true>(p, plan, gx, gh, h_old, j0, j1, q_reset_hidden);
  } else if (plan.floor_x) {
    reset_hidden_impl32<true, false>(p, plan, gx, gh, h_old, j0, j1, q_reset_hidden);
  } else if (plan.floor_h) {
    reset_hidden_impl32<false, true>(p, plan, gx, gh, h_old, j0, j1, q_reset_hidden);
  } else {
    reset_hidden_impl32<false, false>(p, plan, gx, gh, h_old, j0, j1, q_reset_hidden);
  }
}

#else  // not x86-64: the fast executor never calls these (avx2_kernels_built() is false)

void reset_hidden_avx2_i32(const GruCellParamsView&, const Cell32Plan&, const int32_t*, const int32_t*, const int16_t*, int, int,
                           int16_t*) {
  std::abort();
}

void cell_rows_avx2_i32(const GruCellParamsView&, const Cell32Plan&, const int32_t*, const int32_t*, const int16_t*, int, int,
                        int16_t*, uint8_t*, int32_t, int32_t*) {
  std::abort();
}
void cell_rows_avx2_i32_xterms(const GruCellParamsView&, const Cell32Plan&, const int32_t*, const int32_t*, const int16_t*,
                               int, int, int16_t*, uint8_t*, int32_t, int32_t*) {
  std::abort();
}
void x_terms_avx2_i32(const GruCellParamsView&, const Cell32Plan&, int32_t*, size_t, int, int, int) { std::abort(); }

#endif

}  // namespace qgru::fast
