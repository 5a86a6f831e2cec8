#pragma once
// Private to the fast executor (qgru/quant/fast_executor.h): the integer GEMM kernels.
//
// gemm(A, lda, M, B, ldb, Nc, Kp, chunk_vecs, C, ldc):
//   C[m * ldc + c] = Σ_{k < Kp} A[m * lda + k] * B[c * ldb + k]      for m < M, c < Nc
// A: [M, lda] int16 codes (x or h), B: [Nc, ldb] int8 or int16 weight codes (rows of W or R), both
// zero-padded so that Kp (a multiple of 16) elements per row may be read. C: int32 or int64; C's rows may
// be strided (ldc >= Nc); nothing outside the M x Nc block is written.
// Exactness: products via _mm256_madd_epi16; the caller guarantees that one madd lane (two products)
// fits int32 and that `chunk_vecs` 16-element vectors of madd results fit one int32 lane; the kernel
// widens each lane to int64 after every chunk, so the int64 total is the exact integer sum. Storing into
// an int32 C is valid only when the caller proved the whole sum fits int32.
#include <cstddef>
#include <cstdint>

namespace qgru::fast {

// True when the AVX2 kernels were compiled in (x86-64 with GCC or Clang).
bool avx2_kernels_built();

void gemm_avx2(const int16_t* A, size_t lda, int M, const int8_t* B, size_t ldb, int Nc, int Kp, int chunk_vecs,
               int32_t* C, size_t ldc);
void gemm_avx2(const int16_t* A, size_t lda, int M, const int8_t* B, size_t ldb, int Nc, int Kp, int chunk_vecs,
               int64_t* C, size_t ldc);
void gemm_avx2(const int16_t* A, size_t lda, int M, const int16_t* B, size_t ldb, int Nc, int Kp, int chunk_vecs,
               int32_t* C, size_t ldc);
void gemm_avx2(const int16_t* A, size_t lda, int M, const int16_t* B, size_t ldb, int Nc, int Kp, int chunk_vecs,
               int64_t* C, size_t ldc);

}  // namespace qgru::fast
