// GruCellCuda against the direct CPU loop over the same QGRU_HD cell function (accumulators summed in
// int64, no padding, no operand offsets): any difference is the GPU GEMM path's (padding, offsets, step
// order). The cell is test/unit/kernels/hand_gru_cell.h: H = 33 and C = 5 are not multiples of 4, x and h
// are unsigned 8-bit (the +128 offsets are exercised). Both cells: the linear_before_reset = 0 one has two GEMMs
// and two kernels per step.
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "../unit/kernels/hand_gru_cell.h"
#include "gpu_checks.h"
#include "qgru_cuda/gru_cell_cuda.h"

namespace qgru::cuda_test {

int check_gru_cell() {
  const int H = 33, C = 5, T = 4, N = 3;
  std::mt19937 rng(7);
  std::vector<int32_t> q_x(T * N * C), q_h0(N * H);
  for (auto& x : q_x) x = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
  for (auto& h : q_h0) h = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
  int failures = 0;
  for (bool reset_before_linear : {false, true}) {
  const qgru::test::HandGruCell cell(H, C, 2024, reset_before_linear);
  const cuda::GruCellCuda gpu_cell(cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space);
  for (bool reverse : {false, true}) {
    const std::vector<int32_t> gpu = gpu_cell.run(q_x.data(), T, N, q_h0.data(), reverse);
    const std::vector<int32_t> ref = cell.reference(q_x, T, N, q_h0, reverse);
    int bad = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      if (gpu[i] != ref[i] && ++bad <= 3) {
        std::printf("  mismatch at t=%zu n=%zu j=%zu: gpu %d cpu %d\n", i / (N * H), (i / H) % N, i % H, gpu[i], ref[i]);
      }
    }
    std::printf("%s GRU cell H=%d C=%d T=%d N=%d reverse=%d linear_before_reset=%d: %d mismatching codes\n",
                bad ? "FAIL" : "ok  ", H, C, T, N, reverse ? 1 : 0, reset_before_linear ? 0 : 1, bad);
    failures += bad ? 1 : 0;
  }
  }
  return failures;
}

}  // namespace qgru::cuda_test
