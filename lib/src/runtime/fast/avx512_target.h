#pragma once
// The AVX-512 kernels' build switch (private to the fast executor): QGRU_FAST_HAVE_AVX512 is 1 on x86-64 with GCC or
// Clang, where the kernels (gemm_avx512_vnni.cpp, cell_avx512_i64.cpp, cell_avx512_i32.cpp) are compiled with
// QGRU_AVX512 (a per-function target attribute, so the rest of the build needs no -mavx512*) and are called only
// after cpu_has_avx512_vnni() (fast_plan.cpp, choose_isa); elsewhere the entry points abort and are never called
// (avx512_kernels_built() is false).
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

#if QGRU_FAST_HAVE_AVX512

#define QGRU_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx512vbmi")))

namespace qgru::fast {

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

}  // namespace qgru::fast

#endif
