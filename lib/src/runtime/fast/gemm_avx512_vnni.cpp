// The avx512-vnni level's GEMMs (contracts in fast_kernels.h): the u8 x s8 VNNI GEMM and GEMV (vpdpbusd) and the
// two-plane GEMM of 16-bit operand codes. Compiled for any x86-64: every function here carries QGRU_AVX512 and is
// only called after the CPU was found to have AVX512F/BW/DQ/VL/VBMI and AVX512-VNNI (fast_plan.cpp,
// cpu_has_avx512_vnni); on other architectures the entry points exist but are never called.
#include "avx512_target.h"
#include "fast_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>

namespace qgru::fast {

#if QGRU_FAST_HAVE_AVX512

namespace {

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

#else  // not x86-64: the fast executor never calls these (avx512_kernels_built() is false)

void gemm_vnni_s16s8(const uint8_t*, const uint8_t*, size_t, int, const int8_t*, int, const int32_t*, int, int, int32_t*, size_t) {
  std::abort();
}
void gemm_vnni_s16s8(const uint8_t*, const uint8_t*, size_t, int, const int8_t*, int, const int32_t*, int, int, int64_t*, size_t) {
  std::abort();
}
void int16_to_planes(const int16_t*, size_t, uint8_t*, uint8_t*) { std::abort(); }
bool avx512_kernels_built() { return false; }
void gemm_vnni_u8s8(const uint8_t*, size_t, int, const int8_t*, int, const int32_t*, int, int, int32_t*, size_t) {
  std::abort();
}
void gemv_vnni_u8s8(const uint8_t*, const int8_t*, int, const int32_t*, int, int, int32_t*, bool) { std::abort(); }
void gemv_vnni_u8s8_part(const uint8_t*, const int8_t*, int, const int32_t*, int, int, int32_t*, bool, int, int, bool) {
  std::abort();
}

#endif

}  // namespace qgru::fast
