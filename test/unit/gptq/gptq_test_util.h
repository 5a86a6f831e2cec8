#pragma once
// Seeded test data for the GPTQ tests: weights, isotropic and correlated activations, H = 2·X·Xᵀ written
// plainly (no BLAS), so the library's Hessian and error figures are checked against independent sums.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace gptq_test {

inline std::vector<double> normal_values(size_t count, uint32_t seed, double sigma = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, sigma);
  std::vector<double> values(count);
  for (double& v : values) v = dist(rng);
  return values;
}

// X [K, M] (features × tokens): isotropic when rank == 0, else rank latent factors mixed into K features
// with uneven channel scales exp(N(0, 1)) and 5% noise.
inline std::vector<double> activations_kmajor(int64_t K, int64_t M, int rank, uint32_t seed) {
  if (rank == 0) return normal_values(static_cast<size_t>(K * M), seed);
  const auto latent = normal_values(static_cast<size_t>(rank * M), seed);
  const auto mix = normal_values(static_cast<size_t>(K * rank), seed + 1);
  const auto noise = normal_values(static_cast<size_t>(K * M), seed + 2, 0.05);
  const auto log_scale = normal_values(static_cast<size_t>(K), seed + 3);
  std::vector<double> X(static_cast<size_t>(K * M));
  for (int64_t k = 0; k < K; ++k) {
    const double scale = std::exp(log_scale[static_cast<size_t>(k)]);
    for (int64_t t = 0; t < M; ++t) {
      double value = noise[static_cast<size_t>(k * M + t)];
      for (int r = 0; r < rank; ++r) value += mix[static_cast<size_t>(k * rank + r)] * latent[static_cast<size_t>(r * M + t)];
      X[static_cast<size_t>(k * M + t)] = scale * value;
    }
  }
  return X;
}

inline std::vector<double> hessian_plain(const std::vector<double>& X, int64_t K, int64_t M) {
  std::vector<double> H(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) {
      double sum = 0.0;
      for (int64_t t = 0; t < M; ++t) sum += X[static_cast<size_t>(i * M + t)] * X[static_cast<size_t>(j * M + t)];
      H[static_cast<size_t>(i * K + j)] = 2.0 * sum;
    }
  }
  return H;
}

// ‖(W − Ŵ)·X‖² written out as the product itself.
inline double output_error_plain(const std::vector<double>& W, const std::vector<double>& W_hat,
                                 const std::vector<double>& X, int64_t N, int64_t K, int64_t M) {
  double total = 0.0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t t = 0; t < M; ++t) {
      double y = 0.0;
      for (int64_t k = 0; k < K; ++k) {
        const size_t w = static_cast<size_t>(n * K + k);
        y += (W[w] - (W_hat.empty() ? 0.0 : W_hat[w])) * X[static_cast<size_t>(k * M + t)];
      }
      total += y * y;
    }
  }
  return total;
}

// A⁻¹ by Gauss-Jordan with partial pivoting.
inline std::vector<double> plain_inverse(std::vector<double> A, int64_t K) {
  std::vector<double> inv(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i) inv[static_cast<size_t>(i * K + i)] = 1.0;
  for (int64_t c = 0; c < K; ++c) {
    int64_t pivot = c;
    for (int64_t r = c + 1; r < K; ++r) {
      if (std::fabs(A[static_cast<size_t>(r * K + c)]) > std::fabs(A[static_cast<size_t>(pivot * K + c)])) pivot = r;
    }
    for (int64_t j = 0; j < K; ++j) {
      std::swap(A[static_cast<size_t>(c * K + j)], A[static_cast<size_t>(pivot * K + j)]);
      std::swap(inv[static_cast<size_t>(c * K + j)], inv[static_cast<size_t>(pivot * K + j)]);
    }
    const double d = A[static_cast<size_t>(c * K + c)];
    for (int64_t j = 0; j < K; ++j) {
      A[static_cast<size_t>(c * K + j)] /= d;
      inv[static_cast<size_t>(c * K + j)] /= d;
    }
    for (int64_t r = 0; r < K; ++r) {
      if (r == c) continue;
      const double f = A[static_cast<size_t>(r * K + c)];
      for (int64_t j = 0; j < K; ++j) {
        A[static_cast<size_t>(r * K + j)] -= f * A[static_cast<size_t>(c * K + j)];
        inv[static_cast<size_t>(r * K + j)] -= f * inv[static_cast<size_t>(c * K + j)];
      }
    }
  }
  return inv;
}

// U upper with A = Uᵀ·U (textbook Cholesky–Banachiewicz on the upper factor).
inline std::vector<double> plain_upper_cholesky(const std::vector<double>& A, int64_t K) {
  std::vector<double> U(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = i; j < K; ++j) {
      double sum = A[static_cast<size_t>(i * K + j)];
      for (int64_t p = 0; p < i; ++p) sum -= U[static_cast<size_t>(p * K + i)] * U[static_cast<size_t>(p * K + j)];
      U[static_cast<size_t>(i * K + j)] = i == j ? std::sqrt(sum) : sum / U[static_cast<size_t>(i * K + i)];
    }
  }
  return U;
}

}  // namespace gptq_test
