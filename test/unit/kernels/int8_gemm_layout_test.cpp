// Int8 GEMM layout of the CUDA GRU executor: offsets, padding, pack/unpack round trip, and the whole
// stored-operand path (pack, padded TN GEMM as cuBLAS computes it, offset correction) against the raw
// accumulator Σ q_W·q_x computed directly in int64.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
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

TEST_CASE("cuBLAS int8 shapes: m, k and the batch rows are padded to multiples of 16 and the workspace adds up") {
  for (int64_t H : {1, 31, 32, 33, 257}) {
    for (int64_t C : {1, 3, 4, 5, 40}) {
      for (int64_t N : {1, 15, 16, 17}) {
        const int64_t T = 7;
        const dq::GruGemmLayout l = dq::plan_gru_gemm(H, C, N, T);
        for (int64_t padded : {l.rows_p, l.C_p, l.H_p, l.N_p}) CHECK(padded % 16 == 0);
        CHECK(l.rows_p >= 3 * H);
        CHECK(l.rows_p < 3 * H + 16);
        CHECK(l.C_p >= C);
        CHECK(l.C_p < C + 16);
        CHECK(l.H_p >= H);
        CHECK(l.H_p < H + 16);
        CHECK(l.N_p >= N);
        CHECK(l.N_p < N + 16);
        CHECK(l.x_bytes == T * l.N_p * l.C_p);
        CHECK(l.gemm_x_bytes == 4 * T * l.N_p * l.rows_p);
        CHECK(l.workspace_bytes() == T * l.N_p * l.C_p + l.N_p * l.H_p + 4 * T * l.N_p * l.rows_p + 4 * l.N_p * l.rows_p +
                                         4 * N * H + 4 * T * N * H);
      }
    }
  }
  CHECK_THROWS_WITH_AS(dq::plan_gru_gemm(8, 200000, 1, 1), doctest::Contains("overflow"), qgru::Error);
  CHECK_THROWS_AS(dq::plan_gru_gemm(0, 4, 1, 1), qgru::Error);
}

TEST_CASE("per-step packing puts row (t, n) at t*N_p + n and zeros every padded row and column") {
  const int64_t T = 3, N = 5, cols = 3, N_p = 16, cols_p = 16;
  std::vector<int32_t> codes(static_cast<size_t>(T * N * cols));
  for (size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<int32_t>(i % 256);
  const auto packed = dq::pack_signed_steps<int8_t>(codes.data(), T, N, cols, N_p, cols_p, 128, "q_x");
  REQUIRE(packed.size() == static_cast<size_t>(T * N_p * cols_p));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N_p; ++n)
      for (int64_t c = 0; c < cols_p; ++c) {
        const int8_t got = packed[static_cast<size_t>((t * N_p + n) * cols_p + c)];
        const int32_t want = n < N && c < cols ? codes[static_cast<size_t>((t * N + n) * cols + c)] - 128 : 0;
        REQUIRE_MESSAGE(got == want, "t=" << t << " n=" << n << " c=" << c);
      }
  const std::vector<int32_t> bad = {0, 0, 0, 0, 0, 300};
  CHECK_THROWS_WITH_AS(dq::pack_signed_steps<int8_t>(bad.data(), 2, 1, 3, 16, 16, 0, "q_x"),
                       doctest::Contains("q_x[1, 2] = 300"), qgru::Error);
  // into memory that held anything before (pinned staging): the same bytes, padding zeroed
  std::vector<int8_t> staging(packed.size(), int8_t{0x55});
  dq::pack_signed_steps_into<int8_t>(codes.data(), T, N, cols, N_p, cols_p, 128, "q_x", staging.data());
  CHECK(staging == packed);
}

TEST_CASE("per-step packing refuses each code just outside the stored type after the offset, and int32's extremes") {
  // Every code from far below to far above the window [lo + offset, hi + offset] of int8 and int16, one at a
  // time at each position of a row: accepted exactly inside the window (stored = q - offset), refused outside
  // it naming the position; INT32_MIN / INT32_MAX with offsets of either sign are refused (no overflow).
  auto window_check = [](auto stored_tag, int32_t offset) {
    using Stored = decltype(stored_tag);
    const int64_t lo = std::numeric_limits<Stored>::min(), hi = std::numeric_limits<Stored>::max();
    const int64_t cols = 5, cols_p = 16;
    for (int64_t q : {lo + offset - 1, lo + offset, int64_t{offset}, hi + offset, hi + offset + 1,
                      int64_t{INT32_MIN}, int64_t{INT32_MAX}}) {
      if (q < INT32_MIN || q > INT32_MAX) continue;
      for (int64_t at = 0; at < cols; ++at) {
        std::vector<int32_t> codes(static_cast<size_t>(cols), offset);
        codes[static_cast<size_t>(at)] = static_cast<int32_t>(q);
        const bool fits = q - offset >= lo && q - offset <= hi;
        if (fits) {
          const auto packed = dq::pack_signed_steps<Stored>(codes.data(), 1, 1, cols, 16, cols_p, offset, "q_x");
          REQUIRE(packed[static_cast<size_t>(at)] == q - offset);
        } else {
          const std::string message = "q_x[0, " + std::to_string(at) + "] = " + std::to_string(q);
          REQUIRE_THROWS_WITH_AS(dq::pack_signed_steps<Stored>(codes.data(), 1, 1, cols, 16, cols_p, offset, "q_x"),
                                 doctest::Contains(message.c_str()), qgru::Error);
        }
      }
    }
  };
  for (int32_t offset : {0, 128, -128, 32768, -32768, INT32_MAX, INT32_MIN}) {
    window_check(int8_t{}, offset);
    window_check(int16_t{}, offset);
  }
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
        const int64_t N = 3, T = 2, rows = 3 * H;  // N_p = 16: every step has 13 padded batch rows
        const dq::GruGemmLayout l = dq::plan_gru_gemm(H, C, N, T);
        std::vector<int32_t> q_W(static_cast<size_t>(rows * C)), q_x(static_cast<size_t>(T * N * C));
        for (auto& w : q_W) w = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 255) - 127;
        for (auto& x : q_x) x = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256) - 128 + x_offset;
        q_x[0] = x_offset == 0 ? -128 : 255;  // extremes
        std::vector<int64_t> W_sum(static_cast<size_t>(rows), 0);
        for (int64_t c = 0; c < rows; ++c)
          for (int64_t k = 0; k < C; ++k) W_sum[static_cast<size_t>(c)] += q_W[static_cast<size_t>(c * C + k)];
        const auto W8 = dq::pack_int8_rows(q_W.data(), rows, C, l.rows_p, l.C_p, 0, "q_W");
        const auto x8 = dq::pack_signed_steps<int8_t>(q_x.data(), T, N, C, l.N_p, l.C_p, x_offset, "q_x");
        std::vector<int32_t> gemm(static_cast<size_t>(T * l.N_p * l.rows_p), -7);
        dq::gemm_int8_tn_reference(l.rows_p, T * l.N_p, l.C_p, W8.data(), l.C_p, x8.data(), l.C_p, gemm.data(), l.rows_p);
        int64_t nonzero = 0;
        for (int64_t b_p = 0; b_p < T * l.N_p; ++b_p) {
          const int64_t t = b_p / l.N_p, n = b_p % l.N_p, b = t * N + n;  // stored row b_p holds input row (t, n)
          if (n >= N) {  // a padded batch row: zero operands, so zero sums (computed, never read)
            for (int64_t c = 0; c < l.rows_p; ++c) REQUIRE(gemm[static_cast<size_t>(b_p * l.rows_p + c)] == 0);
            continue;
          }
          for (int64_t c = 0; c < rows; ++c) {
            int64_t direct = 0;
            for (int64_t k = 0; k < C; ++k) direct += static_cast<int64_t>(q_W[static_cast<size_t>(c * C + k)]) * q_x[static_cast<size_t>(b * C + k)];
            const int64_t got = dq::raw_gemm_accumulator(gemm[static_cast<size_t>(b_p * l.rows_p + c)], x_offset, W_sum[static_cast<size_t>(c)]);
            REQUIRE_MESSAGE(got == direct, "H=" << H << " C=" << C << " offset=" << x_offset << " b=" << b << " c=" << c);
            nonzero += direct != 0;
          }
          for (int64_t c = rows; c < l.rows_p; ++c) REQUIRE(gemm[static_cast<size_t>(b_p * l.rows_p + c)] == 0);  // padded m
        }
        CHECK(nonzero > 0);
      }
    }
  }
}
