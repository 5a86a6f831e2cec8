// Packing against a line-by-line transcription of AutoGPTQ's QuantLinear.pack loops (the independent
// reference), round trips for every width and both formats, and the v1 zero-point limitation.
#include <doctest/doctest.h>

#include <ios>
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

namespace {

// --- The clients' v1 zero-point arithmetic, transcribed from their source (docs/GPTQ.md, "Clients") ---
// GPTQModel 7.7.0 gptqmodel/utils/model.py convert_gptq_v1_to_v2_format_module (int32 words): qzeros += ONES
// with ONES 0b0101...01 (2 bits), 0b00010001... (4 bits), 0b00000001... (8 bits); convert_gptq_v2_to_v1_format
// subtracts the same. 3 bits: _correct_gptq_v1_qzeros / _revert_gptq_v1_qzeros_correction in
// utils/model_dequant.py unpack each 3-bit field, add ±1, mask with 0x7 and repack (_pack_cols_3bit below).
constexpr uint32_t kClientOnes2 = 0b01010101010101010101010101010101u;
constexpr uint32_t kClientOnes4 = 0b00010001000100010001000100010001u;
constexpr uint32_t kClientOnes8 = 0b00000001000000010000000100000001u;

uint32_t client_ones(int bits) { return bits == 2 ? kClientOnes2 : bits == 4 ? kClientOnes4 : kClientOnes8; }

// GPTQModel's pack_cols for 2/4/8 bits: value j of a row goes to word j / (32/bits), bits·(j % (32/bits)).
std::vector<uint32_t> client_pack_cols(const std::vector<int32_t>& values, int64_t rows, int64_t cols, int bits) {
  const int64_t per = 32 / bits;
  std::vector<uint32_t> words(static_cast<size_t>(rows * cols / per), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      words[static_cast<size_t>(r * (cols / per) + j / per)] |=
          static_cast<uint32_t>(values[static_cast<size_t>(r * cols + j)]) << (bits * (j % per));
  return words;
}

std::vector<int32_t> client_unpack_cols(const std::vector<uint32_t>& words, int64_t rows, int64_t cols, int bits) {
  const int64_t per = 32 / bits;
  std::vector<int32_t> values(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < cols; ++j)
      values[static_cast<size_t>(r * cols + j)] = static_cast<int32_t>(
          (words[static_cast<size_t>(r * (cols / per) + j / per)] >> (bits * (j % per))) & ((1u << bits) - 1));
  return values;
}

// GPTQModel's _pack_cols_3bit / _unpack_cols_3bit: 32 values in 3 words; value 10 = bits 30-31 of word 0 and
// bit 0 of word 1, value 21 = bit 31 of word 1 and bits 0-1 of word 2.
std::vector<uint32_t> client_pack_cols_3bit(const std::vector<int32_t>& values, int64_t rows, int64_t cols) {
  std::vector<uint32_t> words(static_cast<size_t>(rows * cols / 32 * 3), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      auto v = [&](int idx) { return static_cast<uint64_t>(values[static_cast<size_t>(r * cols + b * 32 + idx)]) & 7u; };
      uint64_t w0 = 0, w1 = 0, w2 = 0;
      for (int idx = 0; idx < 10; ++idx) w0 |= v(idx) << (3 * idx);
      w0 |= v(10) << 30;
      w1 = (v(10) >> 2) & 1;
      for (int idx = 0; idx < 10; ++idx) w1 |= v(11 + idx) << (1 + 3 * idx);
      w1 |= v(21) << 31;
      w2 = (v(21) >> 1) & 3;
      for (int idx = 0; idx < 10; ++idx) w2 |= v(22 + idx) << (2 + 3 * idx);
      uint32_t* out = &words[static_cast<size_t>(r * (cols / 32 * 3) + b * 3)];
      out[0] = static_cast<uint32_t>(w0);
      out[1] = static_cast<uint32_t>(w1);
      out[2] = static_cast<uint32_t>(w2);
    }
  }
  return words;
}

std::vector<int32_t> client_unpack_cols_3bit(const std::vector<uint32_t>& words, int64_t rows, int64_t cols) {
  std::vector<int32_t> values(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < cols / 32; ++b) {
      const uint32_t* in = &words[static_cast<size_t>(r * (cols / 32 * 3) + b * 3)];
      int32_t* out = &values[static_cast<size_t>(r * cols + b * 32)];
      for (int idx = 0; idx < 10; ++idx) out[idx] = static_cast<int32_t>((in[0] >> (3 * idx)) & 7);
      out[10] = static_cast<int32_t>(((in[0] >> 30) & 3) | ((in[1] << 2) & 4));
      for (int idx = 0; idx < 10; ++idx) out[11 + idx] = static_cast<int32_t>((in[1] >> (1 + 3 * idx)) & 7);
      out[21] = static_cast<int32_t>(((in[1] >> 31) & 1) | ((in[2] << 1) & 6));
      for (int idx = 0; idx < 10; ++idx) out[22 + idx] = static_cast<int32_t>((in[2] >> (2 + 3 * idx)) & 7);
    }
  }
  return values;
}

// The clients' v2 → v1 write and v1 → v2 read of a qzeros tensor [G, N].
std::vector<uint32_t> client_write_v1(const std::vector<int32_t>& zeros, int64_t G, int64_t N, int bits) {
  if (bits == 3) {
    std::vector<int32_t> shifted(zeros.size());
    for (size_t i = 0; i < zeros.size(); ++i) shifted[i] = (zeros[i] - 1) & 7;
    return client_pack_cols_3bit(shifted, G, N);
  }
  std::vector<uint32_t> words = client_pack_cols(zeros, G, N, bits);
  for (uint32_t& w : words) w -= client_ones(bits);  // torch int32 -=: wraps modulo 2^32
  return words;
}

std::vector<int32_t> client_read_v1(std::vector<uint32_t> words, int64_t G, int64_t N, int bits) {
  if (bits == 3) {
    std::vector<int32_t> zeros = client_unpack_cols_3bit(words, G, N);
    for (int32_t& z : zeros) z = (z + 1) & 7;
    return zeros;
  }
  for (uint32_t& w : words) w += client_ones(bits);
  return client_unpack_cols(words, G, N, bits);
}

std::vector<uint32_t> as_words(const std::vector<int32_t>& packed) {
  std::vector<uint32_t> words(packed.size());
  for (size_t i = 0; i < packed.size(); ++i) words[i] = static_cast<uint32_t>(packed[i]);
  return words;
}

// Zero points over [0, maxq] with runs of 0 and of maxq: low field, high field and whole words of 0 included.
std::vector<int32_t> zeros_with_edges(int64_t G, int64_t N, int bits, uint32_t seed) {
  auto zeros = random_codes(static_cast<size_t>(G * N), bits, seed);
  const int32_t maxq = (1 << bits) - 1;
  for (int64_t n = 0; n < N; ++n) zeros[static_cast<size_t>(n)] = 0;                      // group 0: all 0
  zeros[static_cast<size_t>(N)] = 0;                                                      // lowest field
  zeros[static_cast<size_t>(2 * N - 1)] = 0;                                              // highest field
  if (G > 2) {  // group 2: alternating 0 and maxq in its upper half
    for (int64_t n = N / 2; n < N; ++n) zeros[static_cast<size_t>(2 * N + n)] = n % 2 ? 0 : maxq;
  }
  return zeros;
}

}  // namespace (the client transcriptions)

namespace {
const qgru::gptq::CheckpointFormat kV1 = qgru::gptq::CheckpointFormat::kGptq;
const qgru::gptq::CheckpointFormat kV2 = qgru::gptq::CheckpointFormat::kGptqV2;
}  // namespace

TEST_CASE("v1_qzeros_are_bit_identical_to_what_the_clients_write_zero_points_of_0_included") {
  const int64_t G = 4, N = 64;
  for (int bits : {2, 3, 4, 8}) {
    CAPTURE(bits);
    const auto zeros = zeros_with_edges(G, N, bits, 40u + static_cast<uint32_t>(bits));
    const auto ours = as_words(qgru::gptq::pack_qzeros(zeros, G, N, bits, kV1, "t.qzeros"));
    const auto theirs = client_write_v1(zeros, G, N, bits);
    REQUIRE(ours.size() == theirs.size());
    for (size_t i = 0; i < ours.size(); ++i) {
      INFO("word " << i << ": qgru 0x" << std::hex << ours[i] << ", clients 0x" << theirs[i]);
      CHECK(ours[i] == theirs[i]);
    }
    // ... and every zero point, 0 included, comes back through both readers.
    CHECK(client_read_v1(theirs, G, N, bits) == zeros);
    CHECK(qgru::gptq::unpack_qzeros(qgru::gptq::pack_qzeros(zeros, G, N, bits, kV1, "t"), G, N, bits, kV1) == zeros);
  }
}

TEST_CASE("any_v1_qzeros_word_reads_as_the_clients_read_it_and_writes_back_bit_for_bit") {
  const int64_t G = 3, N = 96;  // 96 fills whole words at 2, 3, 4 and 8 bits
  std::mt19937 rng(77);
  for (int bits : {2, 3, 4, 8}) {
    CAPTURE(bits);
    std::vector<int32_t> words(static_cast<size_t>(G * N * bits / 32));
    for (auto& w : words) w = static_cast<int32_t>(rng());
    words[0] = 0;                                  // all borrows
    words[1] = static_cast<int32_t>(0xFFFFFFFFu);  // all carries
    const auto zeros = qgru::gptq::unpack_qzeros(words, G, N, bits, kV1);
    CHECK(zeros == client_read_v1(as_words(words), G, N, bits));
    CHECK(qgru::gptq::pack_qzeros(zeros, G, N, bits, kV1, "t") == words);
  }
}

TEST_CASE("v2_qzeros_are_the_plain_fields") {
  const int64_t G = 3, N = 64;
  for (int bits : {2, 3, 4, 8}) {
    CAPTURE(bits);
    const auto zeros = zeros_with_edges(G, N, bits, 50u + static_cast<uint32_t>(bits));
    const auto packed = as_words(qgru::gptq::pack_qzeros(zeros, G, N, bits, kV2, "t"));
    CHECK(packed == (bits == 3 ? client_pack_cols_3bit(zeros, G, N) : client_pack_cols(zeros, G, N, bits)));
    CHECK(qgru::gptq::unpack_qzeros(qgru::gptq::pack_qzeros(zeros, G, N, bits, kV2, "t"), G, N, bits, kV2) == zeros);
  }
}

TEST_CASE("v1_zero_point_of_0_borrows_from_its_neighbour_as_the_clients_do") {
  const std::vector<int32_t> zeros = {0, 8, 8, 8, 8, 8, 8, 8};  // G = 1, N = 8, 4 bits: v2 word 0x88888880
  const auto v1 = qgru::gptq::pack_qzeros(zeros, 1, 8, 4, kV1, "t");
  CHECK(static_cast<uint32_t>(v1[0]) == 0x7777776Fu);  // 0x88888880 − 0x11111111
  CHECK(qgru::gptq::unpack_qzeros(v1, 1, 8, 4, kV1) == zeros);
  // Readers adding 1 to each field without carrying see 16, 7, 8, ...: the 0 and its neighbour.
  const auto misreads = qgru::gptq::v1_field_reader_misreads(zeros, v1, 1, 8, 4);
  CHECK(misreads.zero_points_of_zero == 1);
  CHECK(misreads.neighbours == 1);
  // 3 bits wraps each field instead: only the 0 itself is misread (as 8), never a neighbour.
  std::vector<int32_t> zeros3(32, 4);
  zeros3[5] = 0;
  const auto v1_3 = qgru::gptq::pack_qzeros(zeros3, 1, 32, 3, kV1, "t");
  const auto misreads3 = qgru::gptq::v1_field_reader_misreads(zeros3, v1_3, 1, 32, 3);
  CHECK(misreads3.zero_points_of_zero == 1);
  CHECK(misreads3.neighbours == 0);
  // No zero point of 0: nothing for any reader to misread.
  const std::vector<int32_t> plain = {1, 8, 15, 8, 8, 8, 8, 8};
  const auto misreads_none = qgru::gptq::v1_field_reader_misreads(plain, qgru::gptq::pack_qzeros(plain, 1, 8, 4, kV1, "t"), 1, 8, 4);
  CHECK(misreads_none.zero_points_of_zero + misreads_none.neighbours == 0);
}

TEST_CASE("v1_files_of_qgrus_earlier_writer_read_as_it_meant_them") {
  // The earlier writer stored (zero − 1) & maxq in each field: zeros {8, 1, 0, 15, ...} as 0x7777EF07.
  const std::vector<int32_t> old_words = {static_cast<int32_t>(0x7777EF07u)};
  const std::vector<int32_t> meant = {8, 1, 0, 15, 8, 8, 8, 8};
  CHECK(qgru::gptq::unpack_qzeros(old_words, 1, 8, 4, kV1, qgru::gptq::V1ZeroRule::kPerField) == meant);
  // The clients read the same word with a carry out of the F field: 0 there and 15 + 1 = 16 → 0 with a carry
  // into the next field; their reading differs from what was meant in two places.
  const auto clients = qgru::gptq::unpack_qzeros(old_words, 1, 8, 4, kV1);
  CHECK(clients == client_read_v1(as_words(old_words), 1, 8, 4));
  int differ = 0;
  for (size_t i = 0; i < meant.size(); ++i) differ += clients[i] != meant[i];
  CHECK(differ == 2);
}

TEST_CASE("pack_qzeros_refuses_out_of_range_zero_points") {
  CHECK_THROWS_WITH_AS(qgru::gptq::pack_qzeros({16, 0, 0, 0, 0, 0, 0, 0}, 1, 8, 4, kV1, "x.qzeros"),
                       doctest::Contains("x.qzeros: zero point 16 out of range"), qgru::Error);
  CHECK_THROWS_AS(qgru::gptq::pack_qzeros({-1, 0, 0, 0, 0, 0, 0, 0}, 1, 8, 4, kV2, "x"), qgru::Error);
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
