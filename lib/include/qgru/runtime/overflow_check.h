#pragma once
// The overflow proof: from the bit widths, the per-channel shifts and the shapes (C, H) of every cell,
// bound every intermediate of the fixed-point cell (qgru/fixed/gru_cell.h) and of the executor
// (qgru/runtime/quant_executor.h), and check that it fits the C++ type that holds it. `quantize` refuses a
// config for which any check fails, naming the intermediate; `read_artifact` repeats the proof.
//
// The bounds use code ranges only (never the weight values), so a proven config is safe for any weights
// of that shape:
//   |q_W| <= 2^(b_W - 1)                           (symmetric weights)
//   |q - zp| <= q_max - q_min                      (an activation code difference, < 2^16)
//   gemm_x accumulator  |Σ_k q_W q_x|   <= C * 2^(b_W-1) * max(|q_min_x|, |q_max_x|)
//   compensation        |W_sum * zp_x|  <= C * 2^(b_W-1) * |zp_x|
//   corrected GEMM      |Σ q_W (q_x - zp_x)| <= C * 2^(b_W-1) * (q_max_x - q_min_x)
//   bias at GEMM scale  |q_bw| * 2^max(0, -shift_bw_to_gemm_x[c])
//   ... and so on for every line of the cell (see prove_no_overflow in overflow_check.cpp).
// Types: the GEMM accumulators are int32 or int64 (GruCellQuantParams::gemm_x_int32 / gemm_h_int32);
// every other intermediate is int64 and must stay within 2^62 (the contract of rshift_round's left shift
// and of requantize). Right shifts must lie in 0..62 and left shifts in -62..0.
#include <string>
#include <vector>

#include "qgru/runtime/quantized_gru.h"

namespace qgru {

struct OverflowCheck {
  int layer = 0;
  int direction = 0;
  std::string intermediate;  // e.g. "gemm_x accumulator (Σ q_W·q_x)", "r×hh product"
  std::string type;          // "int32" or "int64 (|v| <= 2^62)"
  double log2_bound = 0.0;   // log2 of the bound on |value| (−inf for a bound of 0)
  double log2_limit = 0.0;   // log2 of what the type holds
  bool ok = true;
};

struct OverflowProof {
  std::vector<OverflowCheck> checks;
  bool ok() const;
  // The first failing check as one line: "layer 0 direction 1: r×hh product bound 2^63.0 exceeds int64 ..."
  std::string first_failure() const;
  // The `count` value checks (shift-range checks left out) with the least headroom (limit - bound in bits),
  // the least first; and the same as text, one line each.
  std::vector<const OverflowCheck*> tightest_checks(int count) const;
  std::string tightest(int count) const;
};

// The bound on |Σ_k q_W[c,k] q_x[k]| (x_side) or |Σ_k q_R[c,k] q_h[k]|: K * 2^(b_W-1) * max|q|, for a
// device path that wants to know whether an int32 accumulator suffices for this cell (<= INT32_MAX).
double gemm_accumulator_bound(const GruCellQuantParams& params, bool x_side);

// Bound everything; never throws for an unprovable config (see the result).
OverflowProof prove_no_overflow(const QuantizedGru& model);

}  // namespace qgru
