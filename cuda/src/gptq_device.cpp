// GPTQ on the GPU: gptq::DeviceOps on this library's kernels (gptq_launch.h), cuBLAS and cuSOLVER, and the
// entry points of qgru_cuda/gptq_device.h around the device-free driver (qgru/gptq/device_driver.h).
#include "qgru_cuda/gptq_device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "blas_handle.h"
#include "gptq_launch.h"
#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda {

namespace {

constexpr uint64_t kHessianStagingBytes = uint64_t{256} << 20;  // float32 rows + their float64 widening

int as_int(int64_t value) { return static_cast<int>(value); }  // cuBLAS dimensions (bounded by the layer's K, N)

cublasOperation_t op_of(gptq::DeviceOps::Op op) { return op == gptq::DeviceOps::Op::N ? CUBLAS_OP_N : CUBLAS_OP_T; }
cublasFillMode_t fill_of(gptq::DeviceOps::Fill fill) {
  return fill == gptq::DeviceOps::Fill::Upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
}

class CudaOps final : public gptq::DeviceOps {
 public:
  explicit CudaOps(cudaStream_t stream) : stream_(stream), blas_(stream), flag_(sizeof(int)) {}

  void* allocate(size_t bytes) override {
    void* device = nullptr;
    QGRU_CUDA_CHECK(cudaMalloc(&device, bytes));
    return device;
  }
  void release(void* device) noexcept override {
    if (device != nullptr) static_cast<void>(cudaFree(device));  // cudaFree waits for the work using it
  }
  void upload(void* device, const void* host, size_t bytes) override {
    count_host_transfer();
    QGRU_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
    // Pageable host memory: the call returns once the bytes are staged, so `host` may change afterwards.
  }
  void download(void* host, const void* device, size_t bytes) override {
    count_host_transfer();
    QGRU_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
    QGRU_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void fill_zero(void* device, size_t bytes) override { QGRU_CUDA_CHECK(cudaMemsetAsync(device, 0, bytes, stream_)); }
  void download_diagonal(double* host, const double* matrix, int64_t K) override {
    count_host_transfer();
    QGRU_CUDA_CHECK(cudaMemcpy2DAsync(host, sizeof(double), matrix, static_cast<size_t>(K + 1) * sizeof(double),
                                      sizeof(double), static_cast<size_t>(K), cudaMemcpyDeviceToHost, stream_));
    QGRU_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  uint64_t free_bytes() override {
    size_t free = 0, total = 0;
    QGRU_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return free;
  }

  bool any_nonfinite(const double* values, int64_t count) override {
    int flag = 0;
    QGRU_CUDA_CHECK(cudaMemsetAsync(flag_.data(), 0, sizeof(int), stream_));
    gptq_launch::count_nonfinite(values, count, static_cast<int*>(flag_.data()), stream_);
    download(&flag, flag_.data(), sizeof flag);
    return flag != 0;
  }
  bool any_nonfinite_rows(const float* src, int64_t ld, int64_t rows, int64_t cols) override {
    int flag = 0;
    QGRU_CUDA_CHECK(cudaMemsetAsync(flag_.data(), 0, sizeof(int), stream_));
    gptq_launch::count_nonfinite_rows(src, ld, rows, cols, static_cast<int*>(flag_.data()), stream_);
    download(&flag, flag_.data(), sizeof flag);
    return flag != 0;
  }
  void widen_rows(const float* src, int64_t ld, int64_t rows, int64_t cols, double* dst) override {
    gptq_launch::widen_rows(src, ld, rows, cols, dst, stream_);
  }
  void mirror_upper(double* H, int64_t K) override { gptq_launch::mirror_upper(H, K, stream_); }
  void grid_params_rows(const double* values, int64_t rows, int64_t row_stride, int64_t elem_stride, int64_t count,
                        int64_t maxq, bool sym, double* scale, double* zero) override {
    gptq_launch::grid_params_rows(values, rows, row_stride, elem_stride, count, maxq, sym, scale, zero, stream_);
  }
  void zero_columns(double* W, int64_t N, int64_t K, const int64_t* dead, int64_t dead_count) override {
    gptq_launch::zero_columns(W, N, K, dead, dead_count, stream_);
  }
  void gather_transposed(const double* W, int64_t N, int64_t K, const int64_t* perm, double* Wt) override {
    gptq_launch::gather_transposed(W, N, K, perm, Wt, stream_);
  }
  void gather_hessian(const double* H, int64_t K, const int64_t* perm, double* Hp) override {
    gptq_launch::gather_hessian(H, K, perm, Hp, stream_);
  }
  void reverse_shifted(const double* Hp, int64_t K, double shift, double* R) override {
    gptq_launch::reverse_shifted(Hp, K, shift, R, stream_);
  }
  void upper_from_reversed(const double* R, int64_t K, double* V) override {
    gptq_launch::upper_from_reversed(R, K, V, stream_);
  }
  void row_block(const double* Wt, int64_t N, int64_t K, int64_t i1, int64_t count, const double* U, const int32_t* slot,
                 const double* scale_table, const double* zero_table, int64_t maxq, double* err, int32_t* codes,
                 double* tie_margin) override {
    gptq_launch::row_block(Wt, N, K, i1, count, U, slot, scale_table, zero_table, maxq, err, codes, tie_margin, stream_);
  }
  void gather_code_rows(const int32_t* src, int64_t K, int64_t N, const int64_t* inverse, int32_t* dst) override {
    gptq_launch::gather_code_rows(src, K, N, inverse, dst, stream_);
  }
  void gather_double_rows(const double* src, int64_t K, int64_t N, const int64_t* inverse, double* dst) override {
    gptq_launch::gather_double_rows(src, K, N, inverse, dst, stream_);
  }
  void pack_qweight(const int32_t* codes, int64_t K, int64_t N, int bits, int32_t* qweight) override {
    gptq_launch::pack_qweight(codes, K, N, bits, qweight, stream_);
  }

  void dgemm(Op op_a, Op op_b, int64_t m, int64_t n, int64_t k, double alpha, const double* A, int64_t lda,
             const double* B, int64_t ldb, double beta, double* C, int64_t ldc) override {
    QGRU_CUBLAS_CHECK(blas::cublasDgemm(blas_.get(), op_of(op_a), op_of(op_b), as_int(m), as_int(n), as_int(k), &alpha,
                                        A, as_int(lda), B, as_int(ldb), &beta, C, as_int(ldc)));
  }
  void dsyrk(Fill fill, Op op, int64_t n, int64_t k, double alpha, const double* A, int64_t lda, double beta, double* C,
             int64_t ldc) override {
    QGRU_CUBLAS_CHECK(blas::cublasDsyrk(blas_.get(), fill_of(fill), op_of(op), as_int(n), as_int(k), &alpha, A,
                                        as_int(lda), &beta, C, as_int(ldc)));
  }
  int dpotrf(Fill fill, int64_t n, double* A, int64_t lda) override {
    return solver().dpotrf(fill == Fill::Upper, n, A, lda);
  }
  int dtrtri(Fill fill, int64_t n, double* A, int64_t lda) override {
    return solver().dtrtri(fill == Fill::Upper, n, A, lda);
  }

 private:
  // Created at the first factorization (loading cuSOLVER): a Hessian alone needs none.
  gptq_launch::Solver& solver() {
    if (!solver_) solver_ = std::make_unique<gptq_launch::Solver>(stream_);
    return *solver_;
  }

  cudaStream_t stream_;
  BlasHandle blas_;
  std::unique_ptr<gptq_launch::Solver> solver_;
  DeviceBuffer flag_;
};

}  // namespace

struct DeviceHessian::State {
  State(int64_t K, cudaStream_t work_stream, gptq::HessianProduct product)
      : stream(work_stream), device(current_device()), ops(work_stream), sum(ops, K, kHessianStagingBytes, product) {}
  static int current_device() {
    int device = 0;
    QGRU_CUDA_CHECK(cudaGetDevice(&device));
    return device;
  }
  cudaStream_t stream;
  int device;  // the GPU the matrices live on
  CudaOps ops;
  gptq::DeviceHessianSum sum;
};

namespace {
// A stream named as __cuda_array_interface__ (version 3) names it: 1 the legacy default stream, 2 the per-thread
// default stream, another nonzero value the cudaStream_t itself (0, "nothing to wait for", is the caller's).
cudaStream_t stream_of_interface_code(uintptr_t code) {
  if (code == 1) return cudaStreamLegacy;
  if (code == 2) return cudaStreamPerThread;
  return reinterpret_cast<cudaStream_t>(code);
}
}  // namespace

gptq::HessianProduct default_hessian_product() {
  const char* value = std::getenv("QGRU_CUDA_GPTQ_HESSIAN");
  if (value == nullptr || *value == '\0') return gptq::HessianProduct::kSyrk;
  return gptq::parse_hessian_product(value, "QGRU_CUDA_GPTQ_HESSIAN");
}

DeviceHessian::DeviceHessian(int64_t K, void* stream) : DeviceHessian(K, stream, default_hessian_product()) {}

DeviceHessian::DeviceHessian(int64_t K, void* stream, gptq::HessianProduct product) {
  require_device();
  state_ = std::make_unique<State>(K, static_cast<cudaStream_t>(stream), product);
}

DeviceHessian::~DeviceHessian() = default;

void DeviceHessian::add_token_major(const float* rows, int64_t M) { state_->sum.add_token_major(rows, M); }
void DeviceHessian::add_feature_major(const float* X, int64_t M) { state_->sum.add_feature_major(X, M); }
void DeviceHessian::add_device_rows(const float* rows, int64_t M, int64_t ld) {
  state_->sum.add_device_rows(rows, M, ld);
}
void DeviceHessian::add_stream_rows(const float* rows, int64_t M, int64_t ld, uintptr_t producer_stream,
                                    const std::string& source) {
  if (M == 0) return;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, rows) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());  // an address CUDA does not know: clear the sticky-free error
    attributes.type = cudaMemoryTypeUnregistered;
  }
  const bool on_device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
  if (!on_device || attributes.device != state_->device) {
    throw Error(source + ": rows are not in the memory of cuda:" + std::to_string(state_->device) +
                " (the GPU this Hessian accumulates on)" +
                (on_device ? "; they are on cuda:" + std::to_string(attributes.device) : std::string()));
  }
  if (producer_stream != 0) {
    // The accumulator's stream waits, on the GPU, for what the producer queued so far (the rows' writes).
    cudaEvent_t written = nullptr;
    QGRU_CUDA_CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    const cudaError_t recorded = cudaEventRecord(written, stream_of_interface_code(producer_stream));
    const cudaError_t waited = recorded == cudaSuccess ? cudaStreamWaitEvent(state_->stream, written, 0) : recorded;
    static_cast<void>(cudaEventDestroy(written));  // destroying a recorded event is allowed; the wait still holds
    QGRU_CUDA_CHECK(waited);
  }
  state_->sum.add_checked_device_rows(rows, M, ld, source);
  QGRU_CUDA_CHECK(cudaStreamSynchronize(state_->stream));  // the rows have been read: the caller may free them
}
int64_t DeviceHessian::K() const { return state_->sum.K(); }
int64_t DeviceHessian::tokens() const { return state_->sum.tokens(); }
const double* DeviceHessian::device_hessian() { return state_->sum.device_hessian(); }
std::vector<double> DeviceHessian::hessian() { return state_->sum.hessian(); }

DeviceGptqOutput gptq_quantize_device(const std::vector<double>& W, int64_t N, int64_t K, const double* device_H,
                                      const gptq::GptqOptions& options, const DeviceGptqRequest& request,
                                      void* stream) {
  gptq::check_gptq_options(options);
  gptq::check_gptq_weight(W, N, K);
  require_device();
  CudaOps ops(static_cast<cudaStream_t>(stream));
  return gptq::device_gptq(ops, W, N, K, device_H, options, request);
}

DeviceGptqOutput gptq_quantize_device(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                                      const gptq::GptqOptions& options, const DeviceGptqRequest& request,
                                      void* stream) {
  gptq::check_gptq_options(options);
  gptq::check_gptq_weight(W, N, K);
  gptq::check_gptq_hessian(H, K);
  require_device();
  CudaOps ops(static_cast<cudaStream_t>(stream));
  double* device_H = static_cast<double*>(ops.allocate(H.size() * sizeof(double)));
  try {
    ops.upload(device_H, H.data(), H.size() * sizeof(double));
    DeviceGptqOutput out = gptq::device_gptq(ops, W, N, K, device_H, options, request);
    ops.release(device_H);
    return out;
  } catch (...) {
    ops.release(device_H);
    throw;
  }
}

gptq::GptqResult gptq_quantize_cuda(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                                    const gptq::GptqOptions& options) {
  DeviceGptqOutput out = gptq_quantize_device(W, N, K, H, options);
  log()->debug("gptq --device cuda: {:.3f} s on the device", out.seconds);
  return std::move(out.result);
}

}  // namespace qgru::cuda
