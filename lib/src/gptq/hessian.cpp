#include "qgru/gptq/hessian.h"

#include <cblas.h>

#include <algorithm>

#include "qgru/base/error.h"
#include "qgru/io/npy.h"

namespace qgru::gptq {
namespace {
constexpr int64_t kChunkTokens = 1024;  // tokens converted to float64 at a time
// K is checked before K·K is formed: 2^24 keeps K·K·8 bytes (2^51) far from int64 overflow, and no machine
// holds such a matrix anyway (callers bound K by memory first, as run_job does).
constexpr int64_t kMaxOrder = int64_t{1} << 24;

int64_t checked_order(int64_t K) {
  if (K <= 0 || K > kMaxOrder) {
    throw Error("gptq: Hessian needs 0 < K <= " + std::to_string(kMaxOrder) + ", got " + std::to_string(K));
  }
  return K;
}
}  // namespace

HessianAccumulator::HessianAccumulator(int64_t K)
    : K_(checked_order(K)), upper_(static_cast<size_t>(K_) * static_cast<size_t>(K_), 0.0) {}

void HessianAccumulator::add_token_major(const float* X_rows, int64_t M) {
  std::vector<double> chunk;
  for (int64_t t0 = 0; t0 < M; t0 += kChunkTokens) {
    const int64_t count = std::min(kChunkTokens, M - t0);
    chunk.assign(X_rows + t0 * K_, X_rows + (t0 + count) * K_);
    // H += 2 · chunkᵀ · chunk  (chunk is [count, K])
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, static_cast<int>(K_), static_cast<int>(count), 2.0,
                chunk.data(), static_cast<int>(K_), 1.0, upper_.data(), static_cast<int>(K_));
  }
  tokens_ += M;
}

void HessianAccumulator::add_feature_major(const float* X, int64_t M) {
  std::vector<double> chunk;
  for (int64_t t0 = 0; t0 < M; t0 += kChunkTokens) {
    const int64_t count = std::min(kChunkTokens, M - t0);
    chunk.resize(static_cast<size_t>(K_ * count));
    for (int64_t k = 0; k < K_; ++k) {
      for (int64_t t = 0; t < count; ++t) chunk[static_cast<size_t>(k * count + t)] = X[k * M + t0 + t];
    }
    // H += 2 · chunk · chunkᵀ  (chunk is [K, count])
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, static_cast<int>(K_), static_cast<int>(count), 2.0,
                chunk.data(), static_cast<int>(count), 1.0, upper_.data(), static_cast<int>(K_));
  }
  tokens_ += M;
}

void check_activations(const Tensor& activations, int64_t K, bool feature_major, const std::string& source) {
  if (activations.dtype != DType::F32 && activations.dtype != DType::F16 && activations.dtype != DType::BF16 &&
      activations.dtype != DType::F64) {
    throw Error(source + ": activations have dtype " + dtype_name(activations.dtype) +
                ", expected a float dtype (F32, F16, BF16 or F64)");
  }
  const std::string want = feature_major ? "[K, M] with K = " : "[M, K] (or [..., K]) with K = ";
  if (activations.rank() < 2 || (feature_major && activations.rank() != 2)) {
    throw Error(source + ": activations have shape " + shape_string(activations.shape) + ", expected " + want +
                std::to_string(K));
  }
  const int64_t features = feature_major ? activations.shape[0] : activations.shape.back();
  if (features != K) {
    throw Error(source + ": activations have shape " + shape_string(activations.shape) + ", expected " + want +
                std::to_string(K) + " (the weight's input size)");
  }
}

std::vector<float> activation_values(const Tensor& activations, int64_t K, bool feature_major, const std::string& source) {
  check_activations(activations, K, feature_major, source);
  std::vector<float> values = tensor_to_f32(activations);
  require_finite(values, source + ": ", " (as float32); activations must be finite");
  return values;
}

void HessianAccumulator::add_tensor(const Tensor& activations, bool feature_major, const std::string& source) {
  const std::vector<float> values = activation_values(activations, K_, feature_major, source);
  const int64_t M = activations.numel() / K_;
  if (feature_major) add_feature_major(values.data(), M);
  else add_token_major(values.data(), M);
}

std::vector<double> HessianAccumulator::hessian() const {
  std::vector<double> H = upper_;
  for (int64_t i = 0; i < K_; ++i) {
    for (int64_t j = 0; j < i; ++j) H[static_cast<size_t>(i * K_ + j)] = H[static_cast<size_t>(j * K_ + i)];
  }
  return H;
}

void save_hessian(const std::string& path, const std::vector<double>& H, int64_t K) {
  write_npy(path, Tensor::from_vector<double>({K, K}, H));
}

std::vector<double> load_hessian(const std::string& path, int64_t K) {
  const Tensor tensor = read_npy(path);
  if (tensor.rank() != 2 || tensor.shape[0] != K || tensor.shape[1] != K) {
    throw Error(path + ": Hessian has shape " + shape_string(tensor.shape) + ", expected [" + std::to_string(K) +
                ", " + std::to_string(K) + "] (K from the weight)");
  }
  if (tensor.dtype != DType::F64 && tensor.dtype != DType::F32) {
    throw Error(path + ": Hessian has dtype " + dtype_name(tensor.dtype) + ", expected F64 or F32");
  }
  std::vector<double> H = tensor_to_f64(tensor);
  check_hessian(H, K, path);
  return H;
}

void check_hessian(const std::vector<double>& H, int64_t K, const std::string& source) {
  if (K <= 0 || H.size() != static_cast<size_t>(K) * static_cast<size_t>(K)) {
    throw Error(source + ": Hessian holds " + std::to_string(H.size()) + " values, expected [" + std::to_string(K) +
                ", " + std::to_string(K) + "] (K from the weight)");
  }
  require_finite(H, source + ": Hessian ", "; a Hessian 2·X·Xᵀ is finite");
  for (int64_t i = 0; i < K; ++i) {
    const double diagonal = H[static_cast<size_t>(i * K + i)];
    if (diagonal < 0.0) {
      throw Error(source + ": Hessian diagonal entry [" + std::to_string(i) + ", " + std::to_string(i) + "] is " +
                  std::to_string(diagonal) + "; a Hessian 2·X·Xᵀ has none below 0");
    }
  }
}

}  // namespace qgru::gptq
