#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "qgru/verify/error_metrics.h"

TEST_CASE("metrics of a known perturbation match closed forms") {
  // reference r = (1, -2, 3, -4), test = r + (0.1, -0.1, 0.1, -0.1)
  const std::vector<float> reference = {1, -2, 3, -4};
  const std::vector<float> test = {1.1f, -2.1f, 3.1f, -4.1f};
  qgru::ErrorMetrics metrics;
  metrics.add(reference.data(), test.data(), 4);
  const double e = 0.1;
  const double sum_sq_ref = 1 + 4 + 9 + 16;
  double sum_sq_err = 0, dot = 0, sum_sq_test = 0;
  for (int i = 0; i < 4; ++i) {
    const double err = static_cast<double>(test[i]) - reference[i];
    sum_sq_err += err * err;
    dot += static_cast<double>(test[i]) * reference[i];
    sum_sq_test += static_cast<double>(test[i]) * test[i];
  }
  CHECK(metrics.max_abs_error == doctest::Approx(e).epsilon(1e-6));
  CHECK(metrics.mean_abs_error() == doctest::Approx(e).epsilon(1e-6));
  CHECK(metrics.nmse() == doctest::Approx(sum_sq_err / sum_sq_ref));
  CHECK(metrics.sqnr_db() == doctest::Approx(10 * std::log10(sum_sq_ref / sum_sq_err)));
  CHECK(metrics.cosine() == doctest::Approx(dot / std::sqrt(sum_sq_ref * sum_sq_test)));
  CHECK(metrics.sqnr_db() > 28.7);  // 10·log10(30 / 0.04) = 28.75
  CHECK(metrics.sqnr_db() < 28.8);
}

TEST_CASE("merging chunks equals one pass") {
  std::vector<float> reference, test;
  for (int i = 0; i < 100; ++i) {
    reference.push_back(std::sin(0.3f * static_cast<float>(i)));
    test.push_back(std::sin(0.3f * static_cast<float>(i)) + 0.01f * static_cast<float>(i % 7 - 3));
  }
  qgru::ErrorMetrics whole, first, second;
  whole.add(reference.data(), test.data(), 100);
  first.add(reference.data(), test.data(), 37);
  second.add(reference.data() + 37, test.data() + 37, 63);
  first.merge(second);
  CHECK(first.count == whole.count);
  CHECK(first.max_abs_error == whole.max_abs_error);
  CHECK(first.sqnr_db() == doctest::Approx(whole.sqnr_db()).epsilon(1e-12));
  CHECK(first.cosine() == doctest::Approx(whole.cosine()).epsilon(1e-12));
}

TEST_CASE("degenerate cases: exact match, zero reference") {
  const std::vector<float> zeros = {0, 0, 0};
  const std::vector<float> ones = {1, 1, 1};
  qgru::ErrorMetrics exact;
  exact.add(ones.data(), ones.data(), 3);
  CHECK(std::isinf(exact.sqnr_db()));
  CHECK(exact.sqnr_db() > 0);
  CHECK(exact.nmse() == 0.0);
  CHECK(exact.cosine() == doctest::Approx(1.0));
  qgru::ErrorMetrics zero_reference;
  zero_reference.add(zeros.data(), ones.data(), 3);
  CHECK(std::isinf(zero_reference.nmse()));
  CHECK(zero_reference.sqnr_db() < 0);
  CHECK(zero_reference.cosine() == 0.0);
}
