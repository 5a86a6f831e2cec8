// The 16-bit GEMM path of the CUDA GRU executor (qgru/kernels/wide_gemm.h): operand offsets and packing
// exact over every 16-bit code, the kernel's per-thread arithmetic against int64 math at the extreme
// operands, the kernel's whole tiled block loop against plain int64 loops, the launch geometry, the path
// choice, and the wide cell flow against the direct int64 cell loop.
#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cell_reference_check.h"
#include "hand_gru_cell.h"
#include "qgru/kernels/gru_step.h"
#include "qgru/kernels/wide_gemm.h"

namespace dq = qgru::kernels;

TEST_CASE("16-bit operand offsets and packing are exact over every signed and unsigned 16-bit code") {
  int32_t offset = -1;
  CHECK(dq::int16_operand_offset(-32768, 32767, offset).empty());
  CHECK(offset == 0);
  CHECK(dq::int16_operand_offset(0, 65535, offset).empty());
  CHECK(offset == 32768);
  CHECK(dq::int16_operand_offset(0, 65536, offset).find("[0, 65536]") != std::string::npos);
  CHECK(!dq::int16_operand_offset(-1, 40000, offset).empty());
  for (const auto& range : {std::pair<int32_t, int32_t>{-32768, 32767}, std::pair<int32_t, int32_t>{0, 65535}}) {
    REQUIRE(dq::int16_operand_offset(range.first, range.second, offset).empty());
    std::vector<int32_t> codes;
    for (int32_t q = range.first; q <= range.second; ++q) codes.push_back(q);
    const int64_t rows = 1024, cols = static_cast<int64_t>(codes.size()) / rows;  // 65536 codes = 1024 x 64
    const std::vector<int16_t> packed = dq::pack_int16_rows(codes.data(), rows, cols, rows + 3, cols + 16, offset, "codes");
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols + 16; ++c) {
        const int16_t stored = packed[static_cast<size_t>(r * (cols + 16) + c)];
        if (c >= cols) {
          REQUIRE(stored == 0);  // padding adds nothing to a sum
        } else {
          REQUIRE(int32_t{stored} + offset == codes[static_cast<size_t>(r * cols + c)]);
        }
      }
    }
    for (int64_t r = rows; r < rows + 3; ++r)
      for (int64_t c = 0; c < cols + 16; ++c) REQUIRE(packed[static_cast<size_t>(r * (cols + 16) + c)] == 0);
  }
  const int32_t too_big[] = {65536};
  CHECK_THROWS_WITH_AS(dq::pack_int16_rows(too_big, 1, 1, 1, 16, 32768, "q_x"), doctest::Contains("q_x[0, 0] = 65536"),
                       qgru::Error);
}

TEST_CASE("a wide tile product cannot overflow: extreme operands against int64 math") {
  // Every pair of extreme codes, in every tile position: the int32 product and int64 sum are exact.
  const int16_t extremes[] = {-32768, -32767, -1, 0, 1, 32766, 32767};
  std::vector<int16_t> a(dq::kWideTile * dq::kWideTileLd), b(dq::kWideTile * dq::kWideTileLd);
  for (int16_t x : extremes) {
    for (int16_t y : extremes) {
      std::fill(a.begin(), a.end(), x);
      std::fill(b.begin(), b.end(), y);
      const int64_t start = int64_t{1} << 61;  // an accumulator already near the proven bound
      const int64_t got = dq::wide_gemm_tile_dot(a.data(), b.data(), 3, 11, -start);
      REQUIRE(got == -start + int64_t{dq::kWideTile} * int64_t{x} * int64_t{y});
    }
  }
}

TEST_CASE("the wide kernel's tiled block loop equals plain int64 loops (edge shapes, extreme codes)") {
  std::mt19937 rng(3);
  for (int64_t m : {1, 15, 16, 17, 99}) {
    for (int64_t n : {1, 16, 33}) {
      for (int64_t k : {1, 16, 17, 40}) {
        const int64_t k_p = dq::pad_to_multiple(k, dq::kWideTile);
        const int64_t lda = k_p, ldb = k_p + 16, ldc = m + 5;
        std::vector<int16_t> A(static_cast<size_t>(m * lda), 0), B(static_cast<size_t>(n * ldb), 0);
        for (int64_t r = 0; r < m; ++r)
          for (int64_t i = 0; i < k; ++i)
            A[static_cast<size_t>(r * lda + i)] = static_cast<int16_t>(rng() % 4 == 0 ? -32768 : static_cast<int32_t>(rng() % 65536) - 32768);
        for (int64_t r = 0; r < n; ++r)
          for (int64_t i = 0; i < k; ++i)
            B[static_cast<size_t>(r * ldb + i)] = static_cast<int16_t>(rng() % 4 == 0 ? -32768 : static_cast<int32_t>(rng() % 65536) - 32768);
        const int64_t sentinel = 0x5a5a5a5a5a5a5a5a;
        std::vector<int64_t> want(static_cast<size_t>(n * ldc), sentinel), got(static_cast<size_t>(n * ldc), sentinel);
        dq::gemm_wide_tn_reference(m, n, k, A.data(), lda, B.data(), ldb, want.data(), ldc);
        const dq::WideGemmGeometry g = dq::plan_wide_gemm(m, n, k_p);
        CHECK(g.grid_x * dq::kWideTile >= n);
        CHECK((g.grid_x - 1) * dq::kWideTile < n);
        CHECK(g.grid_y * dq::kWideTile >= m);
        CHECK((g.grid_y - 1) * dq::kWideTile < m);
        dq::emulate_wide_gemm_tiled(g, A.data(), lda, B.data(), ldb, got.data(), ldc);
        for (size_t i = 0; i < want.size(); ++i) {
          REQUIRE_MESSAGE(got[i] == want[i], "m=" << m << " n=" << n << " k=" << k << " b=" << i / ldc << " c=" << i % ldc);
        }
        // The padding columns of C keep their sentinel: the kernel writes only inside [n, m].
        if (ldc > m) CHECK(got[static_cast<size_t>(m)] == sentinel);
      }
    }
  }
}

TEST_CASE("wide GEMM geometry refuses what the kernel cannot launch") {
  CHECK_THROWS_WITH_AS(dq::plan_wide_gemm(3, 1, 17), doctest::Contains("k=17"), qgru::Error);
  CHECK_THROWS_WITH_AS(dq::plan_wide_gemm(16 * 65536, 1, 16), doctest::Contains("grid"), qgru::Error);
  const dq::WideGemmGeometry g = dq::plan_wide_gemm(16 * 65535, 1, 16);
  CHECK(g.grid_y == 65535);
  CHECK(g.smem_bytes == 2 * 16 * 17 * 2);
  const dq::GruGemmLayout l = dq::plan_gru_wide(33, 5, 3, 7);
  CHECK(l.C_p == 16);
  CHECK(l.H_p == 48);
  CHECK(l.workspace_bytes() == 2 * 21 * 16 + 2 * 3 * 48 + 8 * 21 * 99 + 8 * 3 * 99 + 4 * 3 * 33 + 4 * 21 * 33);
}

TEST_CASE("path choice: int8 operands take cuBLAS, anything up to 16 bits the wide kernel, wider is refused") {
  const qgru::CodeSpace x8{3, -128, 127}, u8{0, 0, 255}, x16{0, -32768, 32767}, u16{7, 0, 65535}, wide{0, 0, 70000};
  dq::GruOperandPlan p = dq::plan_gru_operands(-127, 127, -128, 127, u8, x8);
  CHECK(p.path == dq::GruGemmPath::Int8);
  CHECK(p.x_offset == 128);
  CHECK(p.h_offset == 0);
  p = dq::plan_gru_operands(-127, 127, -127, 127, x16, x8);  // int16-activations: 8-bit weights, 16-bit x
  CHECK(p.path == dq::GruGemmPath::Wide16);
  CHECK(p.refused.empty());
  p = dq::plan_gru_operands(-32768, 32767, -5, 5, x8, u16);  // int16: 16-bit weights
  CHECK(p.path == dq::GruGemmPath::Wide16);
  CHECK(p.h_offset == 32768);
  CHECK(p.refused.empty());
  p = dq::plan_gru_operands(-127, 128, -5, 5, x8, x8);  // 128 is no int8 weight
  CHECK(p.path == dq::GruGemmPath::Wide16);
  CHECK(dq::plan_gru_operands(-40000, 5, -5, 5, x8, x8).refused.find("-40000") != std::string::npos);
  CHECK(dq::plan_gru_operands(-5, 5, -5, 5, wide, x8).refused.find("x:") != std::string::npos);
}

TEST_CASE("wide cell flow equals the direct int64 cell loop (16-bit weights and activations, both directions)") {
  for (int H : {1, 17, 33}) {
    for (int C : {1, 5, 20}) {
      qgru::test::HandGruCell cell(H, C, static_cast<uint32_t>(H * 7 + C));
      std::mt19937 rng(static_cast<uint32_t>(H * C));
      // 16-bit weights (extremes included) and an unsigned 16-bit x; the row sums follow.
      for (auto& w : cell.q_W) w = static_cast<int32_t>(rng() % 65536) - 32768;
      cell.q_W[0] = -32768;
      for (int c = 0; c < 3 * H; ++c) {
        cell.W_sum[static_cast<size_t>(c)] = 0;
        for (int k = 0; k < C; ++k) cell.W_sum[static_cast<size_t>(c)] += cell.q_W[static_cast<size_t>(c * C + k)];
      }
      for (auto& s : cell.shift8) s = 20;  // keep weight_ih_linear inside its 8-bit range most of the time
      cell.x_space = {30000, 0, 65535};
      cell.view.zp_x = cell.x_space.zp;
      const int T = 3, N = 2;
      std::vector<int32_t> q_x(static_cast<size_t>(T * N * C)), q_h0(static_cast<size_t>(N * H));
      for (auto& x : q_x) x = static_cast<int32_t>(rng() % 65536);
      q_x[0] = 65535;
      for (auto& h : q_h0) h = static_cast<int32_t>(rng() % 256);
      for (bool reverse : {false, true}) {
        const std::vector<int32_t> got = dq::emulate_gru_cell(cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space,
                                                              q_x.data(), T, N, q_h0.data(), reverse);
        qgru::test::check_cell_flow(cell, got, q_x, T, N, q_h0, reverse);
      }
    }
  }
}

TEST_CASE("a cell's device workspace holds every region of its layout, aligned and without overlap") {
  for (dq::GruGemmPath path : {dq::GruGemmPath::Int8, dq::GruGemmPath::Wide16}) {
    for (int64_t H : {1, 31, 33, 257}) {
      for (int64_t N : {1, 3, 64}) {
        const int64_t C = 5, T = 7;
        const dq::WorkspaceCarve w = dq::gru_cell_workspace(path, H, C, N, T);
        int64_t layout_bytes = 0;
        std::array<int64_t, 6> sizes{};
        if (path == dq::GruGemmPath::Int8) {
          const dq::GruGemmLayout l = dq::plan_gru_gemm(H, C, N, T);
          sizes = {l.x_bytes, l.h_bytes, l.gemm_x_bytes, l.gemm_h_bytes, l.state_bytes, l.output_bytes};
          layout_bytes = l.workspace_bytes();
        } else {
          const dq::GruGemmLayout l = dq::plan_gru_wide(H, C, N, T);
          sizes = {l.x_bytes, l.h_bytes, l.gemm_x_bytes, l.gemm_h_bytes, l.state_bytes, l.output_bytes};
          layout_bytes = l.workspace_bytes();
        }
        CHECK(w.total_bytes >= layout_bytes);
        REQUIRE(w.offsets.size() == sizes.size());
        for (size_t i = 0; i < sizes.size(); ++i) {
          CHECK(w.offsets[i] % dq::kWorkspaceAlignment == 0);
          const int64_t end = w.offsets[i] + sizes[i];
          CHECK(end <= (i + 1 < sizes.size() ? w.offsets[i + 1] : w.total_bytes));
        }
        CHECK(w.total_bytes < std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) + 6 * dq::kWorkspaceAlignment);
      }
    }
  }
  CHECK_THROWS_AS(dq::carve_workspace({4, -1}), qgru::Error);
}

TEST_CASE("elementwise kernels cover every (n, j) exactly once and refuse an oversized grid") {
  for (int64_t elements : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{257}, int64_t{64} * 1024, int64_t{33} * 17}) {
    for (int threads : {128, 256}) {
      const int64_t blocks = dq::elementwise_blocks(elements, threads);
      CHECK(blocks * threads >= elements);
      CHECK((blocks - 1) * threads < elements);
    }
  }
  CHECK_THROWS_AS(dq::elementwise_blocks(0, 256), qgru::Error);
  CHECK_THROWS_AS(dq::elementwise_blocks(int64_t{256} * INT32_MAX + 1, 256), qgru::Error);
}
