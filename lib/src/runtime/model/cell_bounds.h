#pragma once
// Private to the fast executor's cell kernels: the two bounds their per-cell proofs (cell_fits_int32,
// cell_avx2_i64_applies) are built from, computed in int64 from a cell's code ranges and shifts.
#include <algorithm>
#include <cstdint>
#include <cstdlib>

namespace qgru::fast {

// The largest |q - zp| over the codes q in [q_min, q_max].
inline int64_t max_abs_diff(int32_t q_min, int32_t q_max, int64_t zp) {
  return std::max(std::abs(q_min - zp), std::abs(q_max - zp));
}

// A bound of |rshift_round(v, s)| for |v| <= b (b <= 2^62): b / 2^s rounded up for s > 0; b·2^-s for s <= 0,
// or 2^62 (beyond every limit a proof checks) when -s >= max_left or b·2^-s would exceed `limit`.
inline int64_t shifted_bound(int64_t b, int s, int64_t limit, int max_left) {
  constexpr int64_t kHuge = int64_t{1} << 62;
  if (s > 0) return s >= 62 ? 1 : (b >> s) + 1;
  if (-s >= max_left || b > (limit >> -s)) return kHuge;
  return b << -s;
}

}  // namespace qgru::fast
