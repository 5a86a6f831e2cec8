// Fast dequantization (host emulation of the PTX path) against the exact definition: every code, every
// offset of a grid (all of them for 4 bits), a grid of fp16 scales; want = RN_fp16(s · (u - offset)).
// Reference: s · (u - offset) is exact in float (11 x 11 significant bits), then qgru::float_to_half_bits
// rounds once: independent of the packed-half emulation.
#include <doctest/doctest.h>

#include <cstdint>
#include <ios>
#include <random>
#include <vector>

#include "qgru/kernels/fast_dequant.h"
#include "qgru/kernels/pack.h"
#include "qgru/half.h"

namespace dq = qgru::kernels;

namespace {

uint16_t exact_dequant(uint32_t u, int32_t offset, uint16_t scale) {
  const float exact = qgru::half_bits_to_float(scale) * static_cast<float>(static_cast<int32_t>(u) - offset);
  return qgru::float_to_half_bits(exact);
}

uint16_t lo(uint32_t x) { return static_cast<uint16_t>(x & 0xFFFFu); }
uint16_t hi(uint32_t x) { return static_cast<uint16_t>(x >> 16); }

// Scales: ones, powers of two, values whose products round (1/3, 0.1), subnormal and maximal magnitudes,
// negatives, zeros, and seeded random finite codes.
std::vector<uint16_t> scale_grid() {
  std::vector<uint16_t> s = {0x3C00, 0x3800, 0x4000, 0x3555, 0x2E66, 0x0001, 0x03FF, 0x0400, 0x1000,
                             0x7BFF, 0x5BFF, 0xBC00, 0x8001, 0xB555, 0x0000, 0x8000, 0x2001, 0x1E35};
  std::mt19937 rng(99);
  for (int i = 0; i < 16; ++i) {
    uint16_t c;
    do c = static_cast<uint16_t>(static_cast<uint32_t>(rng())); while ((c & 0x7C00u) == 0x7C00u);
    s.push_back(c);
  }
  return s;
}

}  // namespace

TEST_CASE("the int8 fast dequantization path: every biased int8 in every byte position becomes exactly that integer") {
  for (int q = -128; q <= 127; ++q) {
    for (int pos = 0; pos < 4; ++pos) {
      const uint32_t filler = 0x5A3C81F0u;  // other bytes: arbitrary codes
      const uint32_t u = dq::bias_code(q, 8);
      const uint32_t word = (filler & ~(0xFFu << (8 * pos))) | (u << (8 * pos));
      const dq::F16x2x2 h = dq::int8x4_biased_to_f16_raw(word);
      // raw order: pair j = bytes (j, j + 2)
      const int pair = pos % 2, high = pos / 2;
      REQUIRE(dq::raw_pair_element(4, pair, high) == pos);
      const uint16_t got = high ? hi(h.pair[pair]) : lo(h.pair[pair]);
      REQUIRE(got == qgru::float_to_half_bits(static_cast<float>(q)));
    }
  }
}

TEST_CASE("8-bit dequant equals RN(s*(u-offset)) for every code, offset grid and scale grid") {
  const std::vector<int32_t> offsets = {0, 1, 8, 127, 128, 129, 200, 255, 256, 511, 1000, 1023};
  long mismatches = 0;
  for (uint16_t scale : scale_grid()) {
    for (int32_t offset : offsets) {
      for (uint32_t u = 0; u < 256; ++u) {
        for (int pos = 0; pos < 4; ++pos) {
          const uint32_t word = (0xA50F3C77u & ~(0xFFu << (8 * pos))) | (u << (8 * pos));
          const dq::F16x2x2 h = dq::dequant_u8x4_raw(word, static_cast<uint32_t>(offset), scale);
          const uint16_t got = (pos / 2) ? hi(h.pair[pos % 2]) : lo(h.pair[pos % 2]);
          const uint16_t want = exact_dequant(u, offset, scale);
          if (got != want && ++mismatches <= 5) {
            MESSAGE("u=" << u << " offset=" << offset << " scale=0x" << std::hex << scale << " got 0x" << got
                         << " want 0x" << want);
          }
        }
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("4-bit code minus offset is exact before the scale (both the LOP3 low and high-nibble paths)") {
  for (uint32_t offset = 0; offset < 64; ++offset) {
    for (uint32_t u = 0; u < 16; ++u) {
      for (int nib = 0; nib < 8; ++nib) {
        const uint32_t word = (0x9E3779B9u & ~(0xFu << (4 * nib))) | (u << (4 * nib));
        const dq::F16x2x4 h = dq::u4x8_minus_offset_raw(word, offset);
        const int pair = nib % 4, high = nib / 4;
        REQUIRE(dq::raw_pair_element(8, pair, high) == nib);
        const uint16_t got = high ? hi(h.pair[pair]) : lo(h.pair[pair]);
        REQUIRE(got == qgru::float_to_half_bits(static_cast<float>(static_cast<int32_t>(u) - static_cast<int32_t>(offset))));
      }
    }
  }
}

TEST_CASE("4-bit dequant equals RN(s*(u-offset)) for every code, every offset 0..63 and the scale grid") {
  long mismatches = 0;
  for (uint16_t scale : scale_grid()) {
    for (uint32_t offset = 0; offset < 64; ++offset) {
      for (uint32_t u = 0; u < 16; ++u) {
        for (int nib = 0; nib < 8; ++nib) {
          const uint32_t word = (0x2468ACE1u & ~(0xFu << (4 * nib))) | (u << (4 * nib));
          const dq::F16x2x4 h = dq::dequant_u4x8_raw(word, offset, scale);
          const uint16_t got = (nib / 4) ? hi(h.pair[nib % 4]) : lo(h.pair[nib % 4]);
          const uint16_t want = exact_dequant(u, static_cast<int32_t>(offset), scale);
          if (got != want && ++mismatches <= 5) {
            MESSAGE("u=" << u << " offset=" << offset << " nibble=" << nib << " scale=0x" << std::hex << scale
                         << " got 0x" << got << " want 0x" << want);
          }
        }
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("signed int4 and int8 with a zero point: bias at pack time, offset = zero + bias gives s*(q-z)") {
  for (int32_t z = -8; z <= 7; ++z) {
    for (int32_t q = -8; q <= 7; ++q) {
      const uint32_t word = dq::bias_code(q, 4) << 20;  // nibble 5
      const dq::F16x2x4 h = dq::dequant_u4x8_raw(word, static_cast<uint32_t>(z + 8), 0x3555);
      REQUIRE(hi(h.pair[1]) == qgru::float_to_half_bits(qgru::half_bits_to_float(0x3555) * static_cast<float>(q - z)));
    }
  }
  for (int32_t z = -128; z <= 127; z += 17) {
    for (int32_t q = -128; q <= 127; ++q) {
      const uint32_t word = dq::bias_code(q, 8) << 8;  // byte 1
      const dq::F16x2x2 h = dq::dequant_u8x4_raw(word, static_cast<uint32_t>(z + 128), 0x2E66);
      REQUIRE(lo(h.pair[1]) == qgru::float_to_half_bits(qgru::half_bits_to_float(0x2E66) * static_cast<float>(q - z)));
    }
  }
}

TEST_CASE("natural order: after the pack-time interleave pair j holds elements 2j and 2j+1") {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 2000; ++trial) {
    const uint32_t plain = static_cast<uint32_t>(rng());
    const uint32_t offset4 = static_cast<uint32_t>(rng()) % 64, offset8 = static_cast<uint32_t>(rng()) % 1024;
    const uint16_t scale = 0x3A00;
    const dq::F16x2x4 h4 = dq::dequant_u4x8_natural(dq::interleave_word(plain, 4), offset4, scale);
    for (int i = 0; i < 8; ++i) {
      const uint16_t got = (i % 2) ? hi(h4.pair[i / 2]) : lo(h4.pair[i / 2]);
      REQUIRE(got == exact_dequant(dq::word_field(plain, 4, i), static_cast<int32_t>(offset4), scale));
    }
    const dq::F16x2x2 h8 = dq::dequant_u8x4_natural(dq::interleave_word(plain, 8), offset8, scale);
    for (int i = 0; i < 4; ++i) {
      const uint16_t got = (i % 2) ? hi(h8.pair[i / 2]) : lo(h8.pair[i / 2]);
      REQUIRE(got == exact_dequant(dq::word_field(plain, 8, i), static_cast<int32_t>(offset8), scale));
    }
  }
}
