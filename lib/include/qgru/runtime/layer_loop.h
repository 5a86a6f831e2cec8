#pragma once
// The layer / direction loop of every integer executor, written once (docs/FIXED_POINT.md section 5):
// input-code check, each cell's starting h codes, the cells of a layer (directions concatenated into
// [T, N, D*H]), requantization of layer l's output into layer l+1's x space, h_n, dequantization.
// What a cell does over its T steps is a GruCellRunner's business: the reference executor runs the plain
// CPU cell loop (quant_executor.cpp), the CUDA executor (cuda/, qgru_cuda/quant_gru_cuda.h) runs cuBLAS
// GEMMs and the shared elementwise kernel. Both therefore chain layers, start from h0 and requantize with
// the same code (the helpers of qgru/runtime/quant_executor.h), and only the cell can differ.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/quantized_gru.h"

namespace qgru {

class GruCellRunner {
 public:
  virtual ~GruCellRunner() = default;
  // Runs cell (layer, direction) of the model over all T steps (direction 1 visits t = T-1 .. 0).
  //   q_x: [T, N, C_layer] codes in the cell's x space (read only; valid during the call);
  //   q_h: [N, H] the starting codes in the cell's h space on entry, the final state on return;
  //   out: [T, N, out_stride] int32; the cell writes its codes after the step that consumed x[t] at
  //        out[(t·N + n)·out_stride + out_offset + j] and touches no other column.
  virtual void run_cell(int layer, int direction, const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h,
                        int32_t* out, int out_stride, int out_offset) = 0;

  // The run's sequence lengths [N] (set by run_layer_loop before the first cell; null: every row has T
  // steps). A cell leaves row n's state unchanged at steps t >= lengths[n] and writes zp_h (the code of 0.0)
  // there; q_h returns the state after the row's last valid step.
  const int32_t* lengths = nullptr;
};

// For runners whose cell returns its codes as one [T, N, H] array by input time (the CUDA cell,
// kernels::emulate_gru_cell): writes them into out's columns [out_offset, out_offset + H) and sets q_h to
// the state after the last visited step (t = T-1 forward, t = 0 for direction 1; unchanged when T = 0).
// With lengths ([N] or null), row n's final state is its codes at its last valid step (t = lengths[n] - 1
// forward, t = 0 reverse), unchanged for a row of length 0.
// cell_codes_count: the number of codes at cell_codes (must be T·N·H; qgru::Error otherwise).
void store_cell_codes(const int32_t* cell_codes, size_t cell_codes_count, int T, int N, int H, int direction,
                      std::vector<int32_t>& q_h, int32_t* out, int out_stride, int out_offset,
                      const int32_t* lengths = nullptr);
void store_cell_codes(const std::vector<int32_t>& cell_codes, int T, int N, int H, int direction,
                      std::vector<int32_t>& q_h, int32_t* out, int out_stride, int out_offset,
                      const int32_t* lengths = nullptr);

// The whole model on input codes q_x [T, N, C] (range-checked against layer 0's x space; qgru::Error
// otherwise) from q_h0 [L·D, N, H] codes (nullptr: zp_h of each cell). Every cell is run by `runner`, in the
// order l = 0 .. L-1, d = 0 .. D-1. Returns codes and their dequantized values (QuantGruResult).
QuantGruResult run_layer_loop(const QuantizedGru& model, const int32_t* q_x, int T, int N, const int32_t* q_h0,
                              GruCellRunner& runner, const int32_t* lengths = nullptr);

}  // namespace qgru
