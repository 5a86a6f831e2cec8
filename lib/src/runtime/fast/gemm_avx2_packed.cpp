// The AVX2 level's GEMM on the prepacked weight layout (contract in fast_kernels.h, gemm_avx2_packed): int16
// operand codes against int8 weights in pack_vnni_u8s8's layout, with vpmovsxbw + vpmaddwd. Compiled for any
// x86-64: every function here carries __attribute__((target("avx2"))) and is only called after
// __builtin_cpu_supports("avx2") (fast_plan.cpp, choose_isa); on other architectures the entry points exist but are
// never called.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "avx2_target.h"
#include "fast_kernels.h"


namespace qgru::fast {

#if QGRU_FAST_HAVE_AVX2

namespace {

// The 16 weight bytes of four consecutive rows at one k4 (row r: bytes 4r .. 4r + 3, k = 4·k4 .. 4·k4 + 3),
// sign-extended to int16: lanes 4r .. 4r + 3 hold row r.
QGRU_AVX2 inline __m256i weights_4rows(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The four operand codes of one row at k4 (int16), repeated in every 64-bit quarter: madd with
// weights_4rows gives lane 2r + i = a[2i]·w[r, 2i] + a[2i + 1]·w[r, 2i + 1] (i = 0: k 0, 1; i = 1: k 2, 3).
QGRU_AVX2 inline __m256i operand_k4(const int16_t* p) {
  int64_t four;
  std::memcpy(&four, p, 8);
  return _mm256_set1_epi64x(four);
}

// Two accumulators (rows 0 .. 3 and 4 .. 7 of eight channels, two half sums per row) reduced to the eight
// channels' sums in order: hadd gives [c0 c1 c4 c5 | c2 c3 c6 c7], the permute puts the quarters in place.
// Each half sum is a sum over a subset of the channel's terms, so it and the total are exact int32 (the
// caller's bound of Σ |a·w|).
QGRU_AVX2 inline __m256i channels8(__m256i rows0to3, __m256i rows4to7) {
  return _mm256_permute4x64_epi64(_mm256_hadd_epi32(rows0to3, rows4to7), 0xD8);
}

// Eight channel sums stored into c[0 .. 8), only the lanes i in [lo, hi); with `accumulate` added to what is
// there (the earlier part of the same sum: int32 addition exact because the total fits int32).
QGRU_AVX2 inline void store8(int32_t* c, __m256i v, int lo, int hi, bool accumulate) {
  if (lo <= 0 && hi >= 8) {
    if (accumulate) v = _mm256_add_epi32(v, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(c), v);
    return;
  }
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), v);
  for (int i = std::max(0, lo); i < std::min(8, hi); ++i) {
    c[i] = accumulate ? static_cast<int32_t>(static_cast<uint32_t>(c[i]) + static_cast<uint32_t>(lanes[i])) : lanes[i];
  }
}

// The packed weights of the channels from c (a multiple of 4) in pack_vnni_u8s8's layout: group c / 64, at
// (c mod 64)·4 bytes of each 256-byte k4 slab.
inline const int8_t* channel_weights(const int8_t* Bp, int Kp, int c) {
  return Bp + static_cast<size_t>(c / 64) * (static_cast<size_t>(Kp / 4) * 256) + static_cast<size_t>(c % 64) * 4;
}

// The 8-bit kernels' product of one k4 slab for eight channels (w: their 32 weight bytes, all in [-127, 127];
// sign: a row's four codes as int8 in every 32-bit lane; magnitude: the same codes' |a| as u8): w·sign(a) stays
// in [-127, 127] (vpsignb), |a|·(w·sign(a)) = a·w, and a vpmaddubsw pair sum is at most 2·128·127 = 32512 (no
// saturation); vpmaddwd with ones then gives lane r = channel r's four products, exact in int32.
QGRU_AVX2 inline __m256i s8_products(__m256i magnitude, __m256i sign, __m256i w, __m256i ones) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w, sign)), ones);
}

// MR operand rows against the 4·NQ consecutive channels whose weights start at B (NQ quads of 16 bytes in each
// 256-byte k4 slab of one group: the tile lies inside one group of 64 channels). acc[m][q] covers channels
// 4q .. 4q + 3 of the tile (two lanes each). C points at channel 0 of the tile; channels [lo, hi) of it are
// written. NQ even; MR·NQ accumulators, MR operand registers and NQ weight registers stay within the sixteen
// ymm registers.
template <int MR, int NQ>
QGRU_AVX2 void packed_tile(const int16_t* A, size_t lda, const int8_t* B, int k4_begin, int k4_end, int32_t* C, size_t ldc,
                           int lo, int hi, bool accumulate) {
  __m256i acc[MR][NQ];
  for (int m = 0; m < MR; ++m) {
    for (int q = 0; q < NQ; ++q) acc[m][q] = _mm256_setzero_si256();
  }
  for (int k4 = k4_begin; k4 < k4_end; ++k4) {
    const int8_t* slab = B + static_cast<size_t>(k4) * 256;
    __m256i w[NQ];
    for (int q = 0; q < NQ; ++q) w[q] = weights_4rows(slab + 16 * q);
    for (int m = 0; m < MR; ++m) {
      const __m256i a = operand_k4(A + static_cast<size_t>(m) * lda + 4 * static_cast<size_t>(k4));
      // |a·w| <= 2^15·2^7: the madd pair never saturates; the int32 lane sums a subset of one channel's terms
      for (int q = 0; q < NQ; ++q) acc[m][q] = _mm256_add_epi32(acc[m][q], _mm256_madd_epi16(a, w[q]));
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int h = 0; h < NQ / 2; ++h) {
      store8(C + static_cast<size_t>(m) * ldc + 8 * h, channels8(acc[m][2 * h], acc[m][2 * h + 1]), lo - 8 * h, hi - 8 * h,
             accumulate);
    }
  }
}

// One operand row against the 4·NQ channels at B (the GEMV): each weight vector is used once, so it is loaded
// and consumed at once (NQ accumulators, one operand and one weight register).
template <int NQ>
QGRU_AVX2 void gemv_tile(const int16_t* a, const int8_t* B, int k4_begin, int k4_end, int32_t* c, int lo, int hi,
                         bool accumulate) {
  __m256i acc[NQ];
  for (int q = 0; q < NQ; ++q) acc[q] = _mm256_setzero_si256();
  for (int k4 = k4_begin; k4 < k4_end; ++k4) {
    const int8_t* slab = B + static_cast<size_t>(k4) * 256;
    const __m256i a4 = operand_k4(a + 4 * static_cast<size_t>(k4));
    for (int q = 0; q < NQ; ++q) acc[q] = _mm256_add_epi32(acc[q], _mm256_madd_epi16(a4, weights_4rows(slab + 16 * q)));
  }
  for (int h = 0; h < NQ / 2; ++h) store8(c + 8 * h, channels8(acc[2 * h], acc[2 * h + 1]), lo - 8 * h, hi - 8 * h, accumulate);
}

QGRU_AVX2 void packed_impl(const int16_t* A, size_t lda, int M, const int8_t* Bp, int Kp, int c0, int c1, int32_t* C,
                           size_t ldc, int k4_begin, int k4_end, bool accumulate) {
  if (M <= 0 || c1 <= c0) return;
  if (M == 1) {  // the batch-1 GEMV: 32 channels (eight accumulators) per pass over K; rows are padded to 64
    for (int t = c0 / 32; t < (c1 + 31) / 32; ++t) {
      gemv_tile<8>(A, channel_weights(Bp, Kp, 32 * t), k4_begin, k4_end, C + 32 * t, c0 - 32 * t, c1 - 32 * t, accumulate);
    }
    return;
  }
  // GEMM: chunks of operand rows (at most 24 KiB of them, in L1) against every eight channels (2 KiB of weights
  // per 256 k, in L1 while the chunk's rows pass), four rows x eight channels per register tile.
  const int row_chunk = std::max(8, std::min(64, 24576 / (2 * std::max(Kp, 4)) / 4 * 4));
  for (int m0 = 0; m0 < M; m0 += row_chunk) {
    const int m1 = std::min(M, m0 + row_chunk);
    for (int e = c0 / 8; e < (c1 + 7) / 8; ++e) {
      const int8_t* B = channel_weights(Bp, Kp, 8 * e);
      const int lo = c0 - 8 * e, hi = c1 - 8 * e;
      auto at = [&](int row) { return A + static_cast<size_t>(row) * lda; };
      auto out = [&](int row) { return C + static_cast<size_t>(row) * ldc + 8 * e; };
      int m = m0;
      for (; m + 4 <= m1; m += 4) packed_tile<4, 2>(at(m), lda, B, k4_begin, k4_end, out(m), ldc, lo, hi, accumulate);
      switch (m1 - m) {
        case 3: packed_tile<3, 2>(at(m), lda, B, k4_begin, k4_end, out(m), ldc, lo, hi, accumulate); break;
        case 2: packed_tile<2, 2>(at(m), lda, B, k4_begin, k4_end, out(m), ldc, lo, hi, accumulate); break;
        case 1: packed_tile<1, 2>(at(m), lda, B, k4_begin, k4_end, out(m), ldc, lo, hi, accumulate); break;
        default: break;
      }
    }
  }
}

// The GEMV for 8-bit operand codes and weights in [-127, 127] (gemv_avx2_packed_s8 in fast_kernels.h): one pass
// over K per group of 64 channels, eight accumulators of eight channels each.
QGRU_AVX2 void gemv_s8_group(const int16_t* a, const int8_t* G, int k4_begin, int k4_end, int32_t* c, int lo, int hi,
                             bool accumulate) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[8];
  for (auto& v : acc) v = _mm256_setzero_si256();
  for (int k4 = k4_begin; k4 < k4_end; ++k4) {
    // the four codes of k4 as int8 (exact: they lie in [-128, 127]) in every 32-bit lane
    const __m128i a16 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(a + 4 * static_cast<size_t>(k4)));
    const __m256i a4 = _mm256_broadcastd_epi32(_mm_packs_epi16(a16, a16));
    const __m256i magnitude = _mm256_abs_epi8(a4);  // |a| in [0, 128] as u8 (abs(-128) is 0x80 = 128)
    const int8_t* slab = G + static_cast<size_t>(k4) * 256;
    for (int o = 0; o < 8; ++o) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(slab + 32 * o));
      acc[o] = _mm256_add_epi32(acc[o], s8_products(magnitude, a4, w, ones));
    }
  }
  for (int o = 0; o < 8; ++o) store8(c + 8 * o, acc[o], lo - 8 * o, hi - 8 * o, accumulate);
}

// ---- the GEMM for 8-bit operand codes (gemm_avx2_packed_s8_part) ----------------------------------------

// Operand rows [rows, k1 - k0] converted once per row chunk: the codes as int8 (exact: they lie in
// [-128, 127]; vpsignb's sign source) and |a| as u8 (abs(-128) = 0x80 = 128). ld: the buffers' row stride.
QGRU_AVX2 void rows_to_s8(const int16_t* A, size_t lda, int rows, int k0, int k1, int8_t* S, uint8_t* magnitude, size_t ld) {
  for (int r = 0; r < rows; ++r) {
    const int16_t* a = A + static_cast<size_t>(r) * lda;
    int8_t* s = S + static_cast<size_t>(r) * ld;
    uint8_t* m = magnitude + static_cast<size_t>(r) * ld;
    int k = k0;
    for (; k + 16 <= k1; k += 16) {
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + k));
      const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + k + 8));
      const __m128i codes = _mm_packs_epi16(lo, hi);  // no saturation: every code lies in [-128, 127]
      _mm_storeu_si128(reinterpret_cast<__m128i*>(s + (k - k0)), codes);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(m + (k - k0)), _mm_abs_epi8(codes));
    }
    for (; k < k1; ++k) {
      s[k - k0] = static_cast<int8_t>(a[k]);
      m[k - k0] = static_cast<uint8_t>(a[k] < 0 ? -a[k] : a[k]);
    }
  }
}

// MR converted rows against the sixteen channels whose weights start at B (two 32-byte vectors of eight channels
// x four k in each k4 slab), k4 in [k4_begin, k4_begin + nk4); S and magnitude point at the rows' k4_begin.
// Per row and vector s8_products: lane r holds channel r's four products, so acc[m][v] is channel-ordered (no
// horizontal add); MR·2 accumulators, two weight, two operand registers and ones.
template <int MR>
QGRU_AVX2 void s8_tile(const int8_t* S, const uint8_t* magnitude, size_t ld, const int8_t* B, int k4_begin, int nk4,
                       int32_t* C, size_t ldc, int lo, int hi, bool accumulate) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i acc[MR][2];
  for (int m = 0; m < MR; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_si256();
  for (int i = 0; i < nk4; ++i) {
    const int8_t* slab = B + static_cast<size_t>(k4_begin + i) * 256;
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(slab));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(slab + 32));
    for (int m = 0; m < MR; ++m) {
      int32_t s4, m4;
      std::memcpy(&s4, S + static_cast<size_t>(m) * ld + 4 * static_cast<size_t>(i), 4);
      std::memcpy(&m4, magnitude + static_cast<size_t>(m) * ld + 4 * static_cast<size_t>(i), 4);
      const __m256i sign = _mm256_set1_epi32(s4), mag = _mm256_set1_epi32(m4);
      acc[m][0] = _mm256_add_epi32(acc[m][0], s8_products(mag, sign, w0, ones));
      acc[m][1] = _mm256_add_epi32(acc[m][1], s8_products(mag, sign, w1, ones));
    }
  }
  for (int m = 0; m < MR; ++m) {
    store8(C + static_cast<size_t>(m) * ldc, acc[m][0], lo, hi, accumulate);
    store8(C + static_cast<size_t>(m) * ldc + 8, acc[m][1], lo - 8, hi - 8, accumulate);
  }
}

// Operand bytes per converted plane (16 KiB each on the stack): a chunk holds at least four rows of up to 4096 k.
constexpr int kS8PlaneBytes = 16384;
constexpr int kS8MaxSpan = kS8PlaneBytes / 4;

// k in [k0, k1), k1 - k0 <= kS8MaxSpan, multiples of 4.
QGRU_AVX2 void s8_impl(const int16_t* A, size_t lda, int M, const int8_t* Bp, int Kp, int c0, int c1, int32_t* C, size_t ldc,
                       int k0, int k1, bool accumulate) {
  alignas(32) int8_t S[kS8PlaneBytes];
  alignas(32) uint8_t magnitude[kS8PlaneBytes];
  const int span = k1 - k0;
  const size_t ld = static_cast<size_t>(span);
  const int row_chunk = std::max(4, std::min(64, kS8PlaneBytes / std::max(span, 4) / 4 * 4));
  for (int m0 = 0; m0 < M; m0 += row_chunk) {
    const int m1 = std::min(M, m0 + row_chunk);
    rows_to_s8(A + static_cast<size_t>(m0) * lda, lda, m1 - m0, k0, k1, S, magnitude, ld);
    for (int e = c0 / 16; e < (c1 + 15) / 16; ++e) {  // sixteen channels inside one group of 64
      const int8_t* B = channel_weights(Bp, Kp, 16 * e);
      const int lo = c0 - 16 * e, hi = c1 - 16 * e;
      auto rows_at = [&](int m) { return static_cast<size_t>(m - m0) * ld; };
      auto out = [&](int m) { return C + static_cast<size_t>(m) * ldc + 16 * e; };
      int m = m0;
      for (; m + 4 <= m1; m += 4) s8_tile<4>(S + rows_at(m), magnitude + rows_at(m), ld, B, k0 / 4, span / 4, out(m), ldc, lo, hi, accumulate);
      switch (m1 - m) {
        case 3: s8_tile<3>(S + rows_at(m), magnitude + rows_at(m), ld, B, k0 / 4, span / 4, out(m), ldc, lo, hi, accumulate); break;
        case 2: s8_tile<2>(S + rows_at(m), magnitude + rows_at(m), ld, B, k0 / 4, span / 4, out(m), ldc, lo, hi, accumulate); break;
        case 1: s8_tile<1>(S + rows_at(m), magnitude + rows_at(m), ld, B, k0 / 4, span / 4, out(m), ldc, lo, hi, accumulate); break;
        default: break;
      }
    }
  }
}

}  // namespace

QGRU_AVX2 void gemm_avx2_packed_s8_part(const int16_t* A, size_t lda, int M, const int8_t* Bp, int Kp, int c0, int c1,
                                        int32_t* C, size_t ldc, int k_begin, int k_end, bool accumulate) {
  if (M <= 0 || c1 <= c0) return;
  if (M == 1) return gemv_avx2_packed_s8(A, Bp, Kp, c0, c1, C, k_begin, k_end, accumulate);
  if (k_end <= k_begin) return packed_impl(A, lda, M, Bp, Kp, c0, c1, C, ldc, k_begin / 4, k_end / 4, accumulate);  // zeros
  // spans of at most kS8MaxSpan k: the first stored or added as asked, the others added (exact: every partial
  // sum is a sum over a subset of the terms, within the caller's bound)
  for (int k0 = k_begin; k0 < k_end; k0 += kS8MaxSpan) {
    s8_impl(A, lda, M, Bp, Kp, c0, c1, C, ldc, k0, std::min(k_end, k0 + kS8MaxSpan), k0 == k_begin ? accumulate : true);
  }
}

QGRU_AVX2 void gemm_avx2_packed(const int16_t* A, size_t lda, int M, const int8_t* Bp, int Kp, int c0, int c1, int32_t* C,
                                size_t ldc) {
  packed_impl(A, lda, M, Bp, Kp, c0, c1, C, ldc, 0, Kp / 4, false);
}

QGRU_AVX2 void gemm_avx2_packed_part(const int16_t* A, size_t lda, int M, const int8_t* Bp, int Kp, int c0, int c1,
                                     int32_t* C, size_t ldc, int k_begin, int k_end, bool accumulate) {
  packed_impl(A, lda, M, Bp, Kp, c0, c1, C, ldc, k_begin / 4, k_end / 4, accumulate);
}

QGRU_AVX2 void gemv_avx2_packed_s8(const int16_t* a, const int8_t* Bp, int Kp, int c0, int c1, int32_t* c, int k_begin,
                                   int k_end, bool accumulate) {
  if (c1 <= c0) return;
  for (int g = c0 / 64; g < (c1 + 63) / 64; ++g) {
    gemv_s8_group(a, channel_weights(Bp, Kp, 64 * g), k_begin / 4, k_end / 4, c + 64 * g, c0 - 64 * g, c1 - 64 * g,
                  accumulate);
  }
}

#else  // not x86-64: the fast executor never calls these (avx2_kernels_built() is false)

void gemm_avx2_packed(const int16_t*, size_t, int, const int8_t*, int, int, int, int32_t*, size_t) { std::abort(); }
void gemm_avx2_packed_part(const int16_t*, size_t, int, const int8_t*, int, int, int, int32_t*, size_t, int, int, bool) {
  std::abort();
}
void gemv_avx2_packed_s8(const int16_t*, const int8_t*, int, int, int, int32_t*, int, int, bool) { std::abort(); }
void gemm_avx2_packed_s8_part(const int16_t*, size_t, int, const int8_t*, int, int, int, int32_t*, size_t, int, int, bool) {
  std::abort();
}

#endif

}  // namespace qgru::fast
