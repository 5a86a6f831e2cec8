// AVX2 integer GEMM kernels of the fast executor (contract in fast_kernels.h). Compiled for any x86-64:
// every function here carries __attribute__((target("avx2"))) and is only called after
// __builtin_cpu_supports("avx2") (fast_executor.cpp); on other architectures the entry points exist but
// are never called.
#include "avx2_target.h"
#include "fast_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>


namespace qgru::fast {

#if QGRU_FAST_HAVE_AVX2

namespace {

// 16 weight codes sign-extended to int16 lanes.
QGRU_AVX2 inline __m256i load16(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
QGRU_AVX2 inline __m256i load16(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// The eight int32 lanes of v widened to int64 and added into the four int64 lanes of acc64.
QGRU_AVX2 inline __m256i widen_add(__m256i acc64, __m256i v) {
  const __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(v));
  const __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(v, 1));
  return _mm256_add_epi64(acc64, _mm256_add_epi64(lo, hi));
}

// Σ of four int64 lanes.
QGRU_AVX2 inline int64_t hsum64(__m256i v) {
  const __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1);
}

// One MR x NR block of C: MR rows of A against NR rows of B.
template <int MR, int NR, class WT, class OT>
QGRU_AVX2 void block(const int16_t* A, size_t lda, const WT* B, size_t ldb, int Kp, int chunk_vecs, OT* C,
                     size_t ldc) {
  __m256i sum[MR][NR];  // int64 lanes
  for (int m = 0; m < MR; ++m) {
    for (int n = 0; n < NR; ++n) sum[m][n] = _mm256_setzero_si256();
  }
  const int nvec = Kp / 16;
  for (int v0 = 0; v0 < nvec; v0 += chunk_vecs) {
    const int v1 = std::min(nvec, v0 + chunk_vecs);  // chunk_vecs madd results per lane fit int32
    __m256i acc[MR][NR];
    for (int m = 0; m < MR; ++m) {
      for (int n = 0; n < NR; ++n) acc[m][n] = _mm256_setzero_si256();
    }
    for (int v = v0; v < v1; ++v) {
      const size_t k = static_cast<size_t>(v) * 16;
      __m256i a[MR];
      for (int m = 0; m < MR; ++m) a[m] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(A + m * lda + k));
      for (int n = 0; n < NR; ++n) {
        const __m256i w = load16(B + n * ldb + k);
        for (int m = 0; m < MR; ++m) acc[m][n] = _mm256_add_epi32(acc[m][n], _mm256_madd_epi16(a[m], w));
      }
    }
    for (int m = 0; m < MR; ++m) {
      for (int n = 0; n < NR; ++n) sum[m][n] = widen_add(sum[m][n], acc[m][n]);
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int n = 0; n < NR; ++n) C[m * ldc + n] = static_cast<OT>(hsum64(sum[m][n]));
  }
}

// A row strip of MR rows against channels [0, Nc): blocks of NR channels, then the tail one by one.
template <int MR, int NR, class WT, class OT>
QGRU_AVX2 void strip(const int16_t* A, size_t lda, const WT* B, size_t ldb, int Nc, int Kp, int chunk_vecs, OT* C,
                     size_t ldc) {
  int c = 0;
  for (; c + NR <= Nc; c += NR) {
    block<MR, NR>(A, lda, B + static_cast<size_t>(c) * ldb, ldb, Kp, chunk_vecs, C + c, ldc);
  }
  for (; c < Nc; ++c) block<MR, 1>(A, lda, B + static_cast<size_t>(c) * ldb, ldb, Kp, chunk_vecs, C + c, ldc);
}

template <class WT, class OT>
QGRU_AVX2 void gemm_impl(const int16_t* A, size_t lda, int M, const WT* B, size_t ldb, int Nc, int Kp,
                         int chunk_vecs, OT* C, size_t ldc) {
  if (M <= 0 || Nc <= 0) return;
  if (Kp <= 0) {
    for (int m = 0; m < M; ++m) {
      for (int c = 0; c < Nc; ++c) C[static_cast<size_t>(m) * ldc + c] = 0;
    }
    return;
  }
  // Cache blocking: a panel of kChannelBlock weight rows stays in L1/L2 while kRowBlock rows of A stream by.
  constexpr int kChannelBlock = 48;
  constexpr int kRowBlock = 64;
  for (int c0 = 0; c0 < Nc; c0 += kChannelBlock) {
    const int nc = std::min(kChannelBlock, Nc - c0);
    const WT* Bp = B + static_cast<size_t>(c0) * ldb;
    for (int m0 = 0; m0 < M; m0 += kRowBlock) {
      const int m1 = std::min(M, m0 + kRowBlock);
      int m = m0;
      if (M == 1) {  // GEMV (batch-1 recurrence): one row, eight channels at a time
        strip<1, 8>(A, lda, Bp, ldb, nc, Kp, chunk_vecs, C + c0, ldc);
        continue;
      }
      for (; m + 2 <= m1; m += 2) {
        strip<2, 4>(A + static_cast<size_t>(m) * lda, lda, Bp, ldb, nc, Kp, chunk_vecs,
                    C + static_cast<size_t>(m) * ldc + c0, ldc);
      }
      for (; m < m1; ++m) {
        strip<1, 8>(A + static_cast<size_t>(m) * lda, lda, Bp, ldb, nc, Kp, chunk_vecs,
                    C + static_cast<size_t>(m) * ldc + c0, ldc);
      }
    }
  }
}

}  // namespace

bool avx2_kernels_built() { return true; }

namespace {
// Four floats quantized (contract of quantize_f32_avx2 in fast_kernels.h).
struct QuantizeConsts {
  __m256d scale, half, one, sign_bit, lo, hi, z;
};
QGRU_AVX2 inline __m128i quantize4(__m128 x, const QuantizeConsts& c) {
  const __m256d v = _mm256_mul_pd(_mm256_cvtps_pd(x), c.scale);                   // x·2^shift, exact
  const __m256d t = _mm256_round_pd(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);   // trunc(v)
  const __m256d frac = _mm256_andnot_pd(c.sign_bit, _mm256_sub_pd(v, t));        // |v - t|, exact
  const __m256d away = _mm256_and_pd(_mm256_cmp_pd(frac, c.half, _CMP_GE_OQ),
                                     _mm256_or_pd(c.one, _mm256_and_pd(v, c.sign_bit)));  // ±1 on >= 0.5
  __m256d r = _mm256_add_pd(_mm256_add_pd(t, away), c.z);                         // round(v) + zp
  r = _mm256_min_pd(_mm256_max_pd(r, c.lo), c.hi);                                 // ±inf saturate too
  r = _mm256_blendv_pd(r, c.z, _mm256_cmp_pd(v, v, _CMP_UNORD_Q));                // NaN -> zp
  return _mm256_cvttpd_epi32(r);                                                    // integral: exact
}
// Eight floats quantized in float arithmetic (see quantize_f32_avx2 for why it is exact).
struct QuantizeConstsF {
  __m256 scale, half, one, sign_bit, lo, hi, z;
};
QGRU_AVX2 inline __m256i quantize8(__m256 x, const QuantizeConstsF& c) {
  const __m256 v = _mm256_mul_ps(x, c.scale);                                      // x·2^shift (exact or < 2^-126 or ±inf)
  const __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);    // trunc(v), exact
  const __m256 frac = _mm256_andnot_ps(c.sign_bit, _mm256_sub_ps(v, t));         // |v - t|, exact
  const __m256 away = _mm256_and_ps(_mm256_cmp_ps(frac, c.half, _CMP_GE_OQ),
                                    _mm256_or_ps(c.one, _mm256_and_ps(v, c.sign_bit)));  // ±1 on >= 0.5
  __m256 r = _mm256_add_ps(_mm256_add_ps(t, away), c.z);                          // round(v) + zp (see below)
  r = _mm256_min_ps(_mm256_max_ps(r, c.lo), c.hi);                                 // ±inf saturate too
  r = _mm256_blendv_ps(r, c.z, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));                // NaN -> zp
  return _mm256_cvttps_epi32(r);                                                    // integral in ±2^20: exact
}
}  // namespace

QGRU_AVX2 void quantize_f32_avx2(const float* x, size_t n, int shift, int32_t zp, int32_t q_min, int32_t q_max,
                                 int32_t* q) {
  constexpr int32_t kFloatExact = 1 << 20;
  size_t i = 0;
  if (q_min >= -kFloatExact && q_max <= kFloatExact && zp >= -kFloatExact && zp <= kFloatExact) {
    const QuantizeConstsF f{_mm256_set1_ps(std::ldexp(1.0f, shift)), _mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f),
                            _mm256_set1_ps(-0.0f), _mm256_set1_ps(static_cast<float>(q_min)),
                            _mm256_set1_ps(static_cast<float>(q_max)), _mm256_set1_ps(static_cast<float>(zp))};
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), quantize8(_mm256_loadu_ps(x + i), f));
    }
  }
  const QuantizeConsts c{_mm256_set1_pd(std::ldexp(1.0, shift)), _mm256_set1_pd(0.5), _mm256_set1_pd(1.0),
                         _mm256_set1_pd(-0.0), _mm256_set1_pd(q_min), _mm256_set1_pd(q_max), _mm256_set1_pd(zp)};
  for (; i + 4 <= n; i += 4) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + i), quantize4(_mm_loadu_ps(x + i), c));
  }
  if (i < n) {
    float in[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    alignas(16) int32_t out[4];
    for (size_t k = i; k < n; ++k) in[k - i] = x[k];
    _mm_store_si128(reinterpret_cast<__m128i*>(out), quantize4(_mm_loadu_ps(in), c));
    for (size_t k = i; k < n; ++k) q[k] = out[k - i];
  }
}

QGRU_AVX2 void quantize_f32_to_u8_rows_avx2(const float* x, size_t rows, int C, int Kp, int shift, int32_t zp,
                                            int32_t q_min, int32_t q_max, int32_t a_bias, uint8_t* u8) {
  const QuantizeConstsF f{_mm256_set1_ps(std::ldexp(1.0f, shift)), _mm256_set1_ps(0.5f), _mm256_set1_ps(1.0f),
                          _mm256_set1_ps(-0.0f), _mm256_set1_ps(static_cast<float>(q_min)),
                          _mm256_set1_ps(static_cast<float>(q_max)), _mm256_set1_ps(static_cast<float>(zp))};
  const __m256i bias = _mm256_set1_epi16(static_cast<int16_t>(a_bias));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undo packs' and packus' 128-bit interleave
  for (size_t r = 0; r < rows; ++r) {
    const float* src = x + r * static_cast<size_t>(C);
    uint8_t* dst = u8 + r * static_cast<size_t>(Kp);
    int k = 0;
    for (; k + 32 <= C; k += 32) {
      // codes in [q_min, q_max] within int16: packs is exact; + a_bias in [0, 255]: packus is exact
      const __m256i ab = _mm256_packs_epi32(quantize8(_mm256_loadu_ps(src + k), f), quantize8(_mm256_loadu_ps(src + k + 8), f));
      const __m256i cd = _mm256_packs_epi32(quantize8(_mm256_loadu_ps(src + k + 16), f), quantize8(_mm256_loadu_ps(src + k + 24), f));
      const __m256i bytes = _mm256_packus_epi16(_mm256_add_epi16(ab, bias), _mm256_add_epi16(cd, bias));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), _mm256_permutevar8x32_epi32(bytes, order));
    }
    for (; k < C; k += 8) {  // the last up to 31 codes, eight at a time from a zero-padded copy
      float in[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
      const int n = C - k < 8 ? C - k : 8;
      for (int i = 0; i < n; ++i) in[i] = src[k + i];
      alignas(32) int32_t out[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(out), quantize8(_mm256_loadu_ps(in), f));
      for (int i = 0; i < n; ++i) dst[k + i] = static_cast<uint8_t>(out[i] + a_bias);
    }
    for (k = C; k < Kp; ++k) dst[k] = static_cast<uint8_t>(a_bias);
  }
}

QGRU_AVX2 bool codes_to_int16_checked(const int32_t* q, size_t rows, int C, int Kp, int32_t q_min, int32_t q_max,
                                      int16_t* x16) {
  const __m256i lo = _mm256_set1_epi32(q_min), hi = _mm256_set1_epi32(q_max);
  __m256i bad = _mm256_setzero_si256();  // lanes that saw a code outside [q_min, q_max]
  bool ok = true;
  for (size_t r = 0; r < rows; ++r) {
    const int32_t* src = q + r * static_cast<size_t>(C);
    int16_t* dst = x16 + r * static_cast<size_t>(Kp);
    int k = 0;
    for (; k + 16 <= C; k += 16) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k + 8));
      bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi32(lo, a), _mm256_cmpgt_epi32(a, hi)));
      bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi32(lo, b), _mm256_cmpgt_epi32(b, hi)));
      // packs saturates, but every code here lies in [q_min, q_max] within int16 (else `bad` is set and the
      // result is discarded): exact; packs interleaves 128-bit halves, the permute restores the order
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packs_epi32(a, b), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), packed);
    }
    for (; k < C; ++k) {
      ok = ok && src[k] >= q_min && src[k] <= q_max;
      dst[k] = static_cast<int16_t>(src[k]);
    }
    for (; k < Kp; ++k) dst[k] = 0;
  }
  return ok && _mm256_testz_si256(bad, bad);
}

QGRU_AVX2 bool codes_to_u8_rows_checked(const int32_t* q, size_t rows, int C, int Kp, int32_t q_min, int32_t q_max,
                                        int32_t a_bias, uint8_t* u8) {
  const __m256i lo = _mm256_set1_epi32(q_min), hi = _mm256_set1_epi32(q_max), bias = _mm256_set1_epi32(a_bias);
  // packs then packus interleave 32-bit groups of the four inputs across the 128-bit halves: this restores the order
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i bad = _mm256_setzero_si256();  // lanes that saw a code outside [q_min, q_max]
  bool ok = true;
  for (size_t r = 0; r < rows; ++r) {
    const int32_t* src = q + r * static_cast<size_t>(C);
    uint8_t* dst = u8 + r * static_cast<size_t>(Kp);
    int k = 0;
    for (; k + 32 <= C; k += 32) {
      __m256i v[4];
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + k + 8 * i));
        bad = _mm256_or_si256(bad, _mm256_or_si256(_mm256_cmpgt_epi32(lo, v[i]), _mm256_cmpgt_epi32(v[i], hi)));
        v[i] = _mm256_add_epi32(v[i], bias);  // in [0, 255] for every accepted code: packs and packus keep it
      }
      const __m256i bytes = _mm256_packus_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + k), _mm256_permutevar8x32_epi32(bytes, order));
    }
    for (; k < C; ++k) {
      ok = ok && src[k] >= q_min && src[k] <= q_max;
      dst[k] = static_cast<uint8_t>(src[k] + a_bias);
    }
    for (; k < Kp; ++k) dst[k] = static_cast<uint8_t>(a_bias);
  }
  return ok && _mm256_testz_si256(bad, bad);
}

QGRU_AVX2 void int16_to_u8_biased(const int16_t* x16, size_t n, int32_t a_bias, uint8_t* u8) {
  const __m256i bias = _mm256_set1_epi16(static_cast<int16_t>(a_bias));
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // codes + a_bias lie in [0, 255] (the caller's contract): the int16 sums are exact and packus keeps them
    const __m256i a = _mm256_add_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x16 + i)), bias);
    const __m256i b = _mm256_add_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x16 + i + 16)), bias);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(u8 + i), _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), 0xD8));
  }
  for (; i < n; ++i) u8[i] = static_cast<uint8_t>(x16[i] + a_bias);
}

QGRU_AVX2 void gemm_avx2(const int16_t* A, size_t lda, int M, const int8_t* B, size_t ldb, int Nc, int Kp,
                         int chunk_vecs, int32_t* C, size_t ldc) {
  gemm_impl(A, lda, M, B, ldb, Nc, Kp, chunk_vecs, C, ldc);
}
QGRU_AVX2 void gemm_avx2(const int16_t* A, size_t lda, int M, const int8_t* B, size_t ldb, int Nc, int Kp,
                         int chunk_vecs, int64_t* C, size_t ldc) {
  gemm_impl(A, lda, M, B, ldb, Nc, Kp, chunk_vecs, C, ldc);
}
QGRU_AVX2 void gemm_avx2(const int16_t* A, size_t lda, int M, const int16_t* B, size_t ldb, int Nc, int Kp,
                         int chunk_vecs, int32_t* C, size_t ldc) {
  gemm_impl(A, lda, M, B, ldb, Nc, Kp, chunk_vecs, C, ldc);
}
QGRU_AVX2 void gemm_avx2(const int16_t* A, size_t lda, int M, const int16_t* B, size_t ldb, int Nc, int Kp,
                         int chunk_vecs, int64_t* C, size_t ldc) {
  gemm_impl(A, lda, M, B, ldb, Nc, Kp, chunk_vecs, C, ldc);
}

#else  // not x86-64: the fast executor never calls these (avx2_kernels_built() is false)

bool avx2_kernels_built() { return false; }

void quantize_f32_avx2(const float*, size_t, int, int32_t, int32_t, int32_t, int32_t*) { std::abort(); }
void quantize_f32_to_u8_rows_avx2(const float*, size_t, int, int, int, int32_t, int32_t, int32_t, int32_t, uint8_t*) {
  std::abort();
}
bool codes_to_int16_checked(const int32_t*, size_t, int, int, int32_t, int32_t, int16_t*) { std::abort(); }
bool codes_to_u8_rows_checked(const int32_t*, size_t, int, int, int32_t, int32_t, int32_t, uint8_t*) { std::abort(); }
void int16_to_u8_biased(const int16_t*, size_t, int32_t, uint8_t*) { std::abort(); }

void gemm_avx2(const int16_t*, size_t, int, const int8_t*, size_t, int, int, int, int32_t*, size_t) { std::abort(); }
void gemm_avx2(const int16_t*, size_t, int, const int8_t*, size_t, int, int, int, int64_t*, size_t) { std::abort(); }
void gemm_avx2(const int16_t*, size_t, int, const int16_t*, size_t, int, int, int, int32_t*, size_t) { std::abort(); }
void gemm_avx2(const int16_t*, size_t, int, const int16_t*, size_t, int, int, int, int64_t*, size_t) { std::abort(); }

#endif

}  // namespace qgru::fast
