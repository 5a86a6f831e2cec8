// AVX2 integer GEMM kernels of the fast executor (contract in fast_kernels.h). Compiled for any x86-64:
// every function here carries __attribute__((target("avx2"))) and is only called after
// __builtin_cpu_supports("avx2") (fast_plan.cpp, choose_isa); on other architectures the entry points exist but
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

void gemm_avx2(const int16_t*, size_t, int, const int8_t*, size_t, int, int, int, int32_t*, size_t) { std::abort(); }
void gemm_avx2(const int16_t*, size_t, int, const int8_t*, size_t, int, int, int, int64_t*, size_t) { std::abort(); }
void gemm_avx2(const int16_t*, size_t, int, const int16_t*, size_t, int, int, int, int32_t*, size_t) { std::abort(); }
void gemm_avx2(const int16_t*, size_t, int, const int16_t*, size_t, int, int, int, int64_t*, size_t) { std::abort(); }

#endif

}  // namespace qgru::fast
