#pragma once
// The four PTX instructions the fast dequantization is built from, QGRU_HD:
//   prmt.b32 (generic mode), lop3.b32, and sub/mul/fma.rn.f16x2.
// Under __CUDA_ARCH__ each is the real instruction (inline PTX); on the host each is a bit-exact emulation:
// byte permute on 32-bit words, LOP3 truth-table evaluation, and exactly rounded software fp16
// (qgru/kernels/soft_fp16.h: round once to nearest even, subnormals kept). NaN results are the only
// place host and device may differ in bits (payload); the dequantization paths never produce NaN.
#include <cstdint>

#include "qgru/hd.h"
#if !defined(__CUDA_ARCH__)
#include "qgru/kernels/soft_fp16.h"
#endif

namespace qgru::kernels {

// ---- host emulation (also the reference the device instructions are specified by) ----

// prmt.b32 d, a, b, selector (generic mode). Source bytes {b, a} are numbered 0..7 (a.b0 = 0, b.b3 = 7).
// Each 4-bit nibble i of selector (i = 0..3, low first) fills byte i of d: its low 3 bits pick the source
// byte; its bit 3 set replicates that byte's sign bit into all 8 bits instead of copying it.
inline uint32_t prmt_emulated(uint32_t a, uint32_t b, uint32_t selector) {
  const uint64_t source = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t nibble = (selector >> (4 * i)) & 0xFu;
    uint32_t byte = static_cast<uint32_t>(source >> (8 * (nibble & 7u))) & 0xFFu;
    if (nibble & 8u) byte = (byte & 0x80u) ? 0xFFu : 0x00u;
    d |= byte << (8 * i);
  }
  return d;
}

// lop3.b32 d, a, b, c, imm_lut: bit i of d is bit ((a_i << 2) | (b_i << 1) | c_i) of imm_lut, so that
// imm_lut = F(0xF0, 0xCC, 0xAA) computes d = F(a, b, c) bitwise.
inline uint32_t lop3_emulated(uint32_t a, uint32_t b, uint32_t c, uint32_t imm_lut) {
  uint32_t d = 0;
  for (int i = 0; i < 32; ++i) {
    const uint32_t index = (((a >> i) & 1u) << 2) | (((b >> i) & 1u) << 1) | ((c >> i) & 1u);
    d |= ((imm_lut >> index) & 1u) << i;
  }
  return d;
}

// ---- QGRU_HD entry points ----

QGRU_HD uint32_t prmt_b32(uint32_t a, uint32_t b, uint32_t selector) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
#else
  return prmt_emulated(a, b, selector);
#endif
}

// ImmLut is a template argument because PTX needs it as an immediate.
template <uint32_t ImmLut>
QGRU_HD uint32_t lop3_b32(uint32_t a, uint32_t b, uint32_t c) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, %4;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(ImmLut));
  return d;
#else
  return lop3_emulated(a, b, c, ImmLut);
#endif
}

// Packed halves: bits 0..15 and 16..31 of each word are two independent binary16 values.
QGRU_HD uint32_t sub_f16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("sub.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  return softfp16::sub2(a, b);
#endif
}

QGRU_HD uint32_t mul_f16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("mul.rn.f16x2 %0, %1, %2;\n" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  return softfp16::mul2(a, b);
#endif
}

QGRU_HD uint32_t fma_f16x2(uint32_t a, uint32_t b, uint32_t c) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
#else
  return softfp16::fma2(a, b, c);
#endif
}

}  // namespace qgru::kernels
