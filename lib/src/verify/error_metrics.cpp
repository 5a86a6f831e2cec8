#include "qgru/verify/error_metrics.h"

#include <algorithm>
#include <cmath>

namespace qgru {

void ErrorMetrics::add(double reference, double test) {
  const double error = test - reference;
  ++count;
  sum_abs_error += std::fabs(error);
  max_abs_error = std::max(max_abs_error, std::fabs(error));
  sum_sq_error += error * error;
  sum_sq_reference += reference * reference;
  sum_sq_test += test * test;
  sum_product += reference * test;
}

void ErrorMetrics::add(const float* reference, const float* test, int64_t n) {
  for (int64_t i = 0; i < n; ++i) add(static_cast<double>(reference[i]), static_cast<double>(test[i]));
}

void ErrorMetrics::merge(const ErrorMetrics& other) {
  count += other.count;
  sum_abs_error += other.sum_abs_error;
  max_abs_error = std::max(max_abs_error, other.max_abs_error);
  sum_sq_error += other.sum_sq_error;
  sum_sq_reference += other.sum_sq_reference;
  sum_sq_test += other.sum_sq_test;
  sum_product += other.sum_product;
}

double ErrorMetrics::nmse() const {
  if (sum_sq_reference == 0) return sum_sq_error == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return sum_sq_error / sum_sq_reference;
}

double ErrorMetrics::sqnr_db() const {
  if (sum_sq_error == 0) return std::numeric_limits<double>::infinity();
  if (sum_sq_reference == 0) return -std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sum_sq_reference / sum_sq_error);
}

double ErrorMetrics::cosine() const {
  if (sum_sq_reference == 0 && sum_sq_test == 0) return 1.0;
  if (sum_sq_reference == 0 || sum_sq_test == 0) return 0.0;
  return sum_product / std::sqrt(sum_sq_reference * sum_sq_test);
}

}  // namespace qgru
