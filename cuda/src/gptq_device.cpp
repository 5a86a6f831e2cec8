// GPTQ on the GPU: the host driver of qgru_cuda/gptq_device.h. The steps and their order are gptq.cpp's
// (qgru/gptq/gptq.h), with the choices that depend on diag(H) and the options only taken from the same
// column plan (qgru/gptq/column_plan.h) and the per-row work from the same QGRU_HD functions.
#include "qgru_cuda/gptq_device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>
#include <utility>

#include "blas_handle.h"
#include "gptq_launch.h"
#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/gptq/column_plan.h"
#include "qgru/gptq/device_plan.h"
#include "qgru/gptq/quantizer.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda {

namespace {

constexpr uint64_t kHessianStagingBytes = uint64_t{256} << 20;  // float32 rows + their float64 widening

template <typename T>
T* ptr(const DeviceBuffer& buffer) {
  return static_cast<T*>(buffer.data());
}

size_t bytes_of(int64_t a, int64_t b, size_t element) {
  return static_cast<size_t>(a) * static_cast<size_t>(b) * element;
}

template <typename T>
void upload_async(const DeviceBuffer& buffer, const std::vector<T>& host, cudaStream_t stream) {
  count_host_transfer();
  QGRU_CUDA_CHECK(cudaMemcpyAsync(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
}

template <typename T>
std::vector<T> download(const void* device, size_t count, cudaStream_t stream) {
  std::vector<T> host(count);
  count_host_transfer();
  QGRU_CUDA_CHECK(cudaMemcpyAsync(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost, stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

// The K diagonal entries of a row-major K×K device matrix.
std::vector<double> download_diagonal(const double* matrix, int64_t K, cudaStream_t stream) {
  std::vector<double> diagonal(static_cast<size_t>(K));
  count_host_transfer();
  QGRU_CUDA_CHECK(cudaMemcpy2DAsync(diagonal.data(), sizeof(double), matrix, static_cast<size_t>(K + 1) * sizeof(double),
                                    sizeof(double), static_cast<size_t>(K), cudaMemcpyDeviceToHost, stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
  return diagonal;
}

// [rows, cols] → [cols, rows] on the host.
template <typename T>
std::vector<T> transposed(const std::vector<T>& source, int64_t rows, int64_t cols) {
  std::vector<T> out(source.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = source[static_cast<size_t>(r * cols + c)];
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// DeviceHessian

struct DeviceHessian::State {
  int64_t K = 0;
  int64_t tokens = 0;
  cudaStream_t stream = nullptr;
  DeviceBuffer H, staging, widened;
  int64_t chunk_rows = 0;
  BlasHandle blas;
  bool mirrored = true;  // the lower triangle (row-major) agrees with the upper one
};

DeviceHessian::DeviceHessian(int64_t K, void* stream) : state_(std::make_unique<State>()) {
  if (K <= 0) throw Error("gptq --device cuda: Hessian needs K > 0, got " + std::to_string(K));
  require_device();
  State& s = *state_;
  s.K = K;
  s.stream = static_cast<cudaStream_t>(stream);
  s.H = DeviceBuffer(bytes_of(K, K, sizeof(double)));
  QGRU_CUDA_CHECK(cudaMemsetAsync(s.H.data(), 0, s.H.bytes(), s.stream));
  s.chunk_rows = gptq::hessian_chunk_rows(K, int64_t{1} << 40, kHessianStagingBytes);
  s.staging = DeviceBuffer(bytes_of(s.chunk_rows, K, sizeof(float)));
  s.widened = DeviceBuffer(bytes_of(s.chunk_rows, K, sizeof(double)));
  s.blas = BlasHandle(s.stream);
}

DeviceHessian::~DeviceHessian() = default;

int64_t DeviceHessian::K() const { return state_->K; }
int64_t DeviceHessian::tokens() const { return state_->tokens; }

void DeviceHessian::add_device_rows(const float* rows, int64_t M, int64_t ld) {
  State& s = *state_;
  const double two = 2.0, one = 1.0;
  for (int64_t t0 = 0; t0 < M; t0 += s.chunk_rows) {
    const int64_t count = std::min(s.chunk_rows, M - t0);
    gptq_launch::widen_rows(rows + t0 * ld, ld, count, s.K, ptr<double>(s.widened), s.stream);
    // Column-major, the widened [count, K] rows are A = [K, count] (ld K): H += 2·A·Aᵀ. cuBLAS's lower
    // triangle of the column-major H is the row-major upper one.
    QGRU_CUBLAS_CHECK(cublasDsyrk(s.blas.get(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_N, static_cast<int>(s.K),
                                  static_cast<int>(count), &two, ptr<double>(s.widened), static_cast<int>(s.K), &one,
                                  ptr<double>(s.H), static_cast<int>(s.K)));
  }
  s.tokens += M;
  s.mirrored = false;
}

void DeviceHessian::add_token_major(const float* rows, int64_t M) {
  State& s = *state_;
  for (int64_t t0 = 0; t0 < M; t0 += s.chunk_rows) {
    const int64_t count = std::min(s.chunk_rows, M - t0);
    count_host_transfer();
    QGRU_CUDA_CHECK(cudaMemcpyAsync(s.staging.data(), rows + t0 * s.K, bytes_of(count, s.K, sizeof(float)),
                                    cudaMemcpyHostToDevice, s.stream));
    add_device_rows(ptr<float>(s.staging), count, s.K);
  }
}

void DeviceHessian::add_feature_major(const float* X, int64_t M) {
  State& s = *state_;
  const double two = 2.0, one = 1.0;
  for (int64_t t0 = 0; t0 < M; t0 += s.chunk_rows) {
    const int64_t count = std::min(s.chunk_rows, M - t0);
    count_host_transfer();
    QGRU_CUDA_CHECK(cudaMemcpy2DAsync(s.staging.data(), static_cast<size_t>(count) * sizeof(float), X + t0,
                                      static_cast<size_t>(M) * sizeof(float), static_cast<size_t>(count) * sizeof(float),
                                      static_cast<size_t>(s.K), cudaMemcpyHostToDevice, s.stream));
    gptq_launch::widen_rows(ptr<float>(s.staging), count, s.K, count, ptr<double>(s.widened), s.stream);
    // The widened [K, count] rows are, column-major, B = [count, K] (ld count): H += 2·Bᵀ·B.
    QGRU_CUBLAS_CHECK(cublasDsyrk(s.blas.get(), CUBLAS_FILL_MODE_LOWER, CUBLAS_OP_T, static_cast<int>(s.K),
                                  static_cast<int>(count), &two, ptr<double>(s.widened), static_cast<int>(count), &one,
                                  ptr<double>(s.H), static_cast<int>(s.K)));
  }
  s.tokens += M;
  s.mirrored = false;
}

const double* DeviceHessian::device_hessian() {
  State& s = *state_;
  if (!s.mirrored) {
    gptq_launch::mirror_upper(ptr<double>(s.H), s.K, s.stream);
    s.mirrored = true;
  }
  return ptr<double>(s.H);
}

std::vector<double> DeviceHessian::hessian() {
  const double* H = device_hessian();
  return download<double>(H, static_cast<size_t>(state_->K * state_->K), state_->stream);
}

// ---------------------------------------------------------------------------------------------------------
// GPTQ

DeviceGptqOutput gptq_quantize_device(const std::vector<double>& W, int64_t N, int64_t K, const double* device_H,
                                      const gptq::GptqOptions& options, const DeviceGptqRequest& request,
                                      void* stream_handle) {
  gptq::check_gptq_options(options);
  gptq::check_gptq_weight(W, N, K);
  require_device();
  const auto start = std::chrono::steady_clock::now();
  cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  const int64_t maxq = gptq::max_code(options.bits);
  const bool grouped = options.group_size != -1;
  const int64_t gs = grouped ? std::min(options.group_size, K) : K;
  const int64_t tables = gptq::group_count(K, options.group_size);
  const int64_t B = std::min(options.block_size, K);

  const gptq::DeviceGptqBytes need = gptq::device_gptq_bytes(N, K, B, tables, options.bits, request.want_tie_margin);
  size_t free_bytes = 0, total_bytes = 0;
  QGRU_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::string refusal = gptq::device_memory_refusal(N, K, need.total, free_bytes);
  if (!refusal.empty()) throw Error(refusal);

  // diag(H) on the host: dead columns and the plan. Non-finite entries anywhere are refused as on the CPU.
  DeviceBuffer flag(sizeof(int));
  QGRU_CUDA_CHECK(cudaMemsetAsync(flag.data(), 0, sizeof(int), stream));
  gptq_launch::count_nonfinite(device_H, K * K, ptr<int>(flag), stream);
  if (download<int>(flag.data(), 1, stream)[0] != 0) {
    throw Error("gptq: Hessian has a non-finite entry (NaN or Inf in the activations?)");
  }
  std::vector<double> diagonal = download_diagonal(device_H, K, stream);
  std::vector<int64_t> dead;
  for (int64_t i = 0; i < K; ++i) {
    if (diagonal[static_cast<size_t>(i)] == 0.0) {
      diagonal[static_cast<size_t>(i)] = 1.0;
      dead.push_back(i);
    }
  }
  const gptq::ColumnPlan plan = gptq::plan_columns(diagonal, options);
  std::vector<int64_t> inverse(static_cast<size_t>(K));
  for (int64_t p = 0; p < K; ++p) inverse[static_cast<size_t>(plan.perm[static_cast<size_t>(p)])] = p;

  // 1–3: parameters from the original W (no groups), dead columns zeroed, static groups' parameters.
  DeviceBuffer dW(bytes_of(N, K, sizeof(double)));
  upload_async(dW, W, stream);
  DeviceBuffer scale_table(bytes_of(tables, N, sizeof(double))), zero_table(bytes_of(tables, N, sizeof(double)));
  if (!grouped) {
    gptq_launch::grid_params_rows(ptr<double>(dW), N, K, 1, K, maxq, options.sym, ptr<double>(scale_table),
                                  ptr<double>(zero_table), stream);
  }
  DeviceBuffer dead_columns(std::max<size_t>(dead.size(), 1) * sizeof(int64_t));
  if (!dead.empty()) {
    upload_async(dead_columns, dead, stream);
    gptq_launch::zero_columns(ptr<double>(dW), N, K, ptr<int64_t>(dead_columns), static_cast<int64_t>(dead.size()),
                              stream);
  }
  if (grouped && options.static_groups) {
    for (int64_t g = 0; g < tables; ++g) {
      gptq_launch::grid_params_rows(ptr<double>(dW) + g * gs, N, K, 1, std::min(gs, K - g * gs), maxq, options.sym,
                                    ptr<double>(scale_table) + g * N, ptr<double>(zero_table) + g * N, stream);
    }
  }
  // 4: the permutation (identity included) into Wt [K, N] and Hp.
  DeviceBuffer perm(bytes_of(K, 1, sizeof(int64_t))), inverse_perm(bytes_of(K, 1, sizeof(int64_t)));
  DeviceBuffer slot(bytes_of(K, 1, sizeof(int32_t)));
  upload_async(perm, plan.perm, stream);
  upload_async(inverse_perm, inverse, stream);
  upload_async(slot, plan.slot, stream);
  DeviceBuffer Wt(bytes_of(K, N, sizeof(double)));
  gptq_launch::gather_transposed(ptr<double>(dW), N, K, ptr<int64_t>(perm), ptr<double>(Wt), stream);
  DeviceBuffer Hp(bytes_of(K, K, sizeof(double))), R(bytes_of(K, K, sizeof(double))), U(bytes_of(K, K, sizeof(double)));
  gptq_launch::gather_hessian(device_H, K, ptr<int64_t>(perm), ptr<double>(Hp), stream);

  // 5: damping (mean of the permuted diagonal, summed in processing order as gptq.cpp does) and U.
  double mean_diag = 0.0;
  for (int64_t p = 0; p < K; ++p) mean_diag += diagonal[static_cast<size_t>(plan.perm[static_cast<size_t>(p)])];
  mean_diag /= static_cast<double>(K);
  gptq_launch::Solver solver(K, ptr<double>(R), stream);
  double damp = options.damp;
  for (int attempt = 0;; ++attempt) {
    gptq_launch::reverse_shifted(ptr<double>(Hp), K, damp * mean_diag, ptr<double>(R), stream);
    bool ok = solver.upper_cholesky_of_inverse(ptr<double>(R), ptr<double>(U));
    if (ok) {
      for (double u : download_diagonal(ptr<double>(U), K, stream)) ok = ok && u > 0.0 && std::isfinite(u);
    }
    if (ok) break;
    if (attempt >= options.max_damp_retries) gptq::throw_not_positive_definite(damp, attempt + 1);
    log()->warn("gptq: H + {}·mean(diag H)·I is not positive definite; retrying with damp = {}", damp, damp * 10.0);
    damp *= 10.0;
  }

  // 6: blocks.
  DeviceBuffer err(bytes_of(B, N, sizeof(double)));
  DeviceBuffer codes_perm(bytes_of(K, N, sizeof(int32_t))), codes(bytes_of(K, N, sizeof(int32_t)));
  DeviceBuffer tie(request.want_tie_margin ? bytes_of(K, N, sizeof(double)) : 0);
  BlasHandle blas(stream);
  const double minus_one = -1.0, one = 1.0;
  size_t next_find = 0;
  for (int64_t i1 = 0; i1 < K; i1 += B) {
    const int64_t i2 = std::min(i1 + B, K);
    const int64_t count = i2 - i1;
    for (; next_find < plan.find_at.size() && plan.find_at[next_find] < i2; ++next_find) {
      const int64_t col = plan.find_at[next_find];
      const int64_t row = plan.find_slot[next_find];
      gptq_launch::grid_params_rows(ptr<double>(Wt) + col * N, N, 1, N, std::min(gs, K - col), maxq, options.sym,
                                    ptr<double>(scale_table) + row * N, ptr<double>(zero_table) + row * N, stream);
    }
    gptq_launch::row_block(ptr<double>(Wt), N, K, i1, count, ptr<double>(U), ptr<int32_t>(slot),
                           ptr<double>(scale_table), ptr<double>(zero_table), maxq, ptr<double>(err),
                           ptr<int32_t>(codes_perm), request.want_tie_margin ? ptr<double>(tie) : nullptr, stream);
    if (i2 < K) {
      // Wt[i2:, :] −= (Err · U[i1:i2, i2:])ᵀ, column-major: C [N, K − i2] (ld N) −= E [N, count] (ld N) ·
      // op_T(S), S the column-major [K − i2, count] view of U[i1:i2, i2:] (ld K).
      QGRU_CUBLAS_CHECK(cublasDgemm(blas.get(), CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(N), static_cast<int>(K - i2),
                                    static_cast<int>(count), &minus_one, ptr<double>(err), static_cast<int>(N),
                                    ptr<double>(U) + i1 * K + i2, static_cast<int>(K), &one, ptr<double>(Wt) + i2 * N,
                                    static_cast<int>(N)));
    }
  }

  // Codes back to the original order, packed on the device.
  gptq_launch::gather_code_rows(ptr<int32_t>(codes_perm), K, N, ptr<int64_t>(inverse_perm), ptr<int32_t>(codes), stream);
  DeviceGptqOutput out;
  const int64_t words = K * options.bits % 32 == 0 ? K * options.bits / 32 : 0;
  if (words > 0) {
    DeviceBuffer qweight(bytes_of(words, N, sizeof(int32_t)));
    gptq_launch::pack_qweight(ptr<int32_t>(codes), K, N, options.bits, ptr<int32_t>(qweight), stream);
    out.qweight = download<int32_t>(qweight.data(), static_cast<size_t>(words * N), stream);
  }
  gptq::GptqResult& result = out.result;
  result.N = N;
  result.K = K;
  result.G = tables;
  result.bits = options.bits;
  result.scales = download<double>(scale_table.data(), static_cast<size_t>(tables * N), stream);
  const std::vector<double> zeros = download<double>(zero_table.data(), static_cast<size_t>(tables * N), stream);
  result.zeros.assign(zeros.begin(), zeros.end());  // integral values in [0, maxq]
  result.g_idx = plan.g_idx;
  result.perm = plan.perm;
  result.damp_used = damp;
  result.dead_columns = static_cast<int64_t>(dead.size());
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (request.want_codes) {
    result.codes = transposed(download<int32_t>(codes.data(), static_cast<size_t>(K * N), stream), K, N);
  }
  if (request.want_tie_margin) {  // Wt is free now: the margins in original order
    gptq_launch::gather_double_rows(ptr<double>(tie), K, N, ptr<int64_t>(inverse_perm), ptr<double>(Wt), stream);
    out.tie_margin = transposed(download<double>(Wt.data(), static_cast<size_t>(K * N), stream), K, N);
  }
  return out;
}

DeviceGptqOutput gptq_quantize_device(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                                      const gptq::GptqOptions& options, const DeviceGptqRequest& request,
                                      void* stream_handle) {
  gptq::check_gptq_options(options);
  gptq::check_gptq_weight(W, N, K);
  gptq::check_gptq_hessian(H, K);
  require_device();
  cudaStream_t stream = static_cast<cudaStream_t>(stream_handle);
  DeviceBuffer device_H(H.size() * sizeof(double));
  upload_async(device_H, H, stream);
  return gptq_quantize_device(W, N, K, ptr<double>(device_H), options, request, stream);
}

gptq::GptqResult gptq_quantize_cuda(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                                    const gptq::GptqOptions& options) {
  DeviceGptqOutput out = gptq_quantize_device(W, N, K, H, options);
  log()->debug("gptq --device cuda: {:.3f} s on the device", out.seconds);
  return std::move(out.result);
}

}  // namespace qgru::cuda
