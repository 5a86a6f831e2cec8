// AVX-512 kernels of the fast executor (contracts in fast_kernels.h): the u8 x s8 VNNI GEMM and the cell
// step over a row of hidden units. Compiled for any x86-64: every function here carries a target
// attribute and is only called after the CPU was found to have AVX512F/BW/DQ/VL and AVX512-VNNI
// (fast_executor.cpp, cpu_has_avx512_vnni); on other architectures the entry points exist but are never
// called.
#include "../model/cell_bounds.h"
#include "fast_kernels.h"
#include "worker_team.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QGRU_FAST_HAVE_AVX512 1
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32() and trip -Wmaybe-uninitialized when
// inlined (GCC bug 105593, fixed in the headers of GCC 13; -Wuninitialized when the conversion's result is
// used in a loop): a false positive of the system header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

namespace qgru::fast {

void pack_vnni_u8s8(const int8_t* W, int rows, int Kp, int8_t* Bp) {
  const int groups = vnni_padded_rows(rows) / 64;
  const int K4 = Kp / 4;
  for (int g = 0; g < groups; ++g) {
    for (int k4 = 0; k4 < K4; ++k4) {
      for (int r = 0; r < 64; ++r) {  // r = 16·bb + lane
        const int row = 64 * g + r;
        for (int i = 0; i < 4; ++i) {
          const size_t dst = ((static_cast<size_t>(g) * K4 + k4) * 64 + r) * 4 + i;
          Bp[dst] = row < rows ? W[static_cast<size_t>(row) * Kp + 4 * k4 + i] : int8_t{0};
        }
      }
    }
  }
}

void prepare_byte_tables(const GruCellParamsView& p, CellByteTables* out) {
  const ActivationView* gates[3] = {&p.update_gate, &p.reset_gate, &p.new_gate};
  for (int g = 0; g < 3; ++g) {
    const ActivationView& a = *gates[g];
    std::memset(out->table[g], 0, sizeof(out->table[g]));
    out->bytes[g] = false;
    out->is_signed[g] = false;
    const int64_t count = static_cast<int64_t>(a.q_in_max) - a.q_in_min + 1;
    if (a.impl != ActivationImpl::Table || count <= 0 || count > 256) continue;
    int32_t lo = 0, hi = 0;
    for (int64_t i = 0; i < count; ++i) {
      lo = std::min(lo, a.table[i]);
      hi = std::max(hi, a.table[i]);
    }
    if (lo >= 0 && hi <= 255) {
      out->bytes[g] = true;
    } else if (lo >= -128 && hi <= 127) {
      out->bytes[g] = true;
      out->is_signed[g] = true;
    }
    if (out->bytes[g]) {
      for (int64_t i = 0; i < count; ++i) out->table[g][i] = static_cast<int8_t>(a.table[i]);  // u8 or i8 bits
    }
  }
}

namespace {
constexpr int64_t kLane32Limit = int64_t{1} << 30;  // every intermediate of the int32 cell stays within ±2^30

// cell_bounds.h's shifted_bound against the int32 lane limit (2^62 when the result would exceed it).
int64_t shifted_bound(int64_t b, int s) { return fast::shifted_bound(b, s, kLane32Limit, 31); }
}  // namespace

bool cell_fits_int32(const GruCellParamsView& p, int64_t gemm_x_max_abs, int64_t gemm_h_max_abs,
                     const int64_t* offset_x, const int64_t* offset_h) {
  const int64_t L = kLane32Limit;
  const int H = p.hidden_size;
  if (p.shift_update_gate_output > 62) return false;
  // B-1 / B-2: accumulator + folded offset, shifted, plus the linear's zero point
  for (int c = 0; c < 3 * H; ++c) {
    const int64_t sx = gemm_x_max_abs + std::abs(offset_x[c]);
    const int64_t sh = gemm_h_max_abs + std::abs(offset_h[c]);
    if (sx > L || sh > L) return false;
    if (shifted_bound(sx, p.shift_gemm_x_to_weight_ih_linear[c]) + std::abs(int64_t{p.weight_ih_linear.zp}) > L) return false;
    if (shifted_bound(sh, p.shift_gemm_h_to_weight_hh_linear[c]) + std::abs(int64_t{p.weight_hh_linear.zp}) > L) return false;
  }
  const int64_t d_ih = max_abs_diff(p.weight_ih_linear.q_min, p.weight_ih_linear.q_max, p.weight_ih_linear.zp);
  const int64_t d_hh = max_abs_diff(p.weight_hh_linear.q_min, p.weight_hh_linear.q_max, p.weight_hh_linear.zp);
  // C-1, C-2: two shifted terms plus the gate input's zero point
  if (shifted_bound(d_ih, p.shift_weight_ih_linear_to_update_gate_input) +
          shifted_bound(d_hh, p.shift_weight_hh_linear_to_update_gate_input) + std::abs(int64_t{p.update_gate_input.zp}) > L) {
    return false;
  }
  if (shifted_bound(d_ih, p.shift_weight_ih_linear_to_reset_gate_input) +
          shifted_bound(d_hh, p.shift_weight_hh_linear_to_reset_gate_input) + std::abs(int64_t{p.reset_gate_input.zp}) > L) {
    return false;
  }
  // C-3: the product r_diff·hh_diff, then two shifted terms plus the zero point
  const int64_t d_r = max_abs_diff(p.reset_gate.q_out_min, p.reset_gate.q_out_max, p.zp_reset_gate_output);
  if (d_r * d_hh > L) return false;
  if (shifted_bound(d_r * d_hh, p.shift_reset_mul_hh_to_new_gate_input) +
          shifted_bound(d_ih, p.shift_weight_ih_linear_to_new_gate_input) + std::abs(int64_t{p.new_gate_input.zp}) > L) {
    return false;
  }
  // C-4: n aligned to h (without its zero point), 1 - u, the two products and their sum
  const int64_t d_n = max_abs_diff(p.new_gate.q_out_min, p.new_gate.q_out_max, p.zp_new_gate_output);
  const int64_t n_aligned = shifted_bound(d_n, p.shift_new_gate_output_to_h);
  const int64_t d_u = max_abs_diff(p.update_gate.q_out_min, p.update_gate.q_out_max, p.zp_update_gate_output);
  const int64_t d_h = max_abs_diff(p.h.q_min, p.h.q_max, p.h.zp);
  const int64_t one = p.quant_one_in_update_gate_scale;
  if (std::abs(one) > L || n_aligned > L) return false;
  const int64_t one_minus_u = std::max(std::abs(one - p.update_gate.q_out_min), std::abs(one - p.update_gate.q_out_max));
  if (d_u > L || d_h > L || one_minus_u > L) return false;
  if (d_u * d_h > L || one_minus_u * n_aligned > L || d_u * d_h + one_minus_u * n_aligned > L) return false;
  if (shifted_bound(d_u * d_h + one_minus_u * n_aligned, p.shift_update_gate_output) + std::abs(int64_t{p.h.zp}) > L) return false;
  return true;
}

int32_t cell32_sum_fold(const Cell32Plan& plan, bool x_side, size_t c) {
  const std::vector<int32_t>& offset = x_side ? plan.offset_x : plan.offset_h;
  const bool floor = x_side ? plan.floor_x : plan.floor_h;
  const uint32_t half = floor ? static_cast<uint32_t>((x_side ? plan.half_x : plan.half_h)[c]) : 0u;  // 2^(s-1) <= 2^29
  // |offset| + half <= 2^30 + 2^29: fits int32 without wrapping; the narrowing keeps the low 32 bits (GCC and
  // Clang define it so, C++20 requires it)
  return static_cast<int32_t>(static_cast<uint32_t>(offset[c]) + half);
}

void prepare_cell32_plan(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, Cell32Plan* out) {
  const size_t G = 3 * static_cast<size_t>(p.hidden_size);
  auto split = [G](const int32_t* shift, const int64_t* offset, std::vector<int32_t>& off, std::vector<int32_t>& right,
                   std::vector<int32_t>& left, std::vector<int32_t>& half) {
    off.resize(G);
    right.resize(G);
    left.resize(G);
    half.resize(G);
    for (size_t c = 0; c < G; ++c) {
      off[c] = static_cast<int32_t>(offset[c]);  // |.| <= 2^30 (cell_fits_int32)
      const int32_t s = shift[c];
      right[c] = s > 0 ? s : 0;
      left[c] = s < 0 ? -s : 0;
      half[c] = s >= 1 && s <= 32 ? static_cast<int32_t>(uint32_t{1} << (s - 1)) : 0;  // u32 bits
    }
  };
  split(p.shift_gemm_x_to_weight_ih_linear, offset_x, out->offset_x, out->right_x, out->left_x, out->half_x);
  split(p.shift_gemm_h_to_weight_hh_linear, offset_h, out->offset_h, out->right_h, out->left_h, out->half_h);
  auto floor_form = [G](const int32_t* shift) {
    return std::all_of(shift, shift + G, [](int32_t s) { return s >= 1 && s <= 30; });
  };
  out->floor_x = floor_form(p.shift_gemm_x_to_weight_ih_linear);
  out->floor_h = floor_form(p.shift_gemm_h_to_weight_hh_linear);
  // code ranges are at most 16-bit and zero points inside them: every difference below fits int32
  out->ih_lo = p.weight_ih_linear.q_min - p.weight_ih_linear.zp;
  out->ih_hi = p.weight_ih_linear.q_max - p.weight_ih_linear.zp;
  out->hh_lo = p.weight_hh_linear.q_min - p.weight_hh_linear.zp;
  out->hh_hi = p.weight_hh_linear.q_max - p.weight_hh_linear.zp;
  const CodeSpace* inputs[3] = {&p.update_gate_input, &p.reset_gate_input, &p.new_gate_input};
  const ActivationView* acts[3] = {&p.update_gate, &p.reset_gate, &p.new_gate};
  for (int g = 0; g < 3; ++g) {
    const int64_t zp = inputs[g]->zp;
    const int64_t a = inputs[g]->q_min - zp, b = inputs[g]->q_max - zp;        // saturate(sum + zp) - zp
    const int64_t c = acts[g]->q_in_min - zp, d = acts[g]->q_in_max - zp;      // the table's input range - zp
    int64_t lo = std::max(a, c), hi = std::min(b, d);
    if (lo > hi) lo = hi = b < c ? c : d;  // disjoint: every saturated value clamps to one end of the table
    out->gate_lo[g] = static_cast<int32_t>(lo);
    out->gate_hi[g] = static_cast<int32_t>(hi);
    out->gate_add[g] = static_cast<int32_t>(zp - acts[g]->q_in_min);
  }
  Cell32Lanes& L = out->lanes;
  auto fill = [](int32_t (&lanes)[16], int64_t v) {
    for (int32_t& x : lanes) x = static_cast<int32_t>(v);  // every value fits int32 (code ranges, proved bounds)
  };
  fill(L.ih_lo, out->ih_lo);
  fill(L.ih_hi, out->ih_hi);
  fill(L.hh_lo, out->hh_lo);
  fill(L.hh_hi, out->hh_hi);
  for (int g = 0; g < 3; ++g) {
    fill(L.gate_lo[g], out->gate_lo[g]);
    fill(L.gate_hi[g], out->gate_hi[g]);
    fill(L.gate_add[g], out->gate_add[g]);
  }
  fill(L.h_zp, p.h.zp);
  fill(L.h_min, p.h.q_min);
  fill(L.h_max, p.h.q_max);
  fill(L.zp_update_gate_output, p.zp_update_gate_output);
  fill(L.zp_reset_gate_output, p.zp_reset_gate_output);
  fill(L.zp_new_gate_output, p.zp_new_gate_output);
  fill(L.one_in_update_gate_scale, p.quant_one_in_update_gate_scale);
  const int32_t shifts[Cell32Lanes::kShifts] = {
      p.shift_weight_ih_linear_to_update_gate_input, p.shift_weight_hh_linear_to_update_gate_input,
      p.shift_weight_ih_linear_to_reset_gate_input,  p.shift_weight_hh_linear_to_reset_gate_input,
      p.shift_weight_ih_linear_to_new_gate_input,    p.shift_reset_mul_hh_to_new_gate_input,
      p.shift_new_gate_output_to_h,                  p.shift_update_gate_output};
  for (int i = 0; i < Cell32Lanes::kShifts; ++i) {
    const int32_t sh = shifts[i];
    L.shift_sign[i] = sh > 0 ? 1 : sh == 0 ? 0 : -1;
    L.shift_floor[i] = sh >= 1 && sh <= 30 ? 1 : 0;
    fill(L.shift_count[i], sh > 0 ? sh : -static_cast<int64_t>(sh));
    fill(L.shift_half[i], sh > 0 && sh <= 32 ? static_cast<int32_t>(uint32_t{1} << (sh - 1)) : 0);  // u32 bits
  }
}

#if QGRU_FAST_HAVE_AVX512

#define QGRU_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi")))

namespace {

// acc += Σ_{i<4} u8(a)·s8(w) per int32 lane (vpdpbusd), written as one instruction of inline assembly.
// Why not _mm512_dpbusd_epi32: with an array of accumulators GCC 12 allocates the intrinsic's tied
// accumulator badly: in vnni_block<4, 1> it copied every accumulator to another register and back, and spilled
// one, on each k4 (32 moves per 16 vpdpbusd), and the 4 x 64-channel tile ran at 76% of the vpdpbusd peak
// (178 of 234 G MAC/s, M = 32, 768 x 256, hot). With the "+v" operand the accumulators stay in their registers
// and the same tile runs at 99%. The loops over a tile carry `#pragma GCC unroll`: unrolled that early, every
// accumulator becomes a register of its own (without the pragmas GCC kept the array on the stack). The
// arithmetic is the instruction's: the same sums as the intrinsic (the executor tests compare every code).
QGRU_AVX512 inline __m512i dpbusd(__m512i acc, __m512i a, __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(w));
  return acc;
}

// ---- GEMM ---------------------------------------------------------------------------------------------

// MR rows of A against NG groups of 64 channels (4 blocks of 16 each). acc[m][nb] lane r is the int32
// Σ_k A[m, k]·W[64 g0 + 16 nb + r, k] over k in [4·k4_begin, 4·k4_end) (exact: see fast_kernels.h); of the
// 64·NG channels, those in [lo, hi) are stored: C = acc - bias_rowsum, or with `accumulate` C += acc (the
// caller subtracted the bias with an earlier part of the same sum). Each group is read as one sequential
// stream (256 bytes per k4).
template <int MR, int NG>
QGRU_AVX512 void vnni_block(const uint8_t* A, size_t lda, const int8_t* Bp, int K4, const int32_t* bias_rowsum,
                            int32_t* C, size_t ldc, int lo, int hi, int k4_begin, int k4_end, bool accumulate) {
  constexpr int NB = 4 * NG;
  __m512i acc[MR][NB];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int nb = 0; nb < NB; ++nb) acc[m][nb] = _mm512_setzero_si512();
  }
  const size_t group_bytes = static_cast<size_t>(K4) * 256;
  for (int k4 = k4_begin; k4 < k4_end; ++k4) {
    __m512i w[NB];
#pragma GCC unroll 16
    for (int nb = 0; nb < NB; ++nb) {
      w[nb] = _mm512_loadu_si512(Bp + (nb / 4) * group_bytes + static_cast<size_t>(k4) * 256 + (nb % 4) * 64);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      int32_t four;  // four consecutive u8 activations of row m
      std::memcpy(&four, A + m * lda + static_cast<size_t>(k4) * 4, 4);
      const __m512i a = _mm512_set1_epi32(four);
#pragma GCC unroll 16
      for (int nb = 0; nb < NB; ++nb) acc[m][nb] = dpbusd(acc[m][nb], a, w[nb]);
    }
  }
#pragma GCC unroll 16
  for (int nb = 0; nb < NB; ++nb) {
    const __m512i bias = _mm512_loadu_si512(bias_rowsum + 16 * nb);  // a_bias·Σ_k W[c, k], int32
    const int first = std::max(0, lo - 16 * nb);   // lanes [first, last) are inside [lo, hi)
    const int last = std::min(16, hi - 16 * nb);
    if (first >= last) continue;
    const __mmask16 mask = static_cast<__mmask16>(((1u << last) - 1u) & ~((1u << first) - 1u));
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      int32_t* c = C + m * ldc + 16 * nb;
      // the earlier part + this one (int32 addition is exact modulo 2^32, and the whole sum fits int32), or
      // Σ (x + a_bias)·w - a_bias·Σ w = Σ x·w, int32 (|.| <= 2^30)
      if (mask == 0xFFFF) {  // a whole block: plain load and store (the cell's loads read it by store forwarding)
        const __m512i v = accumulate ? _mm512_add_epi32(_mm512_loadu_si512(c), acc[m][nb]) : _mm512_sub_epi32(acc[m][nb], bias);
        _mm512_storeu_si512(c, v);
      } else if (accumulate) {
        _mm512_mask_storeu_epi32(c, mask, _mm512_add_epi32(_mm512_maskz_loadu_epi32(mask, c), acc[m][nb]));
      } else {
        _mm512_mask_storeu_epi32(c, mask, _mm512_sub_epi32(acc[m][nb], bias));
      }
    }
  }
}

// 16-bit operand codes as two u8 planes (gemm_vnni_s16s8 in fast_kernels.h): MR rows against NG groups,
// two accumulator sets per block, each weight vector read once for both planes. lo lane: Σ lo·w (exact int32),
// hi lane: Σ (hi + 128)·w, exact int32; hi - bias_rowsum = Σ hi·w (exact int32); the row's sum is lo + 256·hi:
// in int32 lanes when OT is int32 (the caller proved the whole sum fits int32, so the wrapping int32 result
// is that sum), else in int64 lanes.
template <int MR, int NG, class OT>
QGRU_AVX512 void vnni2_block(const uint8_t* A_lo, const uint8_t* A_hi, size_t lda, const int8_t* Bp, int K4,
                             const int32_t* bias_rowsum, OT* C, size_t ldc, int lo, int hi) {
  constexpr int NB = 4 * NG;
  __m512i acc_lo[MR][NB], acc_hi[MR][NB];
#pragma GCC unroll 16
  for (int m = 0; m < MR; ++m) {
#pragma GCC unroll 16
    for (int nb = 0; nb < NB; ++nb) acc_lo[m][nb] = acc_hi[m][nb] = _mm512_setzero_si512();
  }
  const size_t group_bytes = static_cast<size_t>(K4) * 256;
  for (int k4 = 0; k4 < K4; ++k4) {
    __m512i w[NB];
#pragma GCC unroll 16
    for (int nb = 0; nb < NB; ++nb) {
      w[nb] = _mm512_loadu_si512(Bp + (nb / 4) * group_bytes + static_cast<size_t>(k4) * 256 + (nb % 4) * 64);
    }
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      int32_t four_lo, four_hi;
      std::memcpy(&four_lo, A_lo + m * lda + static_cast<size_t>(k4) * 4, 4);
      std::memcpy(&four_hi, A_hi + m * lda + static_cast<size_t>(k4) * 4, 4);
      const __m512i a_lo = _mm512_set1_epi32(four_lo), a_hi = _mm512_set1_epi32(four_hi);
#pragma GCC unroll 16
      for (int nb = 0; nb < NB; ++nb) {
        acc_lo[m][nb] = dpbusd(acc_lo[m][nb], a_lo, w[nb]);
        acc_hi[m][nb] = dpbusd(acc_hi[m][nb], a_hi, w[nb]);
      }
    }
  }
#pragma GCC unroll 16
  for (int nb = 0; nb < NB; ++nb) {
    const __m512i bias = _mm512_loadu_si512(bias_rowsum + 16 * nb);  // 128·Σ_k W[c, k], int32
    const int first = std::max(0, lo - 16 * nb);
    const int last = std::min(16, hi - 16 * nb);
    if (first >= last) continue;
    const __mmask16 mask = static_cast<__mmask16>(((1u << last) - 1u) & ~((1u << first) - 1u));
#pragma GCC unroll 16
    for (int m = 0; m < MR; ++m) {
      const __m512i sum_hi = _mm512_sub_epi32(acc_hi[m][nb], bias);  // Σ hi·w, |.| <= 2^30
      OT* c = C + m * ldc + 16 * nb;
      if constexpr (std::is_same_v<OT, int32_t>) {
        _mm512_mask_storeu_epi32(c, mask, _mm512_add_epi32(acc_lo[m][nb], _mm512_slli_epi32(sum_hi, 8)));
      } else {
        for (int half = 0; half < 2; ++half) {
          const __m512i lo64 = _mm512_cvtepi32_epi64(half ? _mm512_extracti64x4_epi64(acc_lo[m][nb], 1) : _mm512_castsi512_si256(acc_lo[m][nb]));
          const __m512i hi64 = _mm512_cvtepi32_epi64(half ? _mm512_extracti64x4_epi64(sum_hi, 1) : _mm512_castsi512_si256(sum_hi));
          const __mmask8 k8 = static_cast<__mmask8>(mask >> (8 * half));
          _mm512_mask_storeu_epi64(c + 8 * half, k8, _mm512_add_epi64(lo64, _mm512_slli_epi64(hi64, 8)));  // exact int64
        }
      }
    }
  }
}

// Rows [0, M) against NG groups starting at Bp: strips of MR rows, then single rows.
template <int MR, int NG>
QGRU_AVX512 void vnni_rows(const uint8_t* A, size_t lda, int M, const int8_t* Bp, int K4, const int32_t* bias_rowsum,
                           int32_t* C, size_t ldc, int lo, int hi) {
  int m = 0;
  for (; m + MR <= M; m += MR) {
    vnni_block<MR, NG>(A + static_cast<size_t>(m) * lda, lda, Bp, K4, bias_rowsum, C + static_cast<size_t>(m) * ldc,
                       ldc, lo, hi, 0, K4, false);
  }
  for (; m < M; ++m) {
    vnni_block<1, NG>(A + static_cast<size_t>(m) * lda, lda, Bp, K4, bias_rowsum, C + static_cast<size_t>(m) * ldc,
                      ldc, lo, hi, 0, K4, false);
  }
}

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

bool avx512_kernels_built() { return true; }


QGRU_AVX512 void gemv_vnni_u8s8_part(const uint8_t* a, const int8_t* Bp, int Kp, const int32_t* bias_rowsum, int c0,
                                     int c1, int32_t* c, bool descending, int k_begin, int k_end, bool accumulate) {
  if (c1 <= c0) return;
  const int K4 = Kp / 4;
  const int k4_begin = k_begin / 4, k4_end = k_end / 4;
  const size_t group_bytes = static_cast<size_t>(K4) * 256;
  const int first = c0 / 64;
  const int groups = (c1 + 63) / 64 - first;
  // Runs of four groups (16 independent accumulators over 256 channels: more loads in flight than two
  // groups' 8), then one run of the 1 to 3 groups left (3: twelve accumulators, so that a short K is not
  // bound by vpdpbusd's latency); `descending` visits the same runs last to first.
  auto one_run = [&](int g, int size) {
    const int8_t* B = Bp + g * group_bytes;
    const int32_t* bias = bias_rowsum + 64 * g;
    int32_t* out = c + 64 * g;
    const int lo = c0 - 64 * g, hi = c1 - 64 * g;
    if (size == 4) {
      vnni_block<1, 4>(a, 0, B, K4, bias, out, 0, lo, hi, k4_begin, k4_end, accumulate);
    } else if (size == 3) {
      vnni_block<1, 3>(a, 0, B, K4, bias, out, 0, lo, hi, k4_begin, k4_end, accumulate);
    } else if (size == 2) {
      vnni_block<1, 2>(a, 0, B, K4, bias, out, 0, lo, hi, k4_begin, k4_end, accumulate);
    } else {
      vnni_block<1, 1>(a, 0, B, K4, bias, out, 0, lo, hi, k4_begin, k4_end, accumulate);
    }
  };
  const int quads = groups / 4;
  const int rest = groups % 4;                 // one run of `rest` groups after the quads
  const int rest_at = first + 4 * quads;
  if (descending) {
    if (rest > 0) one_run(rest_at, rest);
    for (int q = quads - 1; q >= 0; --q) one_run(first + 4 * q, 4);
  } else {
    for (int q = 0; q < quads; ++q) one_run(first + 4 * q, 4);
    if (rest > 0) one_run(rest_at, rest);
  }
}

QGRU_AVX512 void gemv_vnni_u8s8(const uint8_t* a, const int8_t* Bp, int Kp, const int32_t* bias_rowsum, int c0, int c1,
                                int32_t* c, bool descending) {
  gemv_vnni_u8s8_part(a, Bp, Kp, bias_rowsum, c0, c1, c, descending, 0, Kp, false);
}

QGRU_AVX512 void gemm_vnni_u8s8(const uint8_t* A, size_t lda, int M, const int8_t* Bp, int Kp,
                                const int32_t* bias_rowsum, int c0, int c1, int32_t* C, size_t ldc) {
  if (M <= 0 || c1 <= c0) return;
  const int K4 = Kp / 4;
  const int g1 = (c1 + 63) / 64;
  const size_t group_bytes = static_cast<size_t>(K4) * 256;
  int g = c0 / 64;
  // From group g: channels [64 g, ...) are stored when inside [c0, c1).
#define QGRU_VNNI_GROUP(KERNEL, ...) \
  KERNEL<__VA_ARGS__>(A, lda, M, Bp + g * group_bytes, K4, bias_rowsum + 64 * g, C + 64 * g, ldc, c0 - 64 * g, c1 - 64 * g)
  if (M == 1) {
    gemv_vnni_u8s8(A, Bp, Kp, bias_rowsum, c0, c1, C, false);
    return;
  }
  // GEMM: chunks of 64 rows of A (64·Kp bytes, in L1 for Kp <= 512) against every panel of 4 blocks (64
  // channels, streamed from L2 once per chunk), 4 rows x 4 blocks per register tile.
  constexpr int kRowChunk = 64;
  if (M > kRowChunk) {
    for (int m0 = 0; m0 < M; m0 += kRowChunk) {
      gemm_vnni_u8s8(A + static_cast<size_t>(m0) * lda, lda, std::min(kRowChunk, M - m0), Bp, Kp, bias_rowsum, c0, c1,
                     C + static_cast<size_t>(m0) * ldc, ldc);
    }
    return;
  }
  for (; g < g1; ++g) QGRU_VNNI_GROUP(vnni_rows, 4, 1);
#undef QGRU_VNNI_GROUP
}

template <class OT>
QGRU_AVX512 void gemm_vnni_s16s8_impl(const uint8_t* A_lo, const uint8_t* A_hi, size_t lda, int M, const int8_t* Bp, int Kp,
                                      const int32_t* bias_rowsum, int c0, int c1, OT* C, size_t ldc) {
  if (M <= 0 || c1 <= c0) return;
  const int K4 = Kp / 4;
  const size_t group_bytes = static_cast<size_t>(K4) * 256;
  const int g1 = (c1 + 63) / 64;
  int g = c0 / 64;
  if (M == 1) {  // the batch-1 GEMV: two groups (8 blocks, 16 accumulators) per pass
    for (; g + 2 <= g1; g += 2) {
      vnni2_block<1, 2, OT>(A_lo, A_hi, lda, Bp + g * group_bytes, K4, bias_rowsum + 64 * g, C + 64 * g, ldc, c0 - 64 * g, c1 - 64 * g);
    }
    if (g < g1) vnni2_block<1, 1, OT>(A_lo, A_hi, lda, Bp + g * group_bytes, K4, bias_rowsum + 64 * g, C + 64 * g, ldc, c0 - 64 * g, c1 - 64 * g);
    return;
  }
  // Chunks of 64 rows (in L1 for Kp <= 256) against every group, two rows x one group per register tile.
  constexpr int kRowChunk = 64;
  for (int m0 = 0; m0 < M; m0 += kRowChunk) {
    const int m1 = std::min(M, m0 + kRowChunk);
    for (int gg = g; gg < g1; ++gg) {
      const int8_t* B = Bp + gg * group_bytes;
      const int32_t* bias = bias_rowsum + 64 * gg;
      OT* Cg = C + 64 * gg;
      const int lo = c0 - 64 * gg, hi = c1 - 64 * gg;
      int m = m0;
      for (; m + 2 <= m1; m += 2) {
        vnni2_block<2, 1, OT>(A_lo + m * lda, A_hi + m * lda, lda, B, K4, bias, Cg + m * ldc, ldc, lo, hi);
      }
      if (m < m1) vnni2_block<1, 1, OT>(A_lo + m * lda, A_hi + m * lda, lda, B, K4, bias, Cg + m * ldc, ldc, lo, hi);
    }
  }
}

QGRU_AVX512 void gemm_vnni_s16s8(const uint8_t* A_lo, const uint8_t* A_hi, size_t lda, int M, const int8_t* Bp, int Kp,
                                 const int32_t* bias_rowsum, int c0, int c1, int32_t* C, size_t ldc) {
  gemm_vnni_s16s8_impl(A_lo, A_hi, lda, M, Bp, Kp, bias_rowsum, c0, c1, C, ldc);
}
QGRU_AVX512 void gemm_vnni_s16s8(const uint8_t* A_lo, const uint8_t* A_hi, size_t lda, int M, const int8_t* Bp, int Kp,
                                 const int32_t* bias_rowsum, int c0, int c1, int64_t* C, size_t ldc) {
  gemm_vnni_s16s8_impl(A_lo, A_hi, lda, M, Bp, Kp, bias_rowsum, c0, c1, C, ldc);
}

QGRU_AVX512 void int16_to_planes(const int16_t* x16, size_t n, uint8_t* lo, uint8_t* hi) {
  size_t i = 0;
  const __m512i flip = _mm512_set1_epi16(0x80);
  for (; i + 32 <= n; i += 32) {
    const __m512i v = _mm512_loadu_si512(x16 + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo + i), _mm512_cvtepi16_epi8(v));  // the low byte
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + i), _mm512_cvtepi16_epi8(_mm512_xor_si512(_mm512_srai_epi16(v, 8), flip)));
  }
  for (; i < n; ++i) {
    lo[i] = static_cast<uint8_t>(x16[i] & 0xFF);
    hi[i] = static_cast<uint8_t>((x16[i] >> 8) + 128);  // arithmetic shift: in [-128, 127], + 128 in [0, 255]
  }
}

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

#else  // not x86-64: the fast executor never calls these (avx512_kernels_built() is false)

void cell_rows_avx512_i32(const GruCellParamsView&, const CellByteTables&, const Cell32Plan&, const int32_t*,
                          const int32_t*, const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*, const FloatCopy&) {
  std::abort();
}
void cell_rows_avx512_i32_xterms(const GruCellParamsView&, const CellByteTables&, const Cell32Plan&, const int32_t*,
                                 const int32_t*, const int16_t*, int, int, int16_t*, uint8_t*, int32_t, int32_t*, const FloatCopy&) {
  std::abort();
}
void x_terms_avx512_i32(const GruCellParamsView&, const Cell32Plan&, int32_t*, size_t, int, int, int) { std::abort(); }
void gemm_vnni_s16s8(const uint8_t*, const uint8_t*, size_t, int, const int8_t*, int, const int32_t*, int, int, int32_t*, size_t) {
  std::abort();
}
void gemm_vnni_s16s8(const uint8_t*, const uint8_t*, size_t, int, const int8_t*, int, const int32_t*, int, int, int64_t*, size_t) {
  std::abort();
}
void int16_to_planes(const int16_t*, size_t, uint8_t*, uint8_t*) { std::abort(); }
void recurrence_small_avx512_i32(const GruCellParamsView&, const CellByteTables&, const Cell32Plan&, const int8_t*,
                                 const int32_t*, int32_t, const int32_t*, int, bool, const std::atomic<int>*, const int16_t*,
                                 int16_t*, int32_t*, size_t) {
  std::abort();
}

bool avx512_kernels_built() { return false; }


void gemm_vnni_u8s8(const uint8_t*, size_t, int, const int8_t*, int, const int32_t*, int, int, int32_t*, size_t) {
  std::abort();
}
void gemv_vnni_u8s8(const uint8_t*, const int8_t*, int, const int32_t*, int, int, int32_t*, bool) { std::abort(); }
void gemv_vnni_u8s8_part(const uint8_t*, const int8_t*, int, const int32_t*, int, int, int32_t*, bool, int, int, bool) {
  std::abort();
}
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
