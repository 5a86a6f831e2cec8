#pragma once
// The AVX2 kernels' build switch: QGRU_FAST_HAVE_AVX2 is 1 on x86-64 with GCC or Clang, where the kernels are
// compiled with QGRU_AVX2 (a per-function target attribute, so the rest of the build needs no -mavx2) and are
// called only after __builtin_cpu_supports("avx2") (fast_plan.cpp, choose_isa); elsewhere the entry points abort and
// are never called (avx2_kernels_built() is false).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define QGRU_FAST_HAVE_AVX2 1
#define QGRU_AVX2 __attribute__((target("avx2")))
#include <immintrin.h>
#endif
