#pragma once
// The host emulations of the CUDA GRU cell (gru_step_test.cpp: the int8 flow; wide_gemm_test.cpp: the 16-bit
// flow) checked against HandGruCell's direct int64 loop.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "hand_gru_cell.h"

namespace qgru::test {

// got ([T, N, H] codes of an emulated cell run) equals cell.reference(q_x, T, N, q_h0, reverse) code for
// code, the first difference named by H, C, direction, t, n and j; and the state moves away from q_h0
// somewhere (a comparison that could fail).
inline void check_cell_flow(const HandGruCell& cell, const std::vector<int32_t>& got, const std::vector<int32_t>& q_x,
                            int T, int N, const std::vector<int32_t>& q_h0, bool reverse) {
  const int H = cell.H, C = cell.C;
  const std::vector<int32_t> want = cell.reference(q_x, T, N, q_h0, reverse);
  REQUIRE(got.size() == want.size());
  int changed = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    REQUIRE_MESSAGE(got[i] == want[i], "H=" << H << " C=" << C << " reverse=" << reverse << " t=" << i / (N * H)
                                            << " n=" << (i / H) % N << " j=" << i % H);
    changed += want[i] != q_h0[i % (N * H)];
  }
  CHECK(changed > 0);
}

}  // namespace qgru::test
