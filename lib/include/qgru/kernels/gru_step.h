#pragma once
// One element of a GRU time step of the CUDA executor (cuda/src/gru_cell_cuda.cu, gru_step_kernel), QGRU_HD:
// raw accumulators from the GEMM outputs (int8 path: qgru/kernels/int8_gemm_layout.h; 16-bit operands:
// qgru/kernels/wide_gemm.h), then the shared cell
// function gru_cell_element (qgru/fixed/gru_cell.h), then the new state in all three places it is needed.
// emulate_gru_cell_int8 / emulate_gru_cell_wide run the executor's whole flow on the host, with
// gemm_int8_tn_reference standing in for cublasGemmEx and emulate_wide_gemm_tiled for the wide kernel, so
// the CPU tests check the data flow the GPU runs; emulate_gru_cell picks the path as GruCellCuda does.
// The linear_before_reset = 0 cell (view.reset_before_linear, docs/FIXED_POINT.md §3a) has two GEMMs and two
// element kernels per step: R's z and r rows against h, gru_reset_hidden_element_t writing q_reset_hidden (stored
// like h), R's n rows (packed apart, Rn) against it into gemm_rh, then gru_step_element_t reading its n channel
// from gemm_rh.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/kernels/int8_gemm_layout.h"
#include "qgru/kernels/wide_gemm.h"
#include "qgru/kernels/workspace.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/hd.h"

namespace qgru::kernels {

// gemm_x_t: [N, ldc] of this step (stored-x GEMM), gemm_h: [N, ldc] (stored-h GEMM); Acc is int32_t for the
// int8 path (cuBLAS) and int64_t for the wide path (qgru/kernels/wide_gemm.h).
// h_state [N, H] int32 codes (read: old, written: new); h_stored [N, h_ld] the stored h (int8 or int16, code
// minus h_offset) for the next GEMM; out_t [N, H] the step's output codes.
// lengths: [N] or null; at a step t >= lengths[n] (padding) the element leaves h_state and h_stored as they are
// and writes zp_h (the code of 0.0) to out_t.
// gemm_rh: [N, ldc_rh] the linear_before_reset = 0 cell's second GEMM (R_n against q_reset_hidden stored with
// h_offset), whose column j is the n channel's accumulator; null for the other cell (gemm_h's n channel).
template <class Acc, class Stored>
QGRU_HD void gru_step_element_t(const GruCellParamsView& view, const Acc* gemm_x_t, const Acc* gemm_h, int64_t ldc,
                                int32_t x_offset, int32_t h_offset, int32_t* h_state, Stored* h_stored, int64_t h_ld,
                                int32_t* out_t, int64_t n, int32_t j, const int32_t* lengths = nullptr, int64_t t = 0,
                                const Acc* gemm_rh = nullptr, int64_t ldc_rh = 0) {
  const int64_t H = view.hidden_size;
  const bool padding = lengths != nullptr && t >= lengths[n];
  if (!padding) {
    GruCellAccumulators acc;
    for (int g = 0; g < 3; ++g) {
      const int64_t c = g * H + j;
      acc.gemm_x[g] = raw_gemm_accumulator(gemm_x_t[n * ldc + c], x_offset, view.W_sum[c]);
      const Acc stored_h = g == 2 && gemm_rh != nullptr ? gemm_rh[n * ldc_rh + j] : gemm_h[n * ldc + c];
      acc.gemm_h[g] = raw_gemm_accumulator(stored_h, h_offset, view.R_sum[c]);  // q_reset_hidden is stored like h
    }
    const int32_t q_h_new = gru_cell_element(view, j, acc, h_state[n * H + j], nullptr);
    h_state[n * H + j] = q_h_new;
    // Fits Stored: h's code range passed int8_operand_offset / int16_operand_offset with this offset.
    h_stored[n * h_ld + j] = static_cast<Stored>(q_h_new - h_offset);
  }
  out_t[n * H + j] = padding ? view.h.zp : h_state[n * H + j];
}

// The linear_before_reset = 0 cell's first element kernel: q_reset_hidden[n, j] (C-2a, from the r channel's raw
// accumulators and the old state) stored as q - h_offset at rh_stored[n·h_ld + j], the operand of the second GEMM.
// Padding rows compute it too (their second GEMM rows are never read).
template <class Acc, class Stored>
QGRU_HD void gru_reset_hidden_element_t(const GruCellParamsView& view, const Acc* gemm_x_t, const Acc* gemm_h, int64_t ldc,
                                        int32_t x_offset, int32_t h_offset, const int32_t* h_state, Stored* rh_stored,
                                        int64_t h_ld, int64_t n, int32_t j) {
  const int64_t c = view.hidden_size + j;
  const int32_t q_reset_hidden = gru_cell_reset_hidden(view, j, raw_gemm_accumulator(gemm_x_t[n * ldc + c], x_offset, view.W_sum[c]),
                                                       raw_gemm_accumulator(gemm_h[n * ldc + c], h_offset, view.R_sum[c]),
                                                       h_state[n * view.hidden_size + j]);
  // Fits Stored: q_reset_hidden lies in h's code range, which passed the operand offset check with h_offset.
  rh_stored[n * h_ld + j] = static_cast<Stored>(q_reset_hidden - h_offset);
}

// Which GEMM path a cell takes and its operand offsets.
//   Int8:   W, R signed codes in [-128, 127], x and h fit int8 after an offset of 0 or 128: cuBLAS IMMA
//           (int32 accumulation, exact: qgru/kernels/int8_gemm_layout.h);
//   Wide16: W, R signed codes in [-32768, 32767], x and h fit int16 after an offset of 0 or 32768: the
//           wide kernel (int64 accumulation, exact: qgru/kernels/wide_gemm.h).
enum class GruGemmPath { Int8, Wide16 };

struct GruOperandPlan {
  GruGemmPath path = GruGemmPath::Int8;
  int32_t x_offset = 0, h_offset = 0;
  std::string refused;  // non-empty: no path takes these operands (the reason)
};

// The wide kernel's plan: weights must be signed 16-bit codes, x and h fit int16 after an offset of 0 or 32768.
inline GruOperandPlan plan_wide_operands(int32_t W_min, int32_t W_max, int32_t R_min, int32_t R_max,
                                         const CodeSpace& x_space, const CodeSpace& h_space) {
  GruOperandPlan plan;
  plan.path = GruGemmPath::Wide16;
  const int32_t lo = W_min < R_min ? W_min : R_min, hi = W_max > R_max ? W_max : R_max;
  if (lo < -32768 || hi > 32767) {
    plan.refused = "weights with codes in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] are not signed 16-bit codes";
    return plan;
  }
  const std::string why_x = int16_operand_offset(x_space.q_min, x_space.q_max, plan.x_offset);
  const std::string why_h = int16_operand_offset(h_space.q_min, h_space.q_max, plan.h_offset);
  if (!why_x.empty()) plan.refused = "x: " + why_x;
  else if (!why_h.empty()) plan.refused = "h: " + why_h;
  return plan;
}

// Int8 when every operand fits it, else Wide16 (or refused). GruCellCuda also takes plan_wide_operands for an
// int8 cell when cuBLAS answers NOT_SUPPORTED for its shapes: the wide kernel is exact for 8-bit operands too.
inline GruOperandPlan plan_gru_operands(int32_t W_min, int32_t W_max, int32_t R_min, int32_t R_max,
                                        const CodeSpace& x_space, const CodeSpace& h_space) {
  GruOperandPlan plan;
  const auto weights_fit = [&](int32_t bound) { return W_min >= -bound && W_max <= bound - 1 && R_min >= -bound && R_max <= bound - 1; };
  if (weights_fit(128) && int8_operand_offset(x_space.q_min, x_space.q_max, plan.x_offset).empty() &&
      int8_operand_offset(h_space.q_min, h_space.q_max, plan.h_offset).empty()) {
    plan.path = GruGemmPath::Int8;
    return plan;
  }
  return plan_wide_operands(W_min, W_max, R_min, R_max, x_space, h_space);
}

// The device workspace of one run of a cell (GruCellCuda::run), carved once: regions in the order
// x (all steps), h (stored), gemm_x, gemm_h, h state, output codes, and for the linear_before_reset = 0 cell
// q_reset_hidden (stored) and gemm_rh, sized by the path's layout.
inline WorkspaceCarve gru_cell_workspace(GruGemmPath path, int64_t H, int64_t C, int64_t N, int64_t T,
                                         bool reset_before_linear = false) {
  const GruGemmLayout l = path == GruGemmPath::Int8 ? plan_gru_gemm(H, C, N, T) : plan_gru_wide(H, C, N, T);
  if (reset_before_linear) {
    return carve_workspace({l.x_bytes, l.h_bytes, l.gemm_x_bytes, l.gemm_h_bytes, l.state_bytes, l.output_bytes,
                            l.rh_bytes, l.gemm_rh_bytes});
  }
  return carve_workspace({l.x_bytes, l.h_bytes, l.gemm_x_bytes, l.gemm_h_bytes, l.state_bytes, l.output_bytes});
}

// The wide path's flow on the host, as the executor runs it: pack int16 (offsets, padding), one wide GEMM for
// W·x of all steps, per step the R·h wide GEMM and gru_step_element_t<int64_t, int16_t> for every (n, j); the
// GEMMs run emulate_wide_gemm_tiled (the kernel's own block loop). Returns [T, N, H] by input time.
inline std::vector<int32_t> emulate_gru_cell_wide(const GruCellParamsView& view, const int32_t* q_W, const int32_t* q_R,
                                                  int64_t C, int32_t x_offset, int32_t h_offset, const int32_t* q_x,
                                                  int64_t T, int64_t N, const int32_t* q_h0, bool reverse,
                                                  const int32_t* lengths = nullptr) {
  const int64_t H = view.hidden_size;
  const GruGemmLayout l = plan_gru_wide(H, C, N, T);
  const bool rbl = view.reset_before_linear;
  const auto W16 = pack_int16_rows(q_W, l.rows_p, C, l.rows_p, l.C_p, 0, "q_W");
  const auto R16 = pack_int16_rows(q_R, l.rows_p, H, l.rows_p, l.H_p, 0, "q_R");
  const auto Rn16 = rbl ? pack_int16_rows(q_R + 2 * H * H, H, H, l.rows_n_p, l.H_p, 0, "q_R (n rows)") : std::vector<int16_t>();
  const auto x16 = pack_signed_steps<int16_t>(q_x, T, N, C, l.N_p, l.C_p, x_offset, "q_x");
  std::vector<int32_t> h_state(static_cast<size_t>(N * H), view.h.zp);
  if (q_h0 != nullptr) h_state.assign(q_h0, q_h0 + N * H);
  std::vector<int16_t> h16 = pack_signed_steps<int16_t>(h_state.data(), 1, N, H, l.N_p, l.H_p, h_offset, "q_h0");
  std::vector<int16_t> rh16(rbl ? static_cast<size_t>(l.N_p * l.H_p) : 0, 0);
  std::vector<int64_t> gemm_x(static_cast<size_t>(T * l.N_p * l.rows_p)), gemm_h(static_cast<size_t>(l.N_p * l.rows_p));
  std::vector<int64_t> gemm_rh(rbl ? static_cast<size_t>(l.N_p * l.rows_n_p) : 0);
  std::vector<int32_t> out(static_cast<size_t>(T * N * H));
  emulate_wide_gemm_tiled(plan_wide_gemm(l.rows_p, T * l.N_p, l.C_p), W16.data(), l.C_p, x16.data(), l.C_p, gemm_x.data(),
                          l.rows_p);
  const WideGemmGeometry step_gemm = plan_wide_gemm(rbl ? l.rows_zr_p : l.rows_p, l.N_p, l.H_p);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    const int64_t* gemm_x_t = gemm_x.data() + t * l.N_p * l.rows_p;
    emulate_wide_gemm_tiled(step_gemm, R16.data(), l.H_p, h16.data(), l.H_p, gemm_h.data(), l.rows_p);
    if (rbl) {
      for (int64_t n = 0; n < N; ++n)
        for (int32_t j = 0; j < H; ++j)
          gru_reset_hidden_element_t<int64_t, int16_t>(view, gemm_x_t, gemm_h.data(), l.rows_p, x_offset, h_offset,
                                                       h_state.data(), rh16.data(), l.H_p, n, j);
      emulate_wide_gemm_tiled(plan_wide_gemm(l.rows_n_p, l.N_p, l.H_p), Rn16.data(), l.H_p, rh16.data(), l.H_p,
                              gemm_rh.data(), l.rows_n_p);
    }
    for (int64_t n = 0; n < N; ++n)
      for (int32_t j = 0; j < H; ++j)
        gru_step_element_t<int64_t, int16_t>(view, gemm_x_t, gemm_h.data(), l.rows_p, x_offset, h_offset, h_state.data(),
                                             h16.data(), l.H_p, out.data() + t * N * H, n, j, lengths, t,
                                             rbl ? gemm_rh.data() : nullptr, l.rows_n_p);
  }
  return out;
}

// The executor's flow on the host: pack (offsets, padding), one GEMM for W·x of all steps, per step the R·h
// GEMM and gru_step_element_t for every (n, j) (the linear_before_reset = 0 cell: both GEMMs and both element
// functions). Returns the hidden codes after each step, [T, N, H] by input
// time. Throws qgru::Error when an operand does not fit the int8 path.
inline std::vector<int32_t> emulate_gru_cell_int8(const GruCellParamsView& view, const int32_t* q_W, const int32_t* q_R,
                                                  int64_t C, const CodeSpace& x_space, const int32_t* q_x, int64_t T,
                                                  int64_t N, const int32_t* q_h0, bool reverse,
                                                  const int32_t* lengths = nullptr) {
  const int64_t H = view.hidden_size;
  const GruGemmLayout l = plan_gru_gemm(H, C, N, T);
  int32_t x_offset = 0, h_offset = 0;
  const std::string why_x = int8_operand_offset(x_space.q_min, x_space.q_max, x_offset);
  const std::string why_h = int8_operand_offset(view.h.q_min, view.h.q_max, h_offset);
  if (!why_x.empty() || !why_h.empty()) throw Error("int8 GRU path: " + why_x + why_h);
  const bool rbl = view.reset_before_linear;
  const auto W8 = pack_int8_rows(q_W, 3 * H, C, l.rows_p, l.C_p, 0, "q_W");
  const auto R8 = pack_int8_rows(q_R, 3 * H, H, l.rows_p, l.H_p, 0, "q_R");
  const auto Rn8 = rbl ? pack_int8_rows(q_R + 2 * H * H, H, H, l.rows_n_p, l.H_p, 0, "q_R (n rows)") : std::vector<int8_t>();
  const auto x8 = pack_signed_steps<int8_t>(q_x, T, N, C, l.N_p, l.C_p, x_offset, "q_x");
  std::vector<int32_t> h_state(static_cast<size_t>(N * H), view.h.zp);
  if (q_h0 != nullptr) h_state.assign(q_h0, q_h0 + N * H);
  std::vector<int8_t> h8 = pack_signed_steps<int8_t>(h_state.data(), 1, N, H, l.N_p, l.H_p, h_offset, "q_h0");
  std::vector<int8_t> rh8(rbl ? static_cast<size_t>(l.N_p * l.H_p) : 0, 0);  // zeroed once, like the device's
  // The padded batch rows n >= N of the GEMM outputs are computed (from zero rows) and never read; so are the
  // linear_before_reset = 0 cell's gemm_h rows past rows_zr_p (its first GEMM stops there).
  std::vector<int32_t> gemm_x(static_cast<size_t>(T * l.N_p * l.rows_p), -1), gemm_h(static_cast<size_t>(l.N_p * l.rows_p), -1);
  std::vector<int32_t> gemm_rh(rbl ? static_cast<size_t>(l.N_p * l.rows_n_p) : 0, -1);
  std::vector<int32_t> out(static_cast<size_t>(T * N * H));
  gemm_int8_tn_reference(l.rows_p, T * l.N_p, l.C_p, W8.data(), l.C_p, x8.data(), l.C_p, gemm_x.data(), l.rows_p);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    const int32_t* gemm_x_t = gemm_x.data() + t * l.N_p * l.rows_p;
    gemm_int8_tn_reference(rbl ? l.rows_zr_p : l.rows_p, l.N_p, l.H_p, R8.data(), l.H_p, h8.data(), l.H_p, gemm_h.data(),
                           l.rows_p);
    if (rbl) {
      for (int64_t n = 0; n < N; ++n)
        for (int32_t j = 0; j < H; ++j)
          gru_reset_hidden_element_t<int32_t, int8_t>(view, gemm_x_t, gemm_h.data(), l.rows_p, x_offset, h_offset,
                                                      h_state.data(), rh8.data(), l.H_p, n, j);
      gemm_int8_tn_reference(l.rows_n_p, l.N_p, l.H_p, Rn8.data(), l.H_p, rh8.data(), l.H_p, gemm_rh.data(), l.rows_n_p);
    }
    for (int64_t n = 0; n < N; ++n)
      for (int32_t j = 0; j < H; ++j)
        gru_step_element_t<int32_t, int8_t>(view, gemm_x_t, gemm_h.data(), l.rows_p, x_offset, h_offset, h_state.data(),
                                            h8.data(), l.H_p, out.data() + t * N * H, n, j, lengths, t,
                                            rbl ? gemm_rh.data() : nullptr, l.rows_n_p);
  }
  return out;
}

// The executor's cell on the host, whichever path plan_gru_operands picks (what GruCellCuda::run computes).
// Throws qgru::Error when no path takes the operands.
inline std::vector<int32_t> emulate_gru_cell(const GruCellParamsView& view, const int32_t* q_W, const int32_t* q_R,
                                             int64_t C, const CodeSpace& x_space, const int32_t* q_x, int64_t T, int64_t N,
                                             const int32_t* q_h0, bool reverse, const int32_t* lengths = nullptr) {
  const int64_t rows = 3 * static_cast<int64_t>(view.hidden_size);
  const auto W_range = std::minmax_element(q_W, q_W + rows * C);
  const auto R_range = std::minmax_element(q_R, q_R + rows * view.hidden_size);
  const GruOperandPlan plan = plan_gru_operands(*W_range.first, *W_range.second, *R_range.first, *R_range.second, x_space, view.h);
  if (!plan.refused.empty()) throw Error("GRU cell GEMM operands: " + plan.refused);
  if (plan.path == GruGemmPath::Int8) return emulate_gru_cell_int8(view, q_W, q_R, C, x_space, q_x, T, N, q_h0, reverse, lengths);
  return emulate_gru_cell_wide(view, q_W, q_R, C, plan.x_offset, plan.h_offset, q_x, T, N, q_h0, reverse, lengths);
}

}  // namespace qgru::kernels
