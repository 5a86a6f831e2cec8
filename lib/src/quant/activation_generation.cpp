// Offline generation of the activation data (lookup table or piecewise-linear segments) in double
// precision, and its exhaustive error measurement. The design of the segments is described in
// qgru/quant/activation_generation.h.
#include "qgru/quant/activation_generation.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/quant/chord_error.h"
#include "qgru/fixed/rounding.h"

namespace qgru {
namespace {

void check_width(const TensorQuant& quant, const char* which, const char* function_name) {
  if (quant.bits < 2 || quant.bits > 16) {
    throw Error(std::string("activation ") + function_name + ": " + which + " width " + std::to_string(quant.bits) +
                " bits is outside 2..16");
  }
}

// The real-valued target in output code space over the input codes, clamped to the output code range:
// target[i] = clamp(f(input.dequantize(q_in_min + i)) * 2^shift_out + zp_out, q_out_min, q_out_max).
struct CodeCurve {
  int32_t q_in_min = 0;
  std::vector<double> target;   // clamped
  std::vector<double> raw;      // unclamped
};

CodeCurve make_curve(ActivationFunction function, const TensorQuant& input, const TensorQuant& output) {
  CodeCurve curve;
  curve.q_in_min = input.qmin();
  const int64_t count = int64_t{input.qmax()} - input.qmin() + 1;
  curve.target.resize(static_cast<size_t>(count));
  curve.raw.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const double y = activation_reference(function, input.dequantize(input.qmin() + i));
    const double t = output.to_steps(y) + output.zp;
    curve.raw[static_cast<size_t>(i)] = t;
    curve.target[static_cast<size_t>(i)] =
        std::min(std::max(t, static_cast<double>(output.qmin())), static_cast<double>(output.qmax()));
  }
  return curve;
}

// A closed range [first, last] of indices into CodeCurve::target (index = q_in - q_in_min).
struct IndexRange {
  int64_t first;
  int64_t last;
};

// The stretches on which the clamped target is flat, convex or concave (f is increasing, convex for
// x < 0 and concave for x >= 0): below the lower clamp, between leaving it and x = 0, between x = 0 and
// the upper clamp, above the upper clamp. Empty stretches are dropped.
std::vector<IndexRange> shape_pieces(const CodeCurve& curve, const TensorQuant& input, const TensorQuant& output) {
  const int64_t count = static_cast<int64_t>(curve.raw.size());
  int64_t leave_low = 0;  // first index with raw > q_out_min
  while (leave_low < count && curve.raw[static_cast<size_t>(leave_low)] <= output.qmin()) ++leave_low;
  int64_t enter_high = leave_low;  // first index with raw >= q_out_max
  while (enter_high < count && curve.raw[static_cast<size_t>(enter_high)] < output.qmax()) ++enter_high;
  const int64_t inflection = std::min(std::max(int64_t{input.zp} - curve.q_in_min, leave_low), enter_high);
  std::vector<IndexRange> pieces;
  const int64_t cuts[] = {0, leave_low, inflection, enter_high, count};
  for (int k = 0; k + 1 < 5; ++k) {
    if (cuts[k + 1] > cuts[k]) pieces.push_back({cuts[k], cuts[k + 1] - 1});
  }
  return pieces;
}

// The longest segment starting at `first` inside [first, last] whose chord error is <= error_bound
// (the error only grows as a segment grows, so gallop, then bisect).
int64_t longest_segment(const std::vector<double>& target, int64_t first, int64_t last, double error_bound) {
  int64_t good = first;  // chord_error(first, first) == 0
  int64_t bad = last + 1;
  for (int64_t step = 1;; step *= 2) {
    const int64_t probe = good + step;
    if (probe > last) break;
    if (chord_error_within(target, first, probe, error_bound)) {
      good = probe;
    } else {
      bad = probe;
      break;
    }
  }
  while (bad - good > 1) {
    const int64_t mid = good + (bad - good) / 2;
    if (chord_error_within(target, first, mid, error_bound)) {
      good = mid;
    } else {
      bad = mid;
    }
  }
  return good;
}

// Greedy segmentation of every piece with segments of chord error <= error_bound. Returns the first
// index of each segment, or an empty vector when more than `budget` segments would be needed.
std::vector<int64_t> greedy_segments(const std::vector<double>& target, const std::vector<IndexRange>& pieces,
                                     double error_bound, int budget) {
  std::vector<int64_t> starts;
  for (const IndexRange& piece : pieces) {
    for (int64_t first = piece.first; first <= piece.last;) {
      if (static_cast<int>(starts.size()) >= budget) return {};
      starts.push_back(first);
      first = longest_segment(target, first, piece.last, error_bound) + 1;
    }
  }
  return starts;
}

// Residual range max - min of target[i] - slope * i over [first, last].
double residual_range(const std::vector<double>& target, int64_t first, int64_t last, double slope) {
  double lowest = target[static_cast<size_t>(first)] - slope * static_cast<double>(first);
  double highest = lowest;
  for (int64_t i = first + 1; i <= last; ++i) {
    const double residual = target[static_cast<size_t>(i)] - slope * static_cast<double>(i);
    lowest = std::min(lowest, residual);
    highest = std::max(highest, residual);
  }
  return highest - lowest;
}

// The minimax slope over target[first..last] for any shape: the residual range is convex in the slope
// and its minimum lies between the smallest and largest slope of neighbouring points, so a ternary
// search finds it.
double minimax_slope(const std::vector<double>& target, int64_t first, int64_t last) {
  if (last <= first) return 0.0;
  double lo = target[static_cast<size_t>(first) + 1] - target[static_cast<size_t>(first)];
  double hi = lo;
  for (int64_t i = first + 1; i < last; ++i) {
    const double step = target[static_cast<size_t>(i) + 1] - target[static_cast<size_t>(i)];
    lo = std::min(lo, step);
    hi = std::max(hi, step);
  }
  for (int iteration = 0; iteration < 200 && hi - lo > 1e-15 * std::max(1.0, std::abs(hi)); ++iteration) {
    const double m1 = lo + (hi - lo) / 3.0;
    const double m2 = hi - (hi - lo) / 3.0;
    if (residual_range(target, first, last, m1) <= residual_range(target, first, last, m2)) {
      hi = m2;
    } else {
      lo = m1;
    }
  }
  return 0.5 * (lo + hi);
}

// Quantize one segment's line: slope (output codes per input code) to q_b * 2^-shift, then the
// intercept term_c (at q_in = 0, times 2^shift) centred on the residuals of the quantized slope over
// the segment's codes, so that the quantized line is the minimax line for that slope.
void quantize_segment(const CodeCurve& curve, int64_t first, int64_t last, double slope, const char* function_name,
                      int32_t& q_b, int32_t& shift, int64_t& term_c) {
  const double q_first = static_cast<double>(curve.q_in_min + first);
  const double intercept_estimate = curve.target[static_cast<size_t>(first)] - slope * q_first;
  // Largest shift with |q_b| < 2^30 and |term_c| < 2^51, leaving a factor 2 of headroom under the
  // evaluator's bounds (|q_b| <= 2^31, |term_c| <= 2^52) for the re-centring below.
  int chosen = kActivationPwlMaxShift;
  while (chosen > 0 && (std::ldexp(std::abs(slope), chosen) >= std::ldexp(1.0, 30) ||
                        std::ldexp(std::abs(intercept_estimate) + 1.0, chosen) >= std::ldexp(1.0, 51))) {
    --chosen;
  }
  // Unreachable for data from make_curve (the target is clamped to at most 2^16 output codes, so
  // |slope| < 2^17 and |intercept| < 2^17 + 2^17 * 2^16); kept so that a change there cannot overflow.
  if (std::abs(slope) >= std::ldexp(1.0, 30) || std::abs(intercept_estimate) + 1.0 >= std::ldexp(1.0, 51)) {
    throw Error(std::string("activation ") + function_name + ": segment at input code " +
                std::to_string(curve.q_in_min + first) + " has slope " + std::to_string(slope) +
                " output codes per input code, beyond the int32 slope range (the input scale is too coarse "
                "for this output scale)");
  }
  const double q_b_value = std::round(std::ldexp(slope, chosen));
  const double slope_quantized = std::ldexp(q_b_value, -chosen);
  double lowest = 0.0;
  double highest = 0.0;
  for (int64_t i = first; i <= last; ++i) {
    const double q = static_cast<double>(curve.q_in_min + i);
    const double residual = curve.target[static_cast<size_t>(i)] - slope_quantized * q;
    if (i == first || residual < lowest) lowest = residual;
    if (i == first || residual > highest) highest = residual;
  }
  const double term_c_value = std::round(std::ldexp(0.5 * (lowest + highest), chosen));
  if (std::abs(term_c_value) > static_cast<double>(kActivationPwlMaxTermC)) {
    throw Error(std::string("activation ") + function_name + ": segment at input code " +
                std::to_string(curve.q_in_min + first) + " needs an intercept beyond 2^52");
  }
  q_b = static_cast<int32_t>(q_b_value);
  shift = chosen;
  term_c = static_cast<int64_t>(term_c_value);
}

// Integer-aware finishing of one quantized segment: the line was fitted to the real-valued curve, but the
// error that counts is between the rounded line and the correctly rounded codes. Try intercepts within
// +-1 output LSB of the fitted one (in steps of 1/16 LSB) and keep, in this order of preference, one whose
// first output is not below `floor_q_out` (the previous segment's last output, so that the increasing
// activation stays monotone across the breakpoint), the smallest max error over the segment's codes, the
// smallest summed error; the fitted intercept wins ties.
void tune_intercept(const std::vector<int32_t>& reference, int32_t q_in_min, int64_t first, int64_t last,
                    const TensorQuant& output, int32_t q_b, int32_t shift, int64_t floor_q_out, int64_t& term_c) {
  const int64_t step = shift >= 4 ? int64_t{1} << (shift - 4) : 1;
  const int64_t reach = shift >= 4 ? 16 : int64_t{1} << shift;  // candidates cover +-1 LSB
  // Same arithmetic as evaluate_activation: |q_b * q_in| <= 2^47, |candidate| <= 2^52.
  const auto q_out_at = [&](int64_t i, int64_t candidate) {
    return saturate(rshift_round(int64_t{q_b} * (q_in_min + i) + candidate, shift), output.qmin(), output.qmax());
  };
  int64_t best_term_c = term_c;
  bool best_monotone = false;
  int64_t best_max = std::numeric_limits<int64_t>::max();
  int64_t best_sum = std::numeric_limits<int64_t>::max();
  for (int64_t k = 0; k <= 2 * reach; ++k) {
    const int64_t offset = (k % 2 == 0 ? k / 2 : -(k + 1) / 2) * step;  // 0, -1, +1, -2, ... steps
    const int64_t candidate = term_c + offset;
    if (candidate > kActivationPwlMaxTermC || candidate < -kActivationPwlMaxTermC) continue;
    const bool monotone = q_out_at(first, candidate) >= floor_q_out;
    if (best_monotone && !monotone) continue;
    if (monotone && !best_monotone) best_max = best_sum = std::numeric_limits<int64_t>::max();
    int64_t max_error = 0;
    int64_t sum_error = 0;
    for (int64_t i = first; i <= last && max_error <= best_max; ++i) {
      const int64_t error = std::llabs(int64_t{q_out_at(i, candidate)} - reference[static_cast<size_t>(i)]);
      max_error = std::max(max_error, error);
      sum_error += error;
    }
    if (monotone != best_monotone || max_error < best_max || (max_error == best_max && sum_error < best_sum)) {
      best_monotone = monotone;
      best_max = max_error;
      best_sum = sum_error;
      best_term_c = candidate;
    }
  }
  term_c = best_term_c;
}

void generate_pwl(ActivationTables& tables, int segments) {
  const char* function_name = activation_function_name(tables.function);
  const CodeCurve curve = make_curve(tables.function, tables.input, tables.output);
  const int64_t count = static_cast<int64_t>(curve.target.size());
  const int budget = static_cast<int>(std::min<int64_t>(segments, count));
  const std::vector<IndexRange> pieces = shape_pieces(curve, tables.input, tables.output);

  std::vector<int64_t> starts;
  const bool within_pieces = budget >= static_cast<int>(pieces.size());
  if (!within_pieces) {
    // Too few segments to separate the flat, convex and concave stretches: equal-width segments.
    for (int k = 0; k < budget; ++k) starts.push_back(count * k / budget);
  } else {
    // Bisect the error bound between 0 and the error of one segment per piece (always feasible).
    double feasible = 0.0;
    for (const IndexRange& piece : pieces) feasible = std::max(feasible, chord_error(curve.target, piece.first, piece.last));
    starts = greedy_segments(curve.target, pieces, feasible, budget);
    const std::vector<int64_t> exact = greedy_segments(curve.target, pieces, 0.0, budget);
    if (!exact.empty()) {
      starts = exact;
    } else {
      double infeasible = 0.0;
      for (int iteration = 0; iteration < 60 && feasible - infeasible > 1e-4 * std::max(1.0, feasible); ++iteration) {
        const double middle = 0.5 * (feasible + infeasible);
        std::vector<int64_t> candidate = greedy_segments(curve.target, pieces, middle, budget);
        if (candidate.empty()) {
          infeasible = middle;
        } else {
          feasible = middle;
          starts = std::move(candidate);
        }
      }
    }
  }

  std::vector<int32_t> reference(static_cast<size_t>(count));  // correctly rounded codes, index q_in - q_in_min
  for (int64_t i = 0; i < count; ++i) {
    reference[static_cast<size_t>(i)] = activation_reference_code(
        tables.function, tables.input, tables.output, static_cast<int32_t>(curve.q_in_min + i));
  }
  const size_t used = starts.size();
  tables.segments = static_cast<int>(used);
  tables.pwl_threshold.resize(used);
  tables.pwl_q_b.resize(used);
  tables.pwl_shift.resize(used);
  tables.pwl_term_c.resize(used);
  for (size_t k = 0; k < used; ++k) {
    const int64_t first = starts[k];
    const int64_t last = k + 1 < used ? starts[k + 1] - 1 : count - 1;
    // Inside one flat, convex or concave stretch the chord's slope is the minimax slope; segments of the
    // equal-width fallback may straddle stretches and take the general search.
    const double slope =
        within_pieces ? (last > first ? (curve.target[static_cast<size_t>(last)] - curve.target[static_cast<size_t>(first)]) /
                                            static_cast<double>(last - first)
                                      : 0.0)
                      : minimax_slope(curve.target, first, last);
    tables.pwl_threshold[k] = static_cast<int32_t>(curve.q_in_min + first);
    quantize_segment(curve, first, last, slope, function_name, tables.pwl_q_b[k], tables.pwl_shift[k],
                     tables.pwl_term_c[k]);
    const int64_t floor_q_out = k == 0 ? int64_t{tables.output.qmin()}
                                       : saturate(rshift_round(int64_t{tables.pwl_q_b[k - 1]} * (curve.q_in_min + first - 1) +
                                                                   tables.pwl_term_c[k - 1],
                                                               tables.pwl_shift[k - 1]),
                                                  tables.output.qmin(), tables.output.qmax());
    tune_intercept(reference, curve.q_in_min, first, last, tables.output, tables.pwl_q_b[k], tables.pwl_shift[k],
                   floor_q_out, tables.pwl_term_c[k]);
  }
}

}  // namespace

double activation_reference(ActivationFunction function, double x) {
  if (function == ActivationFunction::Tanh) return std::tanh(x);
  return 1.0 / (1.0 + std::exp(-x));
}

int32_t activation_reference_code(ActivationFunction function, const TensorQuant& input, const TensorQuant& output,
                                  int32_t q_in) {
  return output.quantize(activation_reference(function, input.dequantize(q_in)));
}

ActivationTables generate_activation(ActivationFunction function, ActivationImpl impl, int segments,
                                     const TensorQuant& input, const TensorQuant& output) {
  const char* function_name = activation_function_name(function);
  check_width(input, "input", function_name);
  check_width(output, "output", function_name);
  ActivationTables tables;
  tables.function = function;
  tables.impl = impl;
  tables.input = input;
  tables.output = output;
  if (impl == ActivationImpl::Table) {
    if (input.bits > kActivationTableMaxInputBits) {
      throw Error(std::string("activation ") + function_name + ": a table needs an input of at most " +
                  std::to_string(kActivationTableMaxInputBits) + " bits, got " + std::to_string(input.bits) +
                  " (use pwl)");
    }
    for (int64_t q_in = input.qmin(); q_in <= input.qmax(); ++q_in) {
      tables.table.push_back(activation_reference_code(function, input, output, static_cast<int32_t>(q_in)));
    }
    return tables;
  }
  if (input.bits > kActivationPwlMaxInputBits) {
    throw Error(std::string("activation ") + function_name + ": pwl needs an input of at most " +
                std::to_string(kActivationPwlMaxInputBits) + " bits, got " + std::to_string(input.bits));
  }
  if (segments < 1) {
    throw Error(std::string("activation ") + function_name + ": pwl needs at least 1 segment, got " +
                std::to_string(segments));
  }
  generate_pwl(tables, segments);
  return tables;
}

ActivationError measure_activation_error(const ActivationTables& tables) {
  const ActivationView view = tables.view();
  ActivationError error;
  double sum = 0.0;
  int64_t count = 0;
  for (int64_t q = tables.input.qmin(); q <= tables.input.qmax(); ++q) {
    const int32_t q_in = static_cast<int32_t>(q);
    const int64_t reference = activation_reference_code(tables.function, tables.input, tables.output, q_in);
    const int64_t lsb_error = std::llabs(int64_t{evaluate_activation(view, q_in)} - reference);
    if (count == 0 || lsb_error > error.max_lsb_error) {
      error.worst_q_in = q_in;  // strict: the smallest input code reaching the maximum is kept
      error.max_lsb_error = lsb_error;
    }
    sum += static_cast<double>(lsb_error);
    ++count;
  }
  error.mean_abs_lsb_error = count ? sum / static_cast<double>(count) : 0.0;
  return error;
}

}  // namespace qgru
