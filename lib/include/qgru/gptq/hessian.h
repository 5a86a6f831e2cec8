#pragma once
// The GPTQ Hessian H = 2·X·Xᵀ of a linear layer's inputs X [K, M] (K input features, M tokens), accumulated
// in float64 over any number of activation chunks, so X is never held whole. The reference scales H by
// 1/nsamples; GPTQ's result does not depend on a positive scale of H (damping is relative to mean diag H
// and the updates use ratios of Hinv entries), so qgru keeps the plain sum.
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru::gptq {

// Checks an activation tensor as add_tensor takes it (float dtype; token-major [..., K], or feature-major
// [K, M]) without allocating anything. Throws qgru::Error naming `source` and the expected shape.
void check_activations(const Tensor& activations, int64_t K, bool feature_major, const std::string& source);

// The activation tensor as float32 values after check_activations and a finiteness check (the messages name
// `source`): what add_tensor accumulates, and what a device accumulator (qgru_cuda/gptq_device.h) is given.
std::vector<float> activation_values(const Tensor& activations, int64_t K, bool feature_major, const std::string& source);

class HessianAccumulator {
 public:
  explicit HessianAccumulator(int64_t K);

  // Rows are tokens: X_rows [M, K] row-major (what a linear layer sees, x @ Wᵀ).
  void add_token_major(const float* X_rows, int64_t M);
  // Columns are tokens: X [K, M] row-major.
  void add_feature_major(const float* X, int64_t M);
  // An activation tensor as read from .npy: token-major [..., K] (leading dims flattened), or feature-major
  // [K, M] when feature_major. Throws qgru::Error naming `source` and the expected shape on a mismatch.
  void add_tensor(const Tensor& activations, bool feature_major, const std::string& source);

  int64_t K() const { return K_; }
  int64_t tokens() const { return tokens_; }
  // The symmetric K×K matrix (both triangles filled).
  std::vector<double> hessian() const;

 private:
  int64_t K_;
  int64_t tokens_ = 0;
  std::vector<double> upper_;  // upper triangle accumulated by dsyrk (row-major)
};

// Save / load H as a float64 .npy [K, K] (atomic write). load checks the shape against K, then check_hessian.
void save_hessian(const std::string& path, const std::vector<double>& H, int64_t K);
std::vector<double> load_hessian(const std::string& path, int64_t K);
// What any H given instead of activations must be: K·K values (row-major [K, K]), finite, no diagonal entry
// below 0 (a sum of 2·x·xᵀ has none). Throws qgru::Error naming `source`.
void check_hessian(const std::vector<double>& H, int64_t K, const std::string& source);

}  // namespace qgru::gptq
