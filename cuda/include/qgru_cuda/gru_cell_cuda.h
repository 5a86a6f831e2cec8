#pragma once
// The CUDA GRU executor shell: one quantized GRU cell (one layer, one direction) over all time steps.
//   B-1 once: gemm_x = W·x for every step, cublasGemmEx int8 x int8 -> int32 (CUBLAS_COMPUTE_32I);
//   per step: B-2 gemm_h = R·h (the same call), then ONE elementwise kernel that calls the QGRU_HD cell
//   function gru_cell_element (qgru/fixed/gru_cell.h), the very code the CPU executor runs.
// Layout, padding, operand offsets and workspace: qgru/dequant/int8_gemm_layout.h (host, CPU-tested).
// Host-only API without CUDA headers. Requires a device (NoDevice otherwise).
#include <cstdint>
#include <memory>
#include <vector>

#include "qgru/fixed/gru_cell.h"

namespace qgru::cuda {

class GruCellCuda {
 public:
  // host_view: GruCellQuantParams::view() of the cell (host pointers; every array is copied to the device).
  // q_W: [3H, C] and q_R: [3H, H] weight codes (row-major), which must be signed codes in [-128, 127].
  // x_space: the code space of the cell's input x (h's is in host_view.h). Operands of more than 8 bits
  // throw NotSupported naming the tensor and its range.
  GruCellCuda(const GruCellParamsView& host_view, const int32_t* q_W, const int32_t* q_R, int input_size,
              const CodeSpace& x_space);
  ~GruCellCuda();
  GruCellCuda(GruCellCuda&&) noexcept;
  GruCellCuda& operator=(GruCellCuda&&) noexcept;

  // q_x: [T, N, C] codes in x's space; q_h0: [N, H] codes in h's space or null for zp_h. reverse: visit
  // t = T-1 .. 0. Returns the hidden codes after each step, [T, N, H] indexed by input time t.
  std::vector<int32_t> run(const int32_t* q_x, int T, int N, const int32_t* q_h0, bool reverse) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qgru::cuda
