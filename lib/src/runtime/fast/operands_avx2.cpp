// The AVX2 operand conversions of the fast executor (contracts in fast_kernels.h): floats quantized into codes or
// straight into the VNNI operand bytes, int32 codes range-checked into int16 or u8 operand rows. Compiled for any
// x86-64: every function here carries __attribute__((target("avx2"))) and is only called after
// __builtin_cpu_supports("avx2") (fast_plan.cpp, quantize_input.cpp); on other architectures the entry points
// exist but are never called.
#include "avx2_target.h"
#include "fast_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace qgru::fast {

#if QGRU_FAST_HAVE_AVX2

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

#else  // not x86-64: the fast executor never calls these (avx2_kernels_built() is false)

void quantize_f32_avx2(const float*, size_t, int, int32_t, int32_t, int32_t, int32_t*) { std::abort(); }
void quantize_f32_to_u8_rows_avx2(const float*, size_t, int, int, int, int32_t, int32_t, int32_t, int32_t, uint8_t*) {
  std::abort();
}
bool codes_to_int16_checked(const int32_t*, size_t, int, int, int32_t, int32_t, int16_t*) { std::abort(); }
bool codes_to_u8_rows_checked(const int32_t*, size_t, int, int, int32_t, int32_t, int32_t, uint8_t*) { std::abort(); }
void int16_to_u8_biased(const int16_t*, size_t, int32_t, uint8_t*) { std::abort(); }

#endif

}  // namespace qgru::fast
