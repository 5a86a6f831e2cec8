#pragma once
// Error figures of a tensor computed two ways (a reference, usually float, and a test, usually the integer
// executor dequantized), accumulated in a streaming way in double so that any amount of data fits:
//   max_abs_error = max |t - r|            mean_abs_error = Σ|t - r| / n
//   nmse = Σ(t - r)² / Σ r²                sqnr_db = 10·log10(Σ r² / Σ(t - r)²)
//   cosine = Σ t·r / sqrt(Σ t² · Σ r²)
// Accumulators merge exactly up to floating-point addition order (merge() is used per chunk of batch).
#include <cstdint>
#include <limits>

namespace qgru {

struct ErrorMetrics {
  int64_t count = 0;
  double sum_abs_error = 0;
  double max_abs_error = 0;
  double sum_sq_error = 0;
  double sum_sq_reference = 0;
  double sum_sq_test = 0;
  double sum_product = 0;

  void add(const float* reference, const float* test, int64_t n);
  void add(double reference, double test);
  void merge(const ErrorMetrics& other);

  double mean_abs_error() const { return count ? sum_abs_error / static_cast<double>(count) : 0.0; }
  // NMSE is +inf when the reference is all zero and the error is not (0 when both are zero).
  double nmse() const;
  // SQNR in dB: +inf for an exact match; -inf when the reference is all zero and the error is not.
  double sqnr_db() const;
  // Cosine similarity: 1 when both are all zero, 0 when exactly one is.
  double cosine() const;
};

}  // namespace qgru
