#pragma once
// A hand-made, valid-by-construction GRU cell for the int8 executor tests (CPU: gru_step_test.cpp; GPU:
// test/cuda/gru_cell_check.cpp): random int8 weights, table activations, unsigned 8-bit x and h (so the
// +128 operand offsets are exercised), and a direct CPU loop over gru_cell_element with accumulators summed
// in int64 (no padding, no offsets) as the reference. reset_before_linear: the linear_before_reset = 0 cell (its
// reference: R's n rows against q_reset_hidden of every unit, docs/FIXED_POINT.md §3a).
#include <cstdint>
#include <random>
#include <vector>

#include "qgru/fixed/gru_cell.h"

namespace qgru::test {

struct HandGruCell {
  int H = 0, C = 0;
  std::vector<int32_t> q_W, q_R, q_bw, q_br, zeros, shift8, shift9;
  std::vector<int64_t> W_sum, R_sum;
  std::vector<int32_t> sigmoid_table, tanh_table;
  GruCellParamsView view{};
  CodeSpace x_space{100, 0, 255};

  HandGruCell(int hidden, int input, uint32_t seed, bool reset_before_linear = false) : H(hidden), C(input) {
    const int rows = 3 * H;
    std::mt19937 rng(seed);
    auto uniform = [&](int lo, int hi) {
      return lo + static_cast<int>(static_cast<uint32_t>(rng()) % static_cast<uint32_t>(hi - lo + 1));
    };
    q_W.resize(static_cast<size_t>(rows * C));
    q_R.resize(static_cast<size_t>(rows * H));
    q_bw.resize(static_cast<size_t>(rows));
    q_br.resize(static_cast<size_t>(rows));
    zeros.assign(static_cast<size_t>(rows), 0);
    shift8.assign(static_cast<size_t>(rows), 8);
    shift9.assign(static_cast<size_t>(rows), 9);
    for (auto& v : q_W) v = uniform(-127, 127);
    for (auto& v : q_R) v = uniform(-127, 127);
    for (auto& v : q_bw) v = uniform(-2000, 2000);
    for (auto& v : q_br) v = uniform(-2000, 2000);
    W_sum.assign(static_cast<size_t>(rows), 0);
    R_sum.assign(static_cast<size_t>(rows), 0);
    for (int c = 0; c < rows; ++c) {
      for (int k = 0; k < C; ++k) W_sum[static_cast<size_t>(c)] += q_W[static_cast<size_t>(c * C + k)];
      for (int k = 0; k < H; ++k) R_sum[static_cast<size_t>(c)] += q_R[static_cast<size_t>(c * H + k)];
    }
    sigmoid_table.resize(256);
    tanh_table.resize(256);
    for (int q = -128; q < 128; ++q) {
      sigmoid_table[static_cast<size_t>(q + 128)] = q < -64 ? 0 : q >= 64 ? 127 : (q + 64);  // codes [0, 127]
      tanh_table[static_cast<size_t>(q + 128)] = q / 2;                                      // codes [-64, 63]
    }
    view.hidden_size = H;
    view.W_sum = W_sum.data();
    view.q_bw = q_bw.data();
    view.shift_bw_to_gemm_x = zeros.data();
    view.shift_gemm_x_to_weight_ih_linear = shift8.data();
    view.zp_x = x_space.zp;
    view.R_sum = R_sum.data();
    view.q_br = q_br.data();
    view.shift_br_to_gemm_h = zeros.data();
    view.shift_gemm_h_to_weight_hh_linear = shift9.data();
    view.h = {128, 0, 255};
    view.weight_ih_linear = {0, -128, 127};
    view.weight_hh_linear = {0, -128, 127};
    view.update_gate_input = {0, -128, 127};
    view.reset_gate_input = {0, -128, 127};
    view.new_gate_input = {0, -128, 127};
    view.zp_update_gate_output = 0;
    view.zp_reset_gate_output = 0;
    view.zp_new_gate_output = 0;
    view.shift_weight_ih_linear_to_update_gate_input = 1;
    view.shift_weight_hh_linear_to_update_gate_input = 1;
    view.shift_weight_ih_linear_to_reset_gate_input = 1;
    view.shift_weight_hh_linear_to_reset_gate_input = 1;
    view.shift_weight_ih_linear_to_new_gate_input = 1;
    view.shift_reset_mul_hh_to_new_gate_input = reset_before_linear ? 0 : 7;
    view.reset_before_linear = reset_before_linear;
    view.shift_reset_mul_h_to_h = reset_before_linear ? 7 : 0;  // r codes [0, 127] at 2^-7
    view.shift_weight_hh_linear_to_new_gate_input = reset_before_linear ? 1 : 0;
    view.quant_one_in_update_gate_scale = 128;
    view.shift_new_gate_output_to_h = -1;
    view.shift_update_gate_output = 7;
    view.update_gate = table(sigmoid_table, 0, 127);
    view.reset_gate = table(sigmoid_table, 0, 127);
    view.new_gate = table(tanh_table, -64, 63);
  }
  HandGruCell(const HandGruCell&) = delete;  // the view points into this object
  HandGruCell& operator=(const HandGruCell&) = delete;

  static ActivationView table(const std::vector<int32_t>& t, int32_t out_min, int32_t out_max) {
    ActivationView a{};
    a.impl = ActivationImpl::Table;
    a.q_in_min = -128;
    a.q_in_max = 127;
    a.q_out_min = out_min;
    a.q_out_max = out_max;
    a.table = t.data();
    return a;
  }

  // Direct reference: [T, N, H] hidden codes after each step, by input time.
  std::vector<int32_t> reference(const std::vector<int32_t>& q_x, int T, int N, const std::vector<int32_t>& q_h0,
                                 bool reverse) const {
    std::vector<int32_t> h = q_h0, out(static_cast<size_t>(T * N * H));
    for (int s = 0; s < T; ++s) {
      const int t = reverse ? T - 1 - s : s;
      std::vector<int32_t> next(static_cast<size_t>(N * H));
      for (int n = 0; n < N; ++n) {
        // The linear_before_reset = 0 cell: r ⊙ h of every unit of the row first (from the r channel's sums).
        std::vector<int32_t> q_reset_hidden(static_cast<size_t>(H));
        for (int j = 0; view.reset_before_linear && j < H; ++j) {
          const int c = H + j;
          int64_t gx = 0, gh = 0;
          for (int k = 0; k < C; ++k) gx += int64_t{q_W[static_cast<size_t>(c * C + k)]} * q_x[static_cast<size_t>((t * N + n) * C + k)];
          for (int k = 0; k < H; ++k) gh += int64_t{q_R[static_cast<size_t>(c * H + k)]} * h[static_cast<size_t>(n * H + k)];
          q_reset_hidden[static_cast<size_t>(j)] = gru_cell_reset_hidden(view, j, gx, gh, h[static_cast<size_t>(n * H + j)]);
        }
        for (int j = 0; j < H; ++j) {
          GruCellAccumulators acc{};
          for (int g = 0; g < 3; ++g) {
            const int c = g * H + j;
            for (int k = 0; k < C; ++k)
              acc.gemm_x[g] += int64_t{q_W[static_cast<size_t>(c * C + k)]} * q_x[static_cast<size_t>((t * N + n) * C + k)];
            const bool against_rh = view.reset_before_linear && g == 2;
            for (int k = 0; k < H; ++k)
              acc.gemm_h[g] += int64_t{q_R[static_cast<size_t>(c * H + k)]} *
                               (against_rh ? q_reset_hidden[static_cast<size_t>(k)] : h[static_cast<size_t>(n * H + k)]);
          }
          next[static_cast<size_t>(n * H + j)] = gru_cell_element(view, j, acc, h[static_cast<size_t>(n * H + j)], nullptr);
        }
      }
      h = next;
      for (int i = 0; i < N * H; ++i) out[static_cast<size_t>(t * N * H + i)] = h[static_cast<size_t>(i)];
    }
    return out;
  }
};

}  // namespace qgru::test
