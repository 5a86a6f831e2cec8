// The avx512-vnni level's cell step on sixteen int32 lanes (contracts in fast_kernels.h: cell_rows_avx512_i32, its
// _xterms form, x_terms_avx512_i32; the bounds in cell_fits_int32) and the batch-1 small recurrence that runs it
// with the GEMV in registers (recurrence_small_avx512_i32). Compiled for any x86-64: every function here carries
// QGRU_AVX512 and is only called after cpu_has_avx512_vnni() (fast_plan.cpp, choose_isa); on other architectures the entry
// points exist but are never called.
#include "avx512_target.h"
#include "fast_kernels.h"
#include "worker_team.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace qgru::fast {

#if QGRU_FAST_HAVE_AVX512

namespace {

// ---- the cell step on sixteen int32 lanes (cell_rows_avx512_i32; the bounds in cell_fits_int32) ----------

// The lanes of a Cell32Lanes row (sixteen copies of one value), read where they are used as a broadcast of one
// int32: four bytes from L1 where a whole row would take a 64-byte load (the cell is bound by its loads).
QGRU_AVX512 inline __m512i lanes(const int32_t (&row)[16]) { return _mm512_set1_epi32(row[0]); }

// rshift_round for |v| <= 2^30 and shifts s in [1, 30]: (v + half + (v >> 31)) >> s with arithmetic shifts and
// half = 2^(s-1) (the floor form derived at Cell32Plan::floor_x; the sum stays within ±(2^30 + 2^29)): four
// operations where the sign-magnitude form takes six.
QGRU_AVX512 inline __m512i rshift_round_floor32(__m512i v, __m512i s, __m512i half) {
  return _mm512_srav_epi32(_mm512_add_epi32(_mm512_add_epi32(v, half), _mm512_srai_epi32(v, 31)), s);
}

// rshift_round (rounding.h) on int32 lanes by the uniform shift i of the plan: in the floor form when the shift
// lies in [1, 30] (Cell32Lanes::shift_floor); else s > 0: sign(v)·((|v| + 2^(s-1)) >> s) (|v| <= 2^30 proved,
// so |v| + 2^(s-1) <= 2^31 + 2^30 fits the unsigned lane; counts of 32 and more give 0, rshift_round's result
// for |v| < 2^(s-1)); s <= 0: v·2^-s (exact: cell_fits_int32 bounds the result).
QGRU_AVX512 inline __m512i rshift_round_u32(__m512i v, const Cell32Lanes& L, int i) {
  if (L.shift_floor[i]) return rshift_round_floor32(v, lanes(L.shift_count[i]), lanes(L.shift_half[i]));
  if (L.shift_sign[i] > 0) {
    const __mmask16 negative = _mm512_movepi32_mask(v);
    const __m512i rounded = _mm512_srlv_epi32(_mm512_add_epi32(_mm512_abs_epi32(v), lanes(L.shift_half[i])), lanes(L.shift_count[i]));
    return _mm512_mask_sub_epi32(rounded, negative, _mm512_setzero_si512(), rounded);
  }
  if (L.shift_sign[i] == 0) return v;
  return _mm512_sllv_epi32(v, lanes(L.shift_count[i]));
}

// rshift_round of int32 lanes with the shift split by prepare_cell32_plan (right, left, half):
// sign(v)·(((|v| + half) >> right) << left). |v| <= 2^30 (proved), so |v| + half <= 2^31 + 2^30 fits the
// unsigned lane vpsrlvd shifts, and the left shift of |v| is exact (cell_fits_int32 bounds the result).
QGRU_AVX512 inline __m512i rshift_round_split32(__m512i v, __m512i right, __m512i left, __m512i half) {
  const __mmask16 negative = _mm512_movepi32_mask(v);
  const __m512i magnitude = _mm512_sllv_epi32(_mm512_srlv_epi32(_mm512_add_epi32(_mm512_abs_epi32(v), half), right), left);
  return _mm512_mask_sub_epi32(magnitude, negative, _mm512_setzero_si512(), magnitude);
}

// A linear's code minus its zero point: min(max(rshift_round(acc + offset, s), q_min - zp), q_max - zp); with
// `floor` (every shift of the side in [1, 30]: Cell32Plan::floor_x, floor_h) by rshift_round_floor32. `folded`
// (Cell32Plan::sums_folded_x, _h): a is the sum already, plus half in the floor form (cell32_sum_fold).
QGRU_AVX512 inline __m512i linear_diff32_v(__m512i a, const int32_t* offset, const int32_t* right, const int32_t* left,
                                           const int32_t* half, __mmask16 k, __m512i lo, __m512i hi, bool floor, bool folded) {
  __m512i shifted;
  if (folded && floor) {
    // a = v + half with |v| <= 2^30: v < 0 exactly when a < half, so (v + half + (v >> 31)) >> s = (a - [a < half]) >> s
    const __mmask16 negative = _mm512_cmplt_epi32_mask(a, _mm512_maskz_loadu_epi32(k, half));
    shifted = _mm512_srav_epi32(_mm512_mask_sub_epi32(a, negative, a, _mm512_set1_epi32(1)), _mm512_maskz_loadu_epi32(k, right));
  } else {
    const __m512i sum = folded ? a : _mm512_add_epi32(a, _mm512_maskz_loadu_epi32(k, offset));  // |.| <= 2^30
    shifted = floor ? rshift_round_floor32(sum, _mm512_maskz_loadu_epi32(k, right), _mm512_maskz_loadu_epi32(k, half))
                    : rshift_round_split32(sum, _mm512_maskz_loadu_epi32(k, right), _mm512_maskz_loadu_epi32(k, left),
                                           _mm512_maskz_loadu_epi32(k, half));
  }
  return _mm512_min_epi32(_mm512_max_epi32(shifted, lo), hi);
}
// The h side of one gate's 16 channels from c (the weight_hh_linear code minus its zero point) from the B-2 sums gh.
QGRU_AVX512 inline __m512i hh_diff32_v(const Cell32Plan& plan, __m512i gh, size_t c, __mmask16 k) {
  return linear_diff32_v(gh, plan.offset_h.data() + c, plan.right_h.data() + c, plan.left_h.data() + c, plan.half_h.data() + c,
                         k, lanes(plan.lanes.hh_lo), lanes(plan.lanes.hh_hi), plan.floor_h, plan.sums_folded_h);
}
QGRU_AVX512 inline __m512i hh_diff32(const Cell32Plan& plan, const int32_t* gh, size_t c, __mmask16 k) {
  const __m512i a = k == 0xFFFF ? _mm512_loadu_si512(gh) : _mm512_maskz_loadu_epi32(k, gh);  // plain: store forwarding
  return hh_diff32_v(plan, a, c, k);
}

// The three activation tables of a cell as the int32 cell reads them: each either 256 bytes in four zmm
// registers (CellByteTables), loaded once per call of a kernel, or the int32 table read by gathers.
struct CellTables32 {
  __m512i bytes[3][4];
  bool is_bytes[3], is_signed[3];
  const int32_t* table[3];
};
QGRU_AVX512 inline CellTables32 cell_tables32(const GruCellParamsView& p, const CellByteTables& b) {
  CellTables32 t;
  const int32_t* tables[3] = {p.update_gate.table, p.reset_gate.table, p.new_gate.table};
  for (int g = 0; g < 3; ++g) {
    t.is_bytes[g] = b.bytes[g];
    t.is_signed[g] = b.is_signed[g];
    t.table[g] = tables[g];
    for (int i = 0; i < 4; ++i) t.bytes[g][i] = _mm512_load_si512(b.table[g] + 64 * i);
  }
  return t;
}

// Gate g's table read at an index already inside the table (see Cell32Plan): the byte form by vpermt2b, else
// a 32-bit gather.
QGRU_AVX512 inline __m512i table_read32(const CellTables32& t, int g, __m512i index) {
  if (!t.is_bytes[g]) return _mm512_i32gather_epi32(index, t.table[g], 4);
  // index in [0, 255]: byte 0 of each int32 lane is the index, bytes 1 .. 3 are zero. vpermt2b reads every
  // byte as an index (its low 7 bits) into the 128 table bytes of two registers: byte 0 of each lane gets entry
  // index & 127 of the low half (entries 0 .. 127) and of the high half (128 .. 255); bit 7 of the index byte
  // picks the half. The other bytes get entry 0, dropped below when byte 0 is extended to 32 bits.
  const __m512i from_lo = _mm512_permutex2var_epi8(t.bytes[g][0], index, t.bytes[g][1]);
  const __m512i from_hi = _mm512_permutex2var_epi8(t.bytes[g][2], index, t.bytes[g][3]);
  const __m512i entry = _mm512_mask_blend_epi8(_mm512_movepi8_mask(index), from_lo, from_hi);
  return t.is_signed[g] ? _mm512_srai_epi32(_mm512_slli_epi32(entry, 24), 24)    // the byte as int8
                        : _mm512_and_si512(entry, _mm512_set1_epi32(0xFF));      // the byte as uint8
}

// The x side of C-1 .. C-3 for gate g: the weight_ih_linear code minus its zero point, rounded into the gate
// input's space (for the new gate, by s_ih_n; the reset product comes later).
QGRU_AVX512 inline __m512i x_term32_v(const Cell32Plan& plan, __m512i gx, size_t c, __mmask16 k, int g) {
  const Cell32Lanes& L = plan.lanes;
  const int shift = g == 0 ? Cell32Lanes::IhZ : g == 1 ? Cell32Lanes::IhR : Cell32Lanes::IhN;
  return rshift_round_u32(linear_diff32_v(gx, plan.offset_x.data() + c, plan.right_x.data() + c, plan.left_x.data() + c,
                                          plan.half_x.data() + c, k, lanes(L.ih_lo), lanes(L.ih_hi), plan.floor_x,
                                          plan.sums_folded_x), L, shift);
}
QGRU_AVX512 inline __m512i x_term32(const Cell32Plan& plan, const int32_t* gx, size_t c, __mmask16 k, int g) {
  const __m512i a = k == 0xFFFF ? _mm512_loadu_si512(gx) : _mm512_maskz_loadu_epi32(k, gx);  // plain: store forwarding
  return x_term32_v(plan, a, c, k, g);
}

// A gate's table index from its two terms (see Cell32Plan): clamp(sum, lo, hi) + add.
QGRU_AVX512 inline __m512i gate_index32(__m512i sum, const Cell32Lanes& L, int g) {
  return _mm512_add_epi32(_mm512_min_epi32(_mm512_max_epi32(sum, lanes(L.gate_lo[g])), lanes(L.gate_hi[g])), lanes(L.gate_add[g]));
}

// C-1 .. C-4 on U blocks of sixteen units: the gates' x terms (each in its gate input's space), the
// weight_hh_linear codes minus their zero point, and the old h codes give the new h codes (gru_cell_gates'
// operations, int32 lanes, every intermediate within ±2^30 by cell_fits_int32). The U blocks are independent;
// each stage runs for all of them before the next, so that the core overlaps their dependency chains (a block's
// chain runs from the GEMM sums through three table reads and three products). BM_cell_i32/H:256, U = 2 against
// U = 1 with the same table read: 22.5 against 26.0 ns per 16 units from the x terms, no change from the GEMM
// sums (30); U = 4: no further change.
template <int U>
QGRU_AVX512 __attribute__((always_inline)) inline void cell_blocks32(const Cell32Lanes& L, const CellTables32& tables,
                                                                    const __m512i (&x_term)[U][3], const __m512i (&hh_diff)[U][3],
                                                                    const __m512i (&q_h_old)[U], __m512i (&q_h_new)[U]) {
  __m512i q_update_gate_output[U], q_reset_gate_output[U], q_new_gate_output[U];
  // C-1, C-2: the two shifted terms (|sum| + |zp| <= 2^30, proved), saturated and clamped into the table at once
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const __m512i z_sum = _mm512_add_epi32(x_term[u][0], rshift_round_u32(hh_diff[u][0], L, Cell32Lanes::HhZ));
    q_update_gate_output[u] = table_read32(tables, 0, gate_index32(z_sum, L, 0));
    const __m512i r_sum = _mm512_add_epi32(x_term[u][1], rshift_round_u32(hh_diff[u][1], L, Cell32Lanes::HhR));
    q_reset_gate_output[u] = table_read32(tables, 1, gate_index32(r_sum, L, 1));
  }
  // C-3
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const __m512i product = _mm512_mullo_epi32(_mm512_sub_epi32(q_reset_gate_output[u], lanes(L.zp_reset_gate_output)), hh_diff[u][2]);  // S_r·S_hh
    const __m512i n_sum = _mm512_add_epi32(x_term[u][2], rshift_round_u32(product, L, Cell32Lanes::RhN));
    q_new_gate_output[u] = table_read32(tables, 2, gate_index32(n_sum, L, 2));
  }
  // C-4
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const __m512i n_diff_aligned =
        rshift_round_u32(_mm512_sub_epi32(q_new_gate_output[u], lanes(L.zp_new_gate_output)), L, Cell32Lanes::NToH);  // aligned - zp_h
    const __m512i q_old_contribution_mul = _mm512_mullo_epi32(_mm512_sub_epi32(q_update_gate_output[u], lanes(L.zp_update_gate_output)),
                                                              _mm512_sub_epi32(q_h_old[u], lanes(L.h_zp)));  // S_u·S_h
    const __m512i q_new_contribution_mul =
        _mm512_mullo_epi32(_mm512_sub_epi32(lanes(L.one_in_update_gate_scale), q_update_gate_output[u]), n_diff_aligned);
    const __m512i q_combined = _mm512_add_epi32(q_old_contribution_mul, q_new_contribution_mul);  // S_u·S_h
    q_h_new[u] = _mm512_min_epi32(
        _mm512_max_epi32(_mm512_add_epi32(rshift_round_u32(q_combined, L, Cell32Lanes::U), lanes(L.h_zp)), lanes(L.h_min)),
        lanes(L.h_max));
  }
}
// One block of sixteen units (cell_blocks32 with U = 1).
QGRU_AVX512 inline __m512i cell_block32(const Cell32Lanes& L, const CellTables32& tables, const __m512i x_term[3],
                                        const __m512i hh_diff[3], __m512i q_h_old) {
  const __m512i x1[1][3] = {{x_term[0], x_term[1], x_term[2]}};
  const __m512i h1[1][3] = {{hh_diff[0], hh_diff[1], hh_diff[2]}};
  const __m512i old1[1] = {q_h_old};
  __m512i new1[1];
  cell_blocks32<1>(L, tables, x1, h1, old1, new1);
  return new1[0];
}

// One row's operands of the cell step: its B-1 and B-2 sums (or x terms) [3H], its h codes before the step, and
// where its new codes go (h_new_u8 and y.y may be null), as cell_rows_avx512_i32 takes them.
struct CellRowIo {
  const int32_t* g_x;
  const int32_t* g_h;
  const int16_t* h_old;
  int16_t* h_new16;
  uint8_t* h_new_u8;
  int32_t* dst;
  FloatCopy y;
};

// FloatCopy's value of sixteen codes: float(code - zp)·scale (int32 difference, exact conversion, one product).
QGRU_AVX512 inline __m512 float_copy_v(__m512i q, const FloatCopy& y) {
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, _mm512_set1_epi32(y.zp))), _mm512_set1_ps(y.scale));
}

// The lanes of a block of 16 units with `left` units left in the range: all 16, or the first `left`.
inline __mmask16 units_mask(int left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1u);
}

// U consecutive blocks of sixteen units of the row io from unit j, block u at units [j + 16u, j + 16u + 16), the
// last one masked by k_last (the others whole): the cell step from the row's GEMM sums, written to its outputs.
// XTerms: g_x holds x_terms_avx512_i32's output (each gate's x term already in its gate input's space) instead of
// the raw B-1 accumulators.
template <bool XTerms, int U>
QGRU_AVX512 __attribute__((always_inline)) inline void cell_blocks_io32(const GruCellParamsView& p, const Cell32Plan& plan,
                                                                       const CellTables32& tables, const CellRowIo& io, int j,
                                                                       __mmask16 k_last, int32_t h_bias) {
  const int H = p.hidden_size;
  __m512i x_term[U][3], hh_diff[U][3], q_h_old[U], q_h_new[U];  // x_term: S_*_gate_input; hh_diff: S_weight_hh_linear
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const int ju = j + 16 * u;
    const __mmask16 k = u + 1 == U ? k_last : static_cast<__mmask16>(0xFFFF);
#pragma GCC unroll 3
    for (int g = 0; g < 3; ++g) {
      const size_t c = static_cast<size_t>(g) * H + ju;
      if constexpr (XTerms) {
        x_term[u][g] = _mm512_maskz_loadu_epi32(k, io.g_x + c);
      } else {
        x_term[u][g] = x_term32(plan, io.g_x + c, c, k, g);
      }
      hh_diff[u][g] = hh_diff32(plan, io.g_h + c, c, k);
    }
    q_h_old[u] = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(k, io.h_old + ju));
  }
  cell_blocks32<U>(plan.lanes, tables, x_term, hh_diff, q_h_old, q_h_new);
#pragma GCC unroll 4
  for (int u = 0; u < U; ++u) {
    const int ju = j + 16 * u;
    const __mmask16 k = u + 1 == U ? k_last : static_cast<__mmask16>(0xFFFF);
    if (k == 0xFFFF) {
      // Whole vectors by plain stores: the next step's GEMV reads the u8 codes four at a time, which store
      // forwarding serves from a plain store but not from a masked narrowing one.
      _mm512_storeu_si512(io.dst + ju, q_h_new[u]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(io.h_new16 + ju), _mm512_cvtepi32_epi16(q_h_new[u]));
      if (io.h_new_u8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(io.h_new_u8 + ju),
                         _mm512_cvtepi32_epi8(_mm512_add_epi32(q_h_new[u], _mm512_set1_epi32(h_bias))));
      }
      if (io.y.y) _mm512_storeu_ps(io.y.y + ju, float_copy_v(q_h_new[u], io.y));
    } else {
      _mm512_mask_storeu_epi32(io.dst + ju, k, q_h_new[u]);
      _mm512_mask_cvtepi32_storeu_epi16(io.h_new16 + ju, k, q_h_new[u]);
      if (io.h_new_u8) _mm512_mask_cvtepi32_storeu_epi8(io.h_new_u8 + ju, k, _mm512_add_epi32(q_h_new[u], _mm512_set1_epi32(h_bias)));
      if (io.y.y) _mm512_mask_storeu_ps(io.y.y + ju, k, float_copy_v(q_h_new[u], io.y));
    }
  }
}

// The units [j0, j1) of one row: two blocks at a time (their chains overlap: cell_blocks32), then the last one,
// masked when partial.
template <bool XTerms>
QGRU_AVX512 void cell_impl32(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                             const CellRowIo& io, int j0, int j1, int32_t h_bias) {
  const CellTables32 tables = cell_tables32(p, byte_tables);
  int j = j0;
  for (; j + 32 <= j1; j += 32) cell_blocks_io32<XTerms, 2>(p, plan, tables, io, j, static_cast<__mmask16>(0xFFFF), h_bias);
  for (; j < j1; j += 16) cell_blocks_io32<XTerms, 1>(p, plan, tables, io, j, units_mask(j1 - j), h_bias);
}

// recurrence_small_avx512_i32 for H = 16·NH (fast_kernels.h): per step the GEMV over R's 3·NH blocks of 16
// channels (K = H: K4 = 4·NH dwords of u8 codes, each broadcast from the h register), the accumulators minus
// a_bias·Σ_k W (gemv_vnni_u8s8's int32 sums), then cell_block32 per 16 units.
template <int NH>
QGRU_AVX512 void small_recurrence(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                                  const int8_t* R_packed, const int32_t* R_bias_rowsum, int32_t a_bias,
                                  const int32_t* x_terms, int T, bool reverse, const std::atomic<int>* steps_ready,
                                  const int16_t* h16_in, int16_t* h16_out, int32_t* out, size_t out_stride) {
  constexpr int H = 16 * NH;
  constexpr int NB = 3 * NH;  // blocks of 16 channels: gate g's units 16u.. are block g·NH + u
  constexpr int K4 = H / 4;
  constexpr size_t kGroupBytes = static_cast<size_t>(K4) * 256;
  const Cell32Lanes& L = plan.lanes;
  const CellTables32 tables = cell_tables32(p, byte_tables);
  const __m512i bias_u8 = _mm512_set1_epi32(a_bias);
  // h as int32 codes (hv) and as u8 codes + a_bias in the low H bytes of h_u8 (bytes beyond H meet no weight)
  __m512i hv[NH];
  __m512i h_u8 = _mm512_setzero_si512();
  for (int u = 0; u < NH; ++u) {
    hv[u] = _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h16_in + 16 * u)));
    h_u8 = _mm512_mask_broadcast_i32x4(h_u8, static_cast<__mmask16>(0xFu << (4 * u)), _mm512_cvtepi32_epi8(_mm512_add_epi32(hv[u], bias_u8)));
  }
  for (int step = 0; step < T; ++step) {
    const int t = reverse ? T - 1 - step : step;
    __m512i acc[NB];
#pragma GCC unroll 16
    for (int b = 0; b < NB; ++b) acc[b] = _mm512_setzero_si512();
    for (int k4 = 0; k4 < K4; ++k4) {
      const __m512i a = _mm512_permutexvar_epi32(_mm512_set1_epi32(k4), h_u8);  // u8 codes 4·k4 .. 4·k4 + 3
#pragma GCC unroll 16
      for (int b = 0; b < NB; ++b) {
        const __m512i w = _mm512_loadu_si512(R_packed + (b / 4) * kGroupBytes + static_cast<size_t>(k4) * 256 + (b % 4) * 64);
        acc[b] = dpbusd(acc[b], a, w);
      }
    }
    if (steps_ready) {
      spin_until([&] { return steps_ready->load(std::memory_order_acquire) > step; });
      // The x terms two steps ahead, when published: written by the other core, fetched while this one works.
      const int ahead = step + 2;
      if (ahead < T && steps_ready->load(std::memory_order_acquire) > ahead) {
        const char* next = reinterpret_cast<const char*>(x_terms + static_cast<size_t>(reverse ? T - 1 - ahead : ahead) * 3 * H);
        for (int b = 0; b < 3 * H * 4; b += 64) _mm_prefetch(next + b, _MM_HINT_T0);
      }
    }
    const int32_t* xt = x_terms + static_cast<size_t>(t) * 3 * H;
    int32_t* dst = out + static_cast<size_t>(t) * out_stride;
    for (int u = 0; u < NH; ++u) {
      __m512i x_term[3], hh_diff[3];
      for (int g = 0; g < 3; ++g) {
        const size_t c = static_cast<size_t>(g) * H + 16 * u;
        x_term[g] = _mm512_loadu_si512(xt + c);
        // Σ (h + a_bias)·w - a_bias·Σ w = Σ h·w, int32 (gemv_vnni_u8s8's contract), plus cell32_sum_fold when
        // plan.sums_folded_h (the executor folded it into R_bias_rowsum)
        const __m512i gh = _mm512_sub_epi32(acc[g * NH + u], _mm512_loadu_si512(R_bias_rowsum + c));
        hh_diff[g] = hh_diff32_v(plan, gh, c, static_cast<__mmask16>(0xFFFF));
      }
      hv[u] = cell_block32(L, tables, x_term, hh_diff, hv[u]);
      _mm512_storeu_si512(dst + 16 * u, hv[u]);
      // h codes + a_bias lie in [0, 255] (pack_vnni): the next step's operand bytes 16u .. 16u + 15
      h_u8 = _mm512_mask_broadcast_i32x4(h_u8, static_cast<__mmask16>(0xFu << (4 * u)), _mm512_cvtepi32_epi8(_mm512_add_epi32(hv[u], bias_u8)));
    }
  }
  for (int u = 0; u < NH; ++u) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(h16_out + 16 * u), _mm512_cvtepi32_epi16(hv[u]));  // h fits int16
  }
}

}  // namespace

QGRU_AVX512 void cell_rows_avx512_i32(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                                      const int32_t* gx, const int32_t* gh, const int16_t* h_old, int j0, int j1,
                                      int16_t* h_new16, uint8_t* h_new_u8, int32_t h_bias, int32_t* dst, const FloatCopy& y) {
  cell_impl32<false>(p, byte_tables, plan, CellRowIo{gx, gh, h_old, h_new16, h_new_u8, dst, y}, j0, j1, h_bias);
}

QGRU_AVX512 void cell_rows_avx512_i32_xterms(const GruCellParamsView& p, const CellByteTables& byte_tables,
                                             const Cell32Plan& plan, const int32_t* x_terms, const int32_t* gh,
                                             const int16_t* h_old, int j0, int j1, int16_t* h_new16, uint8_t* h_new_u8,
                                             int32_t h_bias, int32_t* dst, const FloatCopy& y) {
  cell_impl32<true>(p, byte_tables, plan, CellRowIo{x_terms, gh, h_old, h_new16, h_new_u8, dst, y}, j0, j1, h_bias);
}

QGRU_AVX512 void recurrence_small_avx512_i32(const GruCellParamsView& p, const CellByteTables& byte_tables,
                                             const Cell32Plan& plan, const int8_t* R_packed, const int32_t* R_bias_rowsum,
                                             int32_t a_bias, const int32_t* x_terms, int T, bool reverse,
                                             const std::atomic<int>* steps_ready, const int16_t* h16_in, int16_t* h16_out,
                                             int32_t* out, size_t out_stride) {
  switch (p.hidden_size) {
    case 16: return small_recurrence<1>(p, byte_tables, plan, R_packed, R_bias_rowsum, a_bias, x_terms, T, reverse, steps_ready, h16_in, h16_out, out, out_stride);
    case 32: return small_recurrence<2>(p, byte_tables, plan, R_packed, R_bias_rowsum, a_bias, x_terms, T, reverse, steps_ready, h16_in, h16_out, out, out_stride);
    case 48: return small_recurrence<3>(p, byte_tables, plan, R_packed, R_bias_rowsum, a_bias, x_terms, T, reverse, steps_ready, h16_in, h16_out, out, out_stride);
    case 64: return small_recurrence<4>(p, byte_tables, plan, R_packed, R_bias_rowsum, a_bias, x_terms, T, reverse, steps_ready, h16_in, h16_out, out, out_stride);
    default: std::abort();  // small_recurrence_applies() is false: the caller runs the step-by-step kernels
  }
}

QGRU_AVX512 void x_terms_avx512_i32(const GruCellParamsView& p, const Cell32Plan& plan, int32_t* gx, size_t ldg, int rows,
                                    int j0, int j1) {
  const int H = p.hidden_size;
  for (int r = 0; r < rows; ++r) {
    int32_t* row = gx + static_cast<size_t>(r) * ldg;
    for (int g = 0; g < 3; ++g) {
      for (int j = j0; j < j1; j += 16) {
        const __mmask16 k = units_mask(j1 - j);
        const size_t c = static_cast<size_t>(g) * H + j;
        _mm512_mask_storeu_epi32(row + c, k, x_term32(plan, row + c, c, k, g));
      }
    }
  }
}

// C-2 / C-2a of the linear_before_reset = 0 cell on sixteen int32 lanes (contract and bounds in fast_kernels.h): the
// reset gate as cell_blocks32 computes it, then r ⊙ h into h's space.
QGRU_AVX512 void reset_hidden_avx512_i32(const GruCellParamsView& p, const CellByteTables& byte_tables, const Cell32Plan& plan,
                                         const int32_t* gx, const int32_t* gh, const int16_t* h_old, int j0, int j1,
                                         int16_t* q_reset_hidden) {
  const int H = p.hidden_size;
  const Cell32Lanes& L = plan.lanes;
  const CellTables32 tables = cell_tables32(p, byte_tables);
  for (int j = j0; j < j1; j += 16) {
    const __mmask16 k = units_mask(j1 - j);
    const size_t c = static_cast<size_t>(H) + j;  // the reset channel
    // C-2: the two shifted terms (|sum| + |zp| <= 2^30, cell_fits_int32), saturated and clamped into the table at once
    const __m512i r_sum = _mm512_add_epi32(x_term32(plan, gx + c, c, k, 1), rshift_round_u32(hh_diff32(plan, gh + c, c, k), L, Cell32Lanes::HhR));
    const __m512i q_reset_gate_output = table_read32(tables, 1, gate_index32(r_sum, L, 1));
    // C-2a: |(r - zp_r)·(h - zp_h)| <= 2^30 (reset_hidden_fits_int32), exact in vpmulld
    const __m512i q_h_old = _mm512_cvtepi16_epi32(_mm256_maskz_loadu_epi16(k, h_old + j));
    const __m512i product = _mm512_mullo_epi32(_mm512_sub_epi32(q_reset_gate_output, lanes(L.zp_reset_gate_output)),
                                               _mm512_sub_epi32(q_h_old, lanes(L.h_zp)));  // S_r·S_h
    const __m512i q = _mm512_min_epi32(
        _mm512_max_epi32(_mm512_add_epi32(rshift_round_u32(product, L, Cell32Lanes::RhH), lanes(L.h_zp)), lanes(L.h_min)),
        lanes(L.h_max));  // S_h
    _mm512_mask_cvtepi32_storeu_epi16(q_reset_hidden + j, k, q);  // h's codes fit int16 (checked at pack time)
  }
}

#else  // not x86-64: the fast executor never calls these (avx512_kernels_built() is false)

void reset_hidden_avx512_i32(const GruCellParamsView&, const CellByteTables&, const Cell32Plan&, const int32_t*, const int32_t*,
                             const int16_t*, int, int, int16_t*) {
  std::abort();
}

void cell_rows_avx512_i32(const GruCellParamsView&, const CellByteTables&, const Cell32Plan&, const int32_t*,
                          const int32_t*, const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*, const FloatCopy&) {
  std::abort();
}
void cell_rows_avx512_i32_xterms(const GruCellParamsView&, const CellByteTables&, const Cell32Plan&, const int32_t*,
                                 const int32_t*, const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*, const FloatCopy&) {
  std::abort();
}
void x_terms_avx512_i32(const GruCellParamsView&, const Cell32Plan&, int32_t*, size_t, int, int, int) { std::abort(); }
void recurrence_small_avx512_i32(const GruCellParamsView&, const CellByteTables&, const Cell32Plan&, const int8_t*,
                                 const int32_t*, int32_t, const int32_t*, int, bool, const std::atomic<int>*, const int16_t*,
                                 int16_t*, int32_t*, size_t) {
  std::abort();
}

#endif

}  // namespace qgru::fast
