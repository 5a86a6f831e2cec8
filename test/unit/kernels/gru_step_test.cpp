// The CUDA GRU executor's data flow on the host (emulate_gru_cell_int8: packing with offsets and padding,
// the TN int8 GEMMs, gru_step_element per element, step order) against the direct int64 cell loop.
#include <doctest/doctest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "cell_reference_check.h"
#include "hand_gru_cell.h"
#include "qgru/kernels/gru_step.h"

TEST_CASE("int8 executor flow equals the direct cell loop, forward and reverse, H, C and N off multiples of 16") {
  for (int H : {1, 31, 33}) {
    for (int C : {1, 5, 8}) {
      const qgru::test::HandGruCell cell(H, C, static_cast<uint32_t>(H * 100 + C));
      const int T = 4, N = H == 31 ? 17 : 3;  // N = 17: two padded batch blocks of 16
      std::mt19937 rng(static_cast<uint32_t>(H + C));
      std::vector<int32_t> q_x(static_cast<size_t>(T * N * C)), q_h0(static_cast<size_t>(N * H));
      for (auto& x : q_x) x = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
      for (auto& h : q_h0) h = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
      for (bool reverse : {false, true}) {
        const std::vector<int32_t> got = qgru::kernels::emulate_gru_cell_int8(
            cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space, q_x.data(), T, N, q_h0.data(), reverse);
        qgru::test::check_cell_flow(cell, got, q_x, T, N, q_h0, reverse);
      }
    }
  }
}

TEST_CASE("the linear_before_reset = 0 cell's two-GEMM step equals the direct loop on both paths (int8, wide), H off 16") {
  // R's z and r rows against h (m = rows_zr_p), q_reset_hidden stored with h's offset, R's n rows packed apart
  // against it (m = rows_n_p), the step element reading gemm_rh: against HandGruCell's direct loop.
  for (int H : {1, 17, 33}) {
    const int C = 5, T = 4, N = H == 17 ? 17 : 3;
    const qgru::test::HandGruCell cell(H, C, static_cast<uint32_t>(H * 31 + 7), /*reset_before_linear=*/true);
    std::mt19937 rng(static_cast<uint32_t>(H + 3));
    std::vector<int32_t> q_x(static_cast<size_t>(T * N * C)), q_h0(static_cast<size_t>(N * H));
    for (auto& x : q_x) x = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
    for (auto& h : q_h0) h = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
    const qgru::kernels::GruOperandPlan wide = qgru::kernels::plan_wide_operands(-127, 127, -127, 127, cell.x_space, cell.view.h);
    REQUIRE(wide.refused.empty());
    for (bool reverse : {false, true}) {
      CAPTURE(reverse);
      qgru::test::check_cell_flow(cell,
                                  qgru::kernels::emulate_gru_cell_int8(cell.view, cell.q_W.data(), cell.q_R.data(), C,
                                                                       cell.x_space, q_x.data(), T, N, q_h0.data(), reverse),
                                  q_x, T, N, q_h0, reverse);
      qgru::test::check_cell_flow(cell,
                                  qgru::kernels::emulate_gru_cell_wide(cell.view, cell.q_W.data(), cell.q_R.data(), C,
                                                                       wide.x_offset, wide.h_offset, q_x.data(), T, N,
                                                                       q_h0.data(), reverse),
                                  q_x, T, N, q_h0, reverse);
    }
    // The direct loop itself tells the two cells apart on these codes.
    const qgru::test::HandGruCell other(H, C, static_cast<uint32_t>(H * 31 + 7), /*reset_before_linear=*/false);
    CHECK(other.reference(q_x, T, N, q_h0, false) != cell.reference(q_x, T, N, q_h0, false));
  }
}

TEST_CASE("int8 executor flow refuses activations wider than 8 bits") {
  const qgru::test::HandGruCell cell(4, 4, 1);
  const std::vector<int32_t> q_x(4 * 1 * 4, 0);
  const qgru::CodeSpace wide{0, 0, 511};
  CHECK_THROWS_WITH_AS(qgru::kernels::emulate_gru_cell_int8(cell.view, cell.q_W.data(), cell.q_R.data(), 4, wide,
                                                            q_x.data(), 1, 1, nullptr, false),
                       doctest::Contains("[0, 511]"), qgru::Error);
}

TEST_CASE("the wide kernel runs an int8 cell exactly: the fallback when cuBLAS answers NOT_SUPPORTED") {
  for (int H : {1, 17, 33}) {
    const int C = 5, T = 3, N = 2;
    const qgru::test::HandGruCell cell(H, C, static_cast<uint32_t>(H + 7));
    const qgru::kernels::GruOperandPlan plan = qgru::kernels::plan_wide_operands(-127, 127, -127, 127, cell.x_space, cell.view.h);
    REQUIRE(plan.refused.empty());
    CHECK(plan.path == qgru::kernels::GruGemmPath::Wide16);
    CHECK(plan.x_offset == 0);  // unsigned 8-bit codes fit int16 as they are
    std::mt19937 rng(static_cast<uint32_t>(H));
    std::vector<int32_t> q_x(static_cast<size_t>(T * N * C)), q_h0(static_cast<size_t>(N * H));
    for (auto& x : q_x) x = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
    for (auto& h : q_h0) h = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
    for (bool reverse : {false, true}) {
      const std::vector<int32_t> got = qgru::kernels::emulate_gru_cell_wide(cell.view, cell.q_W.data(), cell.q_R.data(), C,
                                                                            plan.x_offset, plan.h_offset, q_x.data(), T, N,
                                                                            q_h0.data(), reverse);
      qgru::test::check_cell_flow(cell, got, q_x, T, N, q_h0, reverse);
    }
  }
}
