// Int8 GEMM layout of the CUDA GRU executor: offsets, padding, pack/unpack round trip, and the whole
// stored-operand path (pack, padded TN GEMM as cuBLAS computes it, offset correction) against the raw
// accumulator Σ q_W·q_x computed directly in int64.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "qgru/kernels/int8_gemm_layout.h"

namespace dq = qgru::kernels;

TEST_CASE("operand offsets: signed 8-bit as is, unsigned 8-bit shifted by 128, wider codes refused") {
  int32_t offset = -1;
  CHECK(dq::int8_operand_offset(-128, 127, offset).empty());
  CHECK(offset == 0);
  CHECK(dq::int8_operand_offset(0, 255, offset).empty());
  CHECK(offset == 128);
  CHECK(dq::int8_operand_offset(-3, 100, offset).empty());
  CHECK(offset == 0);
  CHECK(dq::int8_operand_offset(0, 511, offset).find("[0, 511]") != std::string::npos);
  CHECK(!dq::int8_operand_offset(-5, 200, offset).empty());
}

TEST_CASE("padded leading dimensions are the next multiples of 4 and the workspace adds up") {
  for (int64_t H : {1, 31, 32, 33, 257}) {
    for (int64_t C : {1, 3, 4, 5, 40}) {
      const dq::GruGemmLayout l = dq::plan_gru_gemm(H, C, 3, 7);
      CHECK(l.rows_p % 4 == 0);
      CHECK(l.rows_p >= 3 * H);
      CHECK(l.rows_p < 3 * H + 4);
      CHECK(l.C_p % 4 == 0);
      CHECK(l.C_p >= C);
      CHECK(l.C_p < C + 4);
      CHECK(l.H_p % 4 == 0);
      CHECK(l.H_p < H + 4);
      CHECK(l.workspace_bytes() == 21 * l.C_p + 3 * l.H_p + 4 * 21 * l.rows_p + 4 * 3 * l.rows_p + 4 * 3 * H + 4 * 21 * H);
    }
  }
  CHECK_THROWS_WITH_AS(dq::plan_gru_gemm(8, 200000, 1, 1), doctest::Contains("overflow"), qgru::Error);
  CHECK_THROWS_AS(dq::plan_gru_gemm(0, 4, 1, 1), qgru::Error);
}

TEST_CASE("pack_int8_rows then unpack_int8_rows is exact, padding is zero, out-of-range codes are refused") {
  std::mt19937 rng(4);
  const int64_t rows = 7, cols = 5, rows_p = 8, cols_p = 8;
  for (int32_t offset : {0, 128}) {
    std::vector<int32_t> codes(static_cast<size_t>(rows * cols));
    for (auto& c : codes) c = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256) - 128 + offset;
    codes[0] = -128 + offset;
    codes[1] = 127 + offset;
    const auto packed = dq::pack_int8_rows(codes.data(), rows, cols, rows_p, cols_p, offset, "q");
    CHECK(dq::unpack_int8_rows(packed.data(), rows, cols, cols_p, offset) == codes);
    for (int64_t r = 0; r < rows_p; ++r)
      for (int64_t c = 0; c < cols_p; ++c)
        if (r >= rows || c >= cols) REQUIRE(packed[static_cast<size_t>(r * cols_p + c)] == 0);
  }
  const std::vector<int32_t> bad = {0, 128};
  CHECK_THROWS_WITH_AS(dq::pack_int8_rows(bad.data(), 1, 2, 4, 4, 0, "q_W"), doctest::Contains("q_W[0, 1] = 128"), qgru::Error);
}

TEST_CASE("stored-operand int8 GEMM plus offset correction equals the raw accumulator, edge sizes") {
  std::mt19937 rng(9);
  for (int64_t H : {1, 31, 33}) {
    for (int64_t C : {1, 5, 64}) {
      for (int32_t x_offset : {0, 128}) {
        const int64_t N = 3, T = 2, rows = 3 * H;
        const dq::GruGemmLayout l = dq::plan_gru_gemm(H, C, N, T);
        std::vector<int32_t> q_W(static_cast<size_t>(rows * C)), q_x(static_cast<size_t>(T * N * C));
        for (auto& w : q_W) w = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 255) - 127;
        for (auto& x : q_x) x = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256) - 128 + x_offset;
        q_x[0] = x_offset == 0 ? -128 : 255;  // extremes
        std::vector<int64_t> W_sum(static_cast<size_t>(rows), 0);
        for (int64_t c = 0; c < rows; ++c)
          for (int64_t k = 0; k < C; ++k) W_sum[static_cast<size_t>(c)] += q_W[static_cast<size_t>(c * C + k)];
        const auto W8 = dq::pack_int8_rows(q_W.data(), rows, C, l.rows_p, l.C_p, 0, "q_W");
        const auto x8 = dq::pack_int8_rows(q_x.data(), T * N, C, T * N, l.C_p, x_offset, "q_x");
        std::vector<int32_t> gemm(static_cast<size_t>(T * N * l.rows_p), -7);
        dq::gemm_int8_tn_reference(l.rows_p, T * N, l.C_p, W8.data(), l.C_p, x8.data(), l.C_p, gemm.data(), l.rows_p);
        int64_t nonzero = 0;
        for (int64_t b = 0; b < T * N; ++b) {
          for (int64_t c = 0; c < rows; ++c) {
            int64_t direct = 0;
            for (int64_t k = 0; k < C; ++k) direct += static_cast<int64_t>(q_W[static_cast<size_t>(c * C + k)]) * q_x[static_cast<size_t>(b * C + k)];
            const int64_t got = dq::raw_gemm_accumulator(gemm[static_cast<size_t>(b * l.rows_p + c)], x_offset, W_sum[static_cast<size_t>(c)]);
            REQUIRE_MESSAGE(got == direct, "H=" << H << " C=" << C << " offset=" << x_offset << " b=" << b << " c=" << c);
            nonzero += direct != 0;
          }
          for (int64_t c = rows; c < l.rows_p; ++c) REQUIRE(gemm[static_cast<size_t>(b * l.rows_p + c)] == 0);  // padded rows
        }
        CHECK(nonzero > 0);
      }
    }
  }
}
