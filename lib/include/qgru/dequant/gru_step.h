#pragma once
// One element of a GRU time step of the CUDA executor (cuda/src/gru_cell_cuda.cu, gru_step_kernel), QGRU_HD:
// raw accumulators from the int8 GEMM outputs (qgru/dequant/int8_gemm_layout.h), then the shared cell
// function gru_cell_element (qgru/fixed/gru_cell.h), then the new state in all three places it is needed.
// emulate_gru_cell_int8 runs the executor's whole flow on the host, with gemm_int8_tn_reference standing in
// for cublasGemmEx, so the CPU tests check the data flow the GPU runs.
#include <cstdint>
#include <vector>

#include "qgru/dequant/int8_gemm_layout.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/hd.h"

namespace qgru::dequant {

// gemm_x_t: int32 [N, ldc] of this step (stored-x GEMM), gemm_h: int32 [N, ldc] (stored-h GEMM).
// h_state [N, H] int32 codes (read: old, written: new); h8 [N, h8_ld] the stored int8 h for the next GEMM;
// out_t [N, H] the step's output codes.
QGRU_HD void gru_step_element(const GruCellParamsView& view, const int32_t* gemm_x_t, const int32_t* gemm_h, int64_t ldc,
                              int32_t x_offset, int32_t h_offset, int32_t* h_state, int8_t* h8, int64_t h8_ld,
                              int32_t* out_t, int64_t n, int32_t j) {
  const int64_t H = view.hidden_size;
  GruCellAccumulators acc;
  for (int g = 0; g < 3; ++g) {
    const int64_t c = g * H + j;
    acc.gemm_x[g] = raw_gemm_accumulator(gemm_x_t[n * ldc + c], x_offset, view.W_sum[c]);
    acc.gemm_h[g] = raw_gemm_accumulator(gemm_h[n * ldc + c], h_offset, view.R_sum[c]);
  }
  const int32_t q_h_new = gru_cell_element(view, j, acc, h_state[n * H + j], nullptr);
  h_state[n * H + j] = q_h_new;
  h8[n * h8_ld + j] = static_cast<int8_t>(q_h_new - h_offset);  // fits: h's range passed int8_operand_offset
  out_t[n * H + j] = q_h_new;
}

// The executor's flow on the host: pack (offsets, padding), one GEMM for W·x of all steps, per step the R·h
// GEMM and gru_step_element for every (n, j). Returns the hidden codes after each step, [T, N, H] by input
// time. Throws qgru::Error when an operand does not fit the int8 path.
inline std::vector<int32_t> emulate_gru_cell_int8(const GruCellParamsView& view, const int32_t* q_W, const int32_t* q_R,
                                                  int64_t C, const CodeSpace& x_space, const int32_t* q_x, int64_t T,
                                                  int64_t N, const int32_t* q_h0, bool reverse) {
  const int64_t H = view.hidden_size;
  const GruGemmLayout l = plan_gru_gemm(H, C, N, T);
  int32_t x_offset = 0, h_offset = 0;
  const std::string why_x = int8_operand_offset(x_space.q_min, x_space.q_max, x_offset);
  const std::string why_h = int8_operand_offset(view.h.q_min, view.h.q_max, h_offset);
  if (!why_x.empty() || !why_h.empty()) throw Error("int8 GRU path: " + why_x + why_h);
  const auto W8 = pack_int8_rows(q_W, 3 * H, C, l.rows_p, l.C_p, 0, "q_W");
  const auto R8 = pack_int8_rows(q_R, 3 * H, H, l.rows_p, l.H_p, 0, "q_R");
  const auto x8 = pack_int8_rows(q_x, T * N, C, T * N, l.C_p, x_offset, "q_x");
  std::vector<int32_t> h_state(static_cast<size_t>(N * H), view.h.zp);
  if (q_h0 != nullptr) h_state.assign(q_h0, q_h0 + N * H);
  std::vector<int8_t> h8 = pack_int8_rows(h_state.data(), N, H, N, l.H_p, h_offset, "q_h0");
  std::vector<int32_t> gemm_x(static_cast<size_t>(T * N * l.rows_p)), gemm_h(static_cast<size_t>(N * l.rows_p));
  std::vector<int32_t> out(static_cast<size_t>(T * N * H));
  gemm_int8_tn_reference(l.rows_p, T * N, l.C_p, W8.data(), l.C_p, x8.data(), l.C_p, gemm_x.data(), l.rows_p);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    gemm_int8_tn_reference(l.rows_p, N, l.H_p, R8.data(), l.H_p, h8.data(), l.H_p, gemm_h.data(), l.rows_p);
    for (int64_t n = 0; n < N; ++n)
      for (int32_t j = 0; j < H; ++j)
        gru_step_element(view, gemm_x.data() + t * N * l.rows_p, gemm_h.data(), l.rows_p, x_offset, h_offset,
                         h_state.data(), h8.data(), l.H_p, out.data() + t * N * H, n, j);
  }
  return out;
}

}  // namespace qgru::dequant
