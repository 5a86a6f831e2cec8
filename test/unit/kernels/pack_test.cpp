// Pack-time preprocessing: interleave is a permutation with an exact inverse; the +2^(bits-1) bias is a
// bijection on the code range.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <set>

#include "qgru/kernels/pack.h"

namespace dq = qgru::kernels;

TEST_CASE("interleaved_slot is a permutation of the element slots") {
  for (int bits : {4, 8}) {
    const int count = 32 / bits;
    std::set<int> slots;
    for (int i = 0; i < count; ++i) slots.insert(dq::interleaved_slot(count, i));
    CHECK(static_cast<int>(slots.size()) == count);
    CHECK(*slots.begin() == 0);
    CHECK(*slots.rbegin() == count - 1);
  }
  // The FasterTransformer order for 4 bits: elements 0..7 go to nibbles 0,4,1,5,2,6,3,7.
  const int expected[8] = {0, 4, 1, 5, 2, 6, 3, 7};
  for (int i = 0; i < 8; ++i) CHECK(dq::interleaved_slot(8, i) == expected[i]);
}

TEST_CASE("interleave then deinterleave returns every word unchanged, and moves single fields as stated") {
  std::mt19937 rng(17);
  for (int bits : {4, 8}) {
    for (int trial = 0; trial < 100000; ++trial) {
      const uint32_t w = static_cast<uint32_t>(rng());
      REQUIRE(dq::deinterleave_word(dq::interleave_word(w, bits), bits) == w);
      REQUIRE(dq::interleave_word(dq::deinterleave_word(w, bits), bits) == w);
    }
    const int count = 32 / bits;
    for (int i = 0; i < count; ++i) {
      const uint32_t field = (1u << bits) - 1u;
      REQUIRE(dq::interleave_word(field << (bits * i), bits) == field << (bits * dq::interleaved_slot(count, i)));
    }
  }
}

TEST_CASE("bias_code and unbias_code are inverse on every int8 and int4 value") {
  for (int bits : {4, 8}) {
    const int lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
    for (int q = lo; q <= hi; ++q) {
      const uint32_t u = dq::bias_code(q, bits);
      REQUIRE(u < (1u << bits));
      REQUIRE(dq::unbias_code(u, bits) == q);
    }
  }
  CHECK(dq::bias_code(-128, 8) == 0u);
  CHECK(dq::bias_code(127, 8) == 255u);
}

TEST_CASE("pack_codes places element i at bits [bits*i, bits*(i+1))") {
  const uint32_t codes4[8] = {1, 2, 3, 4, 5, 6, 7, 15};
  CHECK(dq::pack_codes(codes4, 4) == 0xF7654321u);
  const uint32_t codes8[4] = {0x11, 0x22, 0x33, 0xFF};
  CHECK(dq::pack_codes(codes8, 8) == 0xFF332211u);
}
