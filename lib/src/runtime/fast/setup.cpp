// The fast executor's ISA-free setup (contracts in fast_kernels.h), made once per model at load: the VNNI weight
// layout (pack_vnni_u8s8, which the avx2 level's packed GEMMs read too), the byte form of the activation tables,
// the int32 cell's proof (cell_fits_int32) and its constants (prepare_cell32_plan, cell32_sum_fold). Plain C++:
// both levels' cell kernels read what it prepares.
#include "../model/cell_bounds.h"
#include "fast_kernels.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace qgru::fast {

void pack_vnni_u8s8(const int8_t* W, int rows, int Kp, int8_t* Bp) {
  const int groups = vnni_padded_rows(rows) / 64;
  const int K4 = Kp / 4;
  for (int g = 0; g < groups; ++g) {
    for (int k4 = 0; k4 < K4; ++k4) {
      for (int r = 0; r < 64; ++r) {  // r = 16·bb + lane
        const int row = 64 * g + r;
        for (int i = 0; i < 4; ++i) {
          const size_t dst = ((static_cast<size_t>(g) * K4 + k4) * 64 + r) * 4 + i;
          Bp[dst] = row < rows ? W[static_cast<size_t>(row) * Kp + 4 * k4 + i] : int8_t{0};
        }
      }
    }
  }
}

void prepare_byte_tables(const GruCellParamsView& p, CellByteTables* out) {
  const ActivationView* gates[3] = {&p.update_gate, &p.reset_gate, &p.new_gate};
  for (int g = 0; g < 3; ++g) {
    const ActivationView& a = *gates[g];
    std::memset(out->table[g], 0, sizeof(out->table[g]));
    out->bytes[g] = false;
    out->is_signed[g] = false;
    const int64_t count = static_cast<int64_t>(a.q_in_max) - a.q_in_min + 1;
    if (a.impl != ActivationImpl::Table || count <= 0 || count > 256) continue;
    int32_t lo = 0, hi = 0;
    for (int64_t i = 0; i < count; ++i) {
      lo = std::min(lo, a.table[i]);
      hi = std::max(hi, a.table[i]);
    }
    if (lo >= 0 && hi <= 255) {
      out->bytes[g] = true;
    } else if (lo >= -128 && hi <= 127) {
      out->bytes[g] = true;
      out->is_signed[g] = true;
    }
    if (out->bytes[g]) {
      for (int64_t i = 0; i < count; ++i) out->table[g][i] = static_cast<int8_t>(a.table[i]);  // u8 or i8 bits
    }
  }
}

namespace {
constexpr int64_t kLane32Limit = int64_t{1} << 30;  // every intermediate of the int32 cell stays within ±2^30

// cell_bounds.h's shifted_bound against the int32 lane limit (2^62 when the result would exceed it).
int64_t shifted_bound(int64_t b, int s) { return fast::shifted_bound(b, s, kLane32Limit, 31); }
}  // namespace

bool cell_fits_int32(const GruCellParamsView& p, int64_t gemm_x_max_abs, int64_t gemm_h_max_abs,
                     const int64_t* offset_x, const int64_t* offset_h) {
  const int64_t L = kLane32Limit;
  const int H = p.hidden_size;
  if (p.shift_update_gate_output > 62) return false;
  // B-1 / B-2: accumulator + folded offset, shifted, plus the linear's zero point
  for (int c = 0; c < 3 * H; ++c) {
    const int64_t sx = gemm_x_max_abs + std::abs(offset_x[c]);
    const int64_t sh = gemm_h_max_abs + std::abs(offset_h[c]);
    if (sx > L || sh > L) return false;
    if (shifted_bound(sx, p.shift_gemm_x_to_weight_ih_linear[c]) + std::abs(int64_t{p.weight_ih_linear.zp}) > L) return false;
    if (shifted_bound(sh, p.shift_gemm_h_to_weight_hh_linear[c]) + std::abs(int64_t{p.weight_hh_linear.zp}) > L) return false;
  }
  const int64_t d_ih = max_abs_diff(p.weight_ih_linear.q_min, p.weight_ih_linear.q_max, p.weight_ih_linear.zp);
  const int64_t d_hh = max_abs_diff(p.weight_hh_linear.q_min, p.weight_hh_linear.q_max, p.weight_hh_linear.zp);
  // C-1, C-2: two shifted terms plus the gate input's zero point
  if (shifted_bound(d_ih, p.shift_weight_ih_linear_to_update_gate_input) +
          shifted_bound(d_hh, p.shift_weight_hh_linear_to_update_gate_input) + std::abs(int64_t{p.update_gate_input.zp}) > L) {
    return false;
  }
  if (shifted_bound(d_ih, p.shift_weight_ih_linear_to_reset_gate_input) +
          shifted_bound(d_hh, p.shift_weight_hh_linear_to_reset_gate_input) + std::abs(int64_t{p.reset_gate_input.zp}) > L) {
    return false;
  }
  // C-3: the product r_diff·hh_diff, then two shifted terms plus the zero point
  const int64_t d_r = max_abs_diff(p.reset_gate.q_out_min, p.reset_gate.q_out_max, p.zp_reset_gate_output);
  if (d_r * d_hh > L) return false;
  if (shifted_bound(d_r * d_hh, p.shift_reset_mul_hh_to_new_gate_input) +
          shifted_bound(d_ih, p.shift_weight_ih_linear_to_new_gate_input) + std::abs(int64_t{p.new_gate_input.zp}) > L) {
    return false;
  }
  // C-4: n aligned to h (without its zero point), 1 - u, the two products and their sum
  const int64_t d_n = max_abs_diff(p.new_gate.q_out_min, p.new_gate.q_out_max, p.zp_new_gate_output);
  const int64_t n_aligned = shifted_bound(d_n, p.shift_new_gate_output_to_h);
  const int64_t d_u = max_abs_diff(p.update_gate.q_out_min, p.update_gate.q_out_max, p.zp_update_gate_output);
  const int64_t d_h = max_abs_diff(p.h.q_min, p.h.q_max, p.h.zp);
  const int64_t one = p.quant_one_in_update_gate_scale;
  if (std::abs(one) > L || n_aligned > L) return false;
  const int64_t one_minus_u = std::max(std::abs(one - p.update_gate.q_out_min), std::abs(one - p.update_gate.q_out_max));
  if (d_u > L || d_h > L || one_minus_u > L) return false;
  if (d_u * d_h > L || one_minus_u * n_aligned > L || d_u * d_h + one_minus_u * n_aligned > L) return false;
  if (shifted_bound(d_u * d_h + one_minus_u * n_aligned, p.shift_update_gate_output) + std::abs(int64_t{p.h.zp}) > L) return false;
  return true;
}

bool reset_hidden_fits_int32(const GruCellParamsView& p) {
  const int64_t L = kLane32Limit;
  // C-2a: the product (r - zp_r)·(h - zp_h), then its shifted value plus h's zero point
  const int64_t d_r = max_abs_diff(p.reset_gate.q_out_min, p.reset_gate.q_out_max, p.zp_reset_gate_output);
  const int64_t d_h = max_abs_diff(p.h.q_min, p.h.q_max, p.h.zp);
  if (d_r > L || d_h > L || d_r * d_h > L) return false;
  return shifted_bound(d_r * d_h, p.shift_reset_mul_h_to_h) + std::abs(int64_t{p.h.zp}) <= L;
}

int32_t cell32_sum_fold(const Cell32Plan& plan, bool x_side, size_t c) {
  const std::vector<int32_t>& offset = x_side ? plan.offset_x : plan.offset_h;
  const bool floor = x_side ? plan.floor_x : plan.floor_h;
  const uint32_t half = floor ? static_cast<uint32_t>((x_side ? plan.half_x : plan.half_h)[c]) : 0u;  // 2^(s-1) <= 2^29
  // |offset| + half <= 2^30 + 2^29: fits int32 without wrapping; the narrowing keeps the low 32 bits (GCC and
  // Clang define it so, C++20 requires it)
  return static_cast<int32_t>(static_cast<uint32_t>(offset[c]) + half);
}

void prepare_cell32_plan(const GruCellParamsView& p, const int64_t* offset_x, const int64_t* offset_h, Cell32Plan* out) {
  const size_t G = 3 * static_cast<size_t>(p.hidden_size);
  auto split = [G](const int32_t* shift, const int64_t* offset, std::vector<int32_t>& off, std::vector<int32_t>& right,
                   std::vector<int32_t>& left, std::vector<int32_t>& half) {
    off.resize(G);
    right.resize(G);
    left.resize(G);
    half.resize(G);
    for (size_t c = 0; c < G; ++c) {
      off[c] = static_cast<int32_t>(offset[c]);  // |.| <= 2^30 (cell_fits_int32)
      const int32_t s = shift[c];
      right[c] = s > 0 ? s : 0;
      left[c] = s < 0 ? -s : 0;
      half[c] = s >= 1 && s <= 32 ? static_cast<int32_t>(uint32_t{1} << (s - 1)) : 0;  // u32 bits
    }
  };
  split(p.shift_gemm_x_to_weight_ih_linear, offset_x, out->offset_x, out->right_x, out->left_x, out->half_x);
  split(p.shift_gemm_h_to_weight_hh_linear, offset_h, out->offset_h, out->right_h, out->left_h, out->half_h);
  auto floor_form = [G](const int32_t* shift) {
    return std::all_of(shift, shift + G, [](int32_t s) { return s >= 1 && s <= 30; });
  };
  out->floor_x = floor_form(p.shift_gemm_x_to_weight_ih_linear);
  out->floor_h = floor_form(p.shift_gemm_h_to_weight_hh_linear);
  // code ranges are at most 16-bit and zero points inside them: every difference below fits int32
  out->ih_lo = p.weight_ih_linear.q_min - p.weight_ih_linear.zp;
  out->ih_hi = p.weight_ih_linear.q_max - p.weight_ih_linear.zp;
  out->hh_lo = p.weight_hh_linear.q_min - p.weight_hh_linear.zp;
  out->hh_hi = p.weight_hh_linear.q_max - p.weight_hh_linear.zp;
  const CodeSpace* inputs[3] = {&p.update_gate_input, &p.reset_gate_input, &p.new_gate_input};
  const ActivationView* acts[3] = {&p.update_gate, &p.reset_gate, &p.new_gate};
  for (int g = 0; g < 3; ++g) {
    const int64_t zp = inputs[g]->zp;
    const int64_t a = inputs[g]->q_min - zp, b = inputs[g]->q_max - zp;        // saturate(sum + zp) - zp
    const int64_t c = acts[g]->q_in_min - zp, d = acts[g]->q_in_max - zp;      // the table's input range - zp
    int64_t lo = std::max(a, c), hi = std::min(b, d);
    if (lo > hi) lo = hi = b < c ? c : d;  // disjoint: every saturated value clamps to one end of the table
    out->gate_lo[g] = static_cast<int32_t>(lo);
    out->gate_hi[g] = static_cast<int32_t>(hi);
    out->gate_add[g] = static_cast<int32_t>(zp - acts[g]->q_in_min);
  }
  Cell32Lanes& L = out->lanes;
  auto fill = [](int32_t (&lanes)[16], int64_t v) {
    for (int32_t& x : lanes) x = static_cast<int32_t>(v);  // every value fits int32 (code ranges, proved bounds)
  };
  fill(L.ih_lo, out->ih_lo);
  fill(L.ih_hi, out->ih_hi);
  fill(L.hh_lo, out->hh_lo);
  fill(L.hh_hi, out->hh_hi);
  for (int g = 0; g < 3; ++g) {
    fill(L.gate_lo[g], out->gate_lo[g]);
    fill(L.gate_hi[g], out->gate_hi[g]);
    fill(L.gate_add[g], out->gate_add[g]);
  }
  fill(L.h_zp, p.h.zp);
  fill(L.h_min, p.h.q_min);
  fill(L.h_max, p.h.q_max);
  fill(L.zp_update_gate_output, p.zp_update_gate_output);
  fill(L.zp_reset_gate_output, p.zp_reset_gate_output);
  fill(L.zp_new_gate_output, p.zp_new_gate_output);
  fill(L.one_in_update_gate_scale, p.quant_one_in_update_gate_scale);
  const int32_t shifts[Cell32Lanes::kShifts] = {
      p.shift_weight_ih_linear_to_update_gate_input, p.shift_weight_hh_linear_to_update_gate_input,
      p.shift_weight_ih_linear_to_reset_gate_input,  p.shift_weight_hh_linear_to_reset_gate_input,
      p.shift_weight_ih_linear_to_new_gate_input,    p.shift_reset_mul_hh_to_new_gate_input,
      p.shift_new_gate_output_to_h,                  p.shift_update_gate_output,
      p.shift_reset_mul_h_to_h};
  for (int i = 0; i < Cell32Lanes::kShifts; ++i) {
    const int32_t sh = shifts[i];
    L.shift_sign[i] = sh > 0 ? 1 : sh == 0 ? 0 : -1;
    L.shift_floor[i] = sh >= 1 && sh <= 30 ? 1 : 0;
    fill(L.shift_count[i], sh > 0 ? sh : -static_cast<int64_t>(sh));
    fill(L.shift_half[i], sh > 0 && sh <= 32 ? static_cast<int32_t>(uint32_t{1} << (sh - 1)) : 0);  // u32 bits
  }
}

}  // namespace qgru::fast
