// Host emulation of prmt.b32 and lop3.b32 against plain bit-loop references written from the PTX ISA text.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>

#include "qgru/kernels/fast_dequant.h"
#include "qgru/kernels/ptx_ops.h"

namespace dq = qgru::kernels;

namespace {

// prmt, one output bit at a time: bit j of byte i of d comes from source byte sel&7 of {b, a} (bytes 0..3
// from a, 4..7 from b); with sel bit 3 set every bit of the byte is that source byte's bit 7.
uint32_t prmt_bit_loop(uint32_t a, uint32_t b, uint32_t selector) {
  uint32_t d = 0;
  for (int bit = 0; bit < 32; ++bit) {
    const int byte = bit / 8;
    const uint32_t sel = (selector >> (4 * byte)) & 0xFu;
    const int source_byte = static_cast<int>(sel & 7u);
    const int source_bit = (sel & 8u) ? 7 : bit % 8;
    const uint32_t word = source_byte < 4 ? a : b;
    const uint32_t value = (word >> (8 * (source_byte % 4) + source_bit)) & 1u;
    d |= value << bit;
  }
  return d;
}

// lop3 as a sum of minterms: OR over the set bits of imm of (a or ~a) & (b or ~b) & (c or ~c).
uint32_t lop3_minterms(uint32_t a, uint32_t b, uint32_t c, uint32_t imm) {
  uint32_t d = 0;
  for (uint32_t index = 0; index < 8; ++index) {
    if (!((imm >> index) & 1u)) continue;
    const uint32_t ta = (index & 4u) ? a : ~a;
    const uint32_t tb = (index & 2u) ? b : ~b;
    const uint32_t tc = (index & 1u) ? c : ~c;
    d |= ta & tb & tc;
  }
  return d;
}

}  // namespace

TEST_CASE("prmt emulation matches the bit loop for every selector nibble pattern") {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20000; ++trial) {
    const uint32_t a = static_cast<uint32_t>(rng()), b = static_cast<uint32_t>(rng()), selector = static_cast<uint32_t>(rng()) & 0xFFFFu;
    REQUIRE(dq::prmt_emulated(a, b, selector) == prmt_bit_loop(a, b, selector));
  }
  // every single nibble value in every position, on bytes with and without the sign bit
  for (uint32_t pos = 0; pos < 4; ++pos) {
    for (uint32_t nibble = 0; nibble < 16; ++nibble) {
      const uint32_t selector = (0x3210u & ~(0xFu << (4 * pos))) | (nibble << (4 * pos));
      REQUIRE(dq::prmt_emulated(0x80FF7F01u, 0x00C0407Fu, selector) == prmt_bit_loop(0x80FF7F01u, 0x00C0407Fu, selector));
    }
  }
}

TEST_CASE("prmt with the selectors 0x5250 / 0x5351 builds 0x64 exponent bytes over bytes 0,2 and 1,3") {
  CHECK(dq::prmt_b32(0xDDCCBBAAu, 0x64646464u, 0x5250u) == 0x64CC64AAu);
  CHECK(dq::prmt_b32(0xDDCCBBAAu, 0x64646464u, 0x5351u) == 0x64DD64BBu);
}

TEST_CASE("lop3 emulation matches the minterm expansion for all 256 truth tables") {
  std::mt19937 rng(5);
  for (uint32_t imm = 0; imm < 256; ++imm) {
    for (int trial = 0; trial < 64; ++trial) {
      const uint32_t a = static_cast<uint32_t>(rng()), b = static_cast<uint32_t>(rng()), c = static_cast<uint32_t>(rng());
      REQUIRE(dq::lop3_emulated(a, b, c, imm) == lop3_minterms(a, b, c, imm));
    }
  }
  // The dequant immediate is (a & b) | c.
  CHECK(dq::kLop3AndOr == 0xEAu);
  CHECK(dq::lop3_b32<0xEA>(0x12345678u, 0x000F000Fu, 0x64006400u) == ((0x12345678u & 0x000F000Fu) | 0x64006400u));
}
