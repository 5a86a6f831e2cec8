#pragma once
// Integer evaluation of the gate activations (sigmoid for z and r, tanh for n; docs/FIXED_POINT.md §4), host and
// device. The data (a lookup table, or the breakpoints, slopes, intercepts and shifts of a
// piecewise-linear approximation) is built offline in double precision by generate_activation()
// (qgru/runtime/activation_tables.h); this header only reads it, so every constant the evaluation uses
// travels with the artifact.
//
// Both sides are codes: q_in is a code of the gate input tensor (e.g. update_gate_input), the result a
// code of the gate output tensor (e.g. update_gate_output).
#include <cstdint>

#include "qgru/fixed/rounding.h"
#include "qgru/hd.h"

namespace qgru {

enum class ActivationFunction : int32_t { Sigmoid = 0, Tanh = 1 };
enum class ActivationImpl : int32_t { Table = 0, Pwl = 1 };

// Limits that make the integer evaluation below overflow-free; generate_activation() and
// activation_from_artifact() refuse data outside them.
constexpr int kActivationTableMaxInputBits = 12;       // a table holds 2^bits int32 codes (16 KiB at 12)
constexpr int kActivationPwlMaxInputBits = 16;         // |q_in| <= 2^16 (unsigned 16-bit max is 2^16-1)
constexpr int kActivationPwlMaxShift = 62;             // rshift_round's contract
constexpr int64_t kActivationPwlMaxTermC = int64_t{1} << 52;  // |pwl_term_c| bound

// A plain-old-data view of one activation, copyable to the device by value. The arrays are owned
// elsewhere (ActivationTables on the host, or device memory holding copies of the same vectors).
struct ActivationView {
  ActivationImpl impl;
  int32_t q_in_min, q_in_max;    // the input code range (the gate input tensor's)
  int32_t q_out_min, q_out_max;  // the output code range (the gate output tensor's)
  // Table: (q_in_max - q_in_min + 1) output codes; entry q_in - q_in_min is the output for q_in.
  const int32_t* table;
  // Pwl: num_segments segments over the input codes. Segment i covers the input codes
  //   [pwl_threshold[i], pwl_threshold[i+1] - 1]   (the last one up to q_in_max),
  // with pwl_threshold[0] == q_in_min and the thresholds strictly increasing. On segment i
  //   q_out = saturate(rshift_round(pwl_q_b[i] * q_in + pwl_term_c[i], pwl_shift[i]), q_out_min, q_out_max)
  // i.e. the segment line y = b*x + c written directly in code space: pwl_q_b[i] * 2^-pwl_shift[i]
  // is the slope in output codes per input code, and pwl_term_c[i] * 2^-pwl_shift[i] is the line's value
  // at q_in = 0 in output codes, with both zero points and both scales folded in offline.
  int32_t num_segments;
  const int32_t* pwl_threshold;  // [num_segments] first input code of each segment
  const int32_t* pwl_q_b;        // [num_segments] slope, output codes per input code, times 2^pwl_shift
  const int64_t* pwl_term_c;     // [num_segments] intercept at q_in = 0, output codes, times 2^pwl_shift
  const int32_t* pwl_shift;      // [num_segments] 0..62
  // Pwl, optional: a bucket index over the thresholds (qgru/fixed/activation_buckets.h; the device copies carry
  // one, the host views do not). Bucket j holds the input codes q_in_min + j·2^pwl_bucket_shift and the
  // 2^pwl_bucket_shift - 1 after them; pwl_bucket[j] is the segment of its first code, pwl_bucket[buckets] the last
  // segment. Null: the search runs over every threshold.
  const int32_t* pwl_bucket;     // [buckets + 1], or null
  int32_t pwl_bucket_shift;      // 0..16
};

// The segment holding q_in (already inside [q_in_min, q_in_max]): the largest i with
// pwl_threshold[i] <= q_in, by binary search (ceil(log2(num_segments)) steps, no data-dependent memory
// beyond the thresholds). With a bucket index the search starts inside q_in's bucket: the segments of its codes
// lie between the segment of its first code and that of the next bucket's first code (the segments grow with the
// code), so [pwl_bucket[j], pwl_bucket[j + 1]] holds the answer and pwl_threshold[pwl_bucket[j]] <= q_in, the
// search's invariant. The answer is the same; the dependent loads drop from about log2(segments) (8 at 160
// segments) to the bucket's two words and log2 of the few segments the bucket spans.
QGRU_HD int32_t find_pwl_segment(const ActivationView& view, int32_t q_in) {
  int32_t lo = 0;
  int32_t hi = view.num_segments - 1;
  if (view.pwl_bucket != nullptr) {
    // int64: q_in - q_in_min <= 2^17 (16-bit codes either side of 0), shifted right: a bucket number, >= 0
    const int64_t bucket = (static_cast<int64_t>(q_in) - view.q_in_min) >> view.pwl_bucket_shift;
    lo = view.pwl_bucket[bucket];
    hi = view.pwl_bucket[bucket + 1];
  }
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;  // upper middle: lo < mid <= hi, so the loop shrinks
    if (view.pwl_threshold[mid] <= q_in) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// Output code for an input code; the input is first saturated into [q_in_min, q_in_max].
// Overflow contract of the Pwl path (inputs up to 16 bits, any output width up to 32 bits):
//   q_in_sat:     int32, |q_in_sat| <= 2^16 (kActivationPwlMaxInputBits)
//   pwl_q_b:      int32, |q_b| <= 2^31
//   product:      int64, |q_b * q_in_sat| <= 2^47
//   + term_c:     int64, |term_c| <= 2^52 (kActivationPwlMaxTermC), so |sum| < 2^53: no overflow
//   rshift_round: shift 0..62, exact for every int64 (rounding half away from zero), result in int64
//   saturate:     into the output code range, int32
QGRU_HD int32_t evaluate_activation(const ActivationView& view, int32_t q_in) {
  const int32_t q_in_sat = saturate(q_in, view.q_in_min, view.q_in_max);
  if (view.impl == ActivationImpl::Table) {
    return view.table[static_cast<int64_t>(q_in_sat) - view.q_in_min];
  }
  const int32_t segment = find_pwl_segment(view, q_in_sat);
  // Output codes times 2^pwl_shift[segment]: slope times input plus intercept, both in that space.
  const int64_t q_out_scaled = static_cast<int64_t>(view.pwl_q_b[segment]) * q_in_sat + view.pwl_term_c[segment];
  return saturate(rshift_round(q_out_scaled, view.pwl_shift[segment]), view.q_out_min, view.q_out_max);
}

}  // namespace qgru
