// Packing against a line-by-line transcription of AutoGPTQ's QuantLinear.pack loops (the independent
// reference), round trips for every width and both formats, and the v1 zero-point limitation.
#include <doctest/doctest.h>

#include <random>

#include "qgru/base/error.h"
#include "qgru/gptq/pack.h"

namespace {

// auto_gptq/nn_modules/qlinear/qlinear_cuda_old.py pack(): intweight [K, N] uint32 → qweight [K/32·bits, N].
std::vector<uint32_t> autogptq_pack_rows(const std::vector<uint32_t>& intweight, int64_t K, int64_t N, int bits) {
  std::vector<uint32_t> qweight(static_cast<size_t>(K / 32 * bits * N), 0);
  auto q = [&](int64_t row, int64_t col) -> uint32_t& { return qweight[static_cast<size_t>(row * N + col)]; };
  auto w = [&](int64_t row, int64_t col) { return intweight[static_cast<size_t>(row * N + col)]; };
  int64_t i = 0, row = 0;
  while (row < K / 32 * bits) {
    for (int64_t c = 0; c < N; ++c) {
      int64_t ii = i, rr = row;
      if (bits == 2 || bits == 4 || bits == 8) {
        for (int64_t j = ii; j < ii + 32 / bits; ++j) q(rr, c) |= w(j, c) << (bits * (j - ii));
      } else {  // bits == 3
        for (int64_t j = ii; j < ii + 10; ++j) q(rr, c) |= w(j, c) << (3 * (j - ii));
        ii += 10;
        q(rr, c) |= w(ii, c) << 30;
        rr += 1;
        q(rr, c) |= (w(ii, c) >> 2) & 1;
        ii += 1;
        for (int64_t j = ii; j < ii + 10; ++j) q(rr, c) |= w(j, c) << (3 * (j - ii) + 1);
        ii += 10;
        q(rr, c) |= w(ii, c) << 31;
        rr += 1;
        q(rr, c) |= (w(ii, c) >> 1) & 0x3;
        ii += 1;
        for (int64_t j = ii; j < ii + 10; ++j) q(rr, c) |= w(j, c) << (3 * (j - ii) + 2);
      }
    }
    if (bits == 3) { i += 32; row += 3; } else { i += 32 / bits; row += 1; }
  }
  return qweight;
}

std::vector<int32_t> random_codes(size_t count, int bits, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, (1 << bits) - 1);
  std::vector<int32_t> codes(count);
  for (auto& c : codes) c = dist(rng);
  codes[0] = 0;
  codes[count - 1] = (1 << bits) - 1;  // both ends of the range
  return codes;
}

}  // namespace

TEST_CASE("pack_qweight_matches_autogptq_loops_for_every_width") {
  const int64_t N = 5, K = 64;
  for (int bits : {2, 3, 4, 8}) {
    CAPTURE(bits);
    const auto codes = random_codes(static_cast<size_t>(N * K), bits, 17u + static_cast<uint32_t>(bits));  // [N, K]
    std::vector<uint32_t> intweight(static_cast<size_t>(K * N));  // [K, N] as AutoGPTQ holds it
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        intweight[static_cast<size_t>(k * N + n)] = static_cast<uint32_t>(codes[static_cast<size_t>(n * K + k)]);
    const auto want = autogptq_pack_rows(intweight, K, N, bits);
    const auto got = qgru::gptq::pack_qweight(codes, N, K, bits, "t.qweight");
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK(static_cast<uint32_t>(got[i]) == want[i]);
    CHECK(qgru::gptq::unpack_qweight(got, N, K, bits) == codes);
  }
}

TEST_CASE("pack_four_bit_layout_is_low_nibble_first") {
  std::vector<int32_t> codes = {1, 2, 3, 4, 5, 6, 7, 15};  // N = 1, K = 8
  const auto packed = qgru::gptq::pack_qweight(codes, 1, 8, 4, "t");
  REQUIRE(packed.size() == 1);
  CHECK(static_cast<uint32_t>(packed[0]) == 0xF7654321u);
}

TEST_CASE("pack_qzeros_round_trips_in_both_formats") {
  const int64_t G = 3, N = 64;
  for (int bits : {2, 3, 4, 8}) {
    for (auto format : {qgru::gptq::CheckpointFormat::kGptq, qgru::gptq::CheckpointFormat::kGptqV2}) {
      CAPTURE(bits);
      auto zeros = random_codes(static_cast<size_t>(G * N), bits, 3u + static_cast<uint32_t>(bits));
      if (format == qgru::gptq::CheckpointFormat::kGptq) {
        for (auto& z : zeros) z = z == 0 ? 1 : z;  // v1 carries 1..maxq
      }
      int64_t lost = -1;
      const auto packed = qgru::gptq::pack_qzeros(zeros, G, N, bits, format, &lost, "t.qzeros");
      CHECK(lost == 0);
      CHECK(packed.size() == static_cast<size_t>(G * N * bits / 32));
      CHECK(qgru::gptq::unpack_qzeros(packed, G, N, bits, format) == zeros);
    }
  }
}

TEST_CASE("pack_qzeros_v1_stores_zero_minus_one_and_flags_zero") {
  std::vector<int32_t> zeros = {8, 1, 0, 15, 8, 8, 8, 8};  // G = 1, N = 8, 4 bits
  int64_t lost = 0;
  const auto v1 = qgru::gptq::pack_qzeros(zeros, 1, 8, 4, qgru::gptq::CheckpointFormat::kGptq, &lost, "t");
  CHECK(lost == 1);
  CHECK(static_cast<uint32_t>(v1[0]) == 0x7777EF07u);  // 7, 0, 15 (0 − 1 masked), 14, 7, 7, 7, 7
  const auto back = qgru::gptq::unpack_qzeros(v1, 1, 8, 4, qgru::gptq::CheckpointFormat::kGptq);
  CHECK(back[2] == 16);  // what readers of v1 see: maxq + 1, never silently the right value
  CHECK(back[0] == 8);
  CHECK(back[3] == 15);  // the neighbours survive the wrapped value
  const auto v2 = qgru::gptq::pack_qzeros(zeros, 1, 8, 4, qgru::gptq::CheckpointFormat::kGptqV2, &lost, "t");
  CHECK(lost == 0);
  CHECK(qgru::gptq::unpack_qzeros(v2, 1, 8, 4, qgru::gptq::CheckpointFormat::kGptqV2) == zeros);
}

TEST_CASE("pack_refuses_k_that_does_not_fill_words") {
  std::vector<int32_t> codes(12, 1);
  CHECK_THROWS_WITH_AS(qgru::gptq::pack_qweight(codes, 1, 12, 4, "x.qweight"), doctest::Contains("multiple of 8"),
                       qgru::Error);
  std::vector<int32_t> codes3(16, 1);
  CHECK_THROWS_WITH_AS(qgru::gptq::pack_qweight(codes3, 1, 16, 3, "x.qweight"), doctest::Contains("multiple of 32"),
                       qgru::Error);
  std::vector<int32_t> bad = {16, 0, 0, 0, 0, 0, 0, 0};
  CHECK_THROWS_AS(qgru::gptq::pack_qweight(bad, 1, 8, 4, "x"), qgru::Error);
  CHECK_THROWS_AS(qgru::gptq::parse_format("gptq_v3"), qgru::Error);
}
