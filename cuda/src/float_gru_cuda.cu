// FloatGruCuda: cublasSgemm for the linears, one elementwise kernel per step calling the shared
// float_gru_cell_element (qgru/model/float_gru_cell.h); the linear_before_reset = 0 cell adds, per step, a kernel
// calling the shared float_gru_reset_hidden and a second GEMM (R_n (r ⊙ h)) between them.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/io/sequence_io.h"
#include "qgru/kernels/float_gru_flow.h"
#include "qgru/kernels/workspace.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/float_gru_cuda.h"
#include "qgru_cuda/status.h"
#include "cuda_uploader.h"
#include "pinned_buffer.h"

namespace qgru::cuda {

namespace {

constexpr int kFloatStepThreads = 256;

// One step of one cell, one thread per element of [N, H]: kernels::float_gru_step_at (qgru/kernels/float_gru_flow.h,
// which says what each buffer holds); the GEMMs that read h finished before this kernel on the same stream.
__global__ void __launch_bounds__(kFloatStepThreads)
    float_gru_step_kernel(const float* ih_t, const float* hh, const float* bw, const float* br, float* h, float* out_t,
                          int64_t out_stride, int64_t out_offset, int64_t N, int64_t H, bool linear_before_reset,
                          const int32_t* lengths, int64_t t) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * H) return;
  kernels::float_gru_step_at(idx, H, ih_t, hh, bw, br, h, out_t, out_stride, out_offset, linear_before_reset, lengths, t);
}

// The linear_before_reset = 0 cell's r ⊙ h, one thread per element: kernels::float_gru_reset_hidden_at.
__global__ void __launch_bounds__(kFloatStepThreads)
    float_gru_reset_hidden_kernel(const float* ih_t, const float* hh, const float* bw, const float* br, const float* h,
                                  float* reset_hidden, int64_t N, int64_t H) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * H) return;
  kernels::float_gru_reset_hidden_at(idx, H, ih_t, hh, bw, br, h, reset_hidden);
}

// One GEMM of the flow (kernels::FloatGemm: C[c_offset + i + ldc·j] = Σ_q A[a_offset + q + lda·i] · B[q + ldb·j]).
void sgemm(cublasHandle_t handle, const kernels::FloatGemm& g, const float* A, const float* B, float* C) {
  const float one = 1.0f, zero = 0.0f;
  QGRU_CUBLAS_CHECK(blas::cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(g.m), static_cast<int>(g.n),
                                      static_cast<int>(g.k), &one, A + g.a_offset, static_cast<int>(g.lda), B,
                                      static_cast<int>(g.ldb), &zero, C + g.c_offset, static_cast<int>(g.ldc)));
}

// A cell's weights on the device; C is the layer's input width (C, then D·H: the constructor checks it).
struct DeviceCell {
  const float *W = nullptr, *R = nullptr, *bw = nullptr, *br = nullptr;  // [3H, C], [3H, H], [3H], [3H]
};

float* at(const DeviceBuffer& buffer, const kernels::WorkspaceCarve& carve, size_t i) {
  return reinterpret_cast<float*>(static_cast<char*>(buffer.data()) + carve.offsets[i]);
}

kernels::WorkspaceCarve float_workspace(const FloatGruModel& model, int64_t T, int64_t N) {
  const int64_t H = model.hidden_size, D = model.num_directions;
  const int64_t width = std::max<int64_t>(model.input_size, D * H);
  const int64_t cells = model.num_layers * D;
  return kernels::carve_workspace(
      {4 * T * N * width, 4 * T * N * width, 4 * T * N * 3 * H, 4 * N * 3 * H, 4 * N * H, 4 * cells * N * H,
       4 * N * H, 4 * N});
}

}  // namespace

int64_t float_gru_workspace_bytes(const FloatGruModel& model, int T, int N) {
  return float_workspace(model, T, N).total_bytes;
}

struct FloatGruCuda::Impl {
  int C = 0, H = 0, L = 0, D = 0;
  bool linear_before_reset = true;
  std::vector<DeviceCell> cells;
  std::vector<DeviceBuffer> arrays;  // the cells' uploads
  mutable PinnedBuffer pinned;       // output and h_n on their way back
  cublasHandle_t handle = nullptr;
  cudaStream_t stream = nullptr;
  mutable DeviceBuffer workspace;
  ~Impl() {
    if (handle != nullptr) blas::cublasDestroy(handle);  // destructor: nothing to report to
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

FloatGruCuda::FloatGruCuda(const FloatGruModel& model) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.C = model.input_size;
  d.H = model.hidden_size;
  d.L = model.num_layers;
  d.D = model.num_directions;
  if (d.C < 1 || d.H < 1 || d.L < 1 || (d.D != 1 && d.D != 2) || model.cells.size() != static_cast<size_t>(d.L * d.D)) {
    throw Error("CUDA float GRU: inconsistent model (C = " + std::to_string(d.C) + ", H = " + std::to_string(d.H) +
                ", " + std::to_string(model.cells.size()) + " cells for " + std::to_string(d.L) + " layer(s) x " +
                std::to_string(d.D) + " direction(s))");
  }
  d.linear_before_reset = model.linear_before_reset;
  const size_t H = static_cast<size_t>(d.H);
  for (size_t i = 0; i < model.cells.size(); ++i) {
    // Layer l's cells read C inputs (l = 0) or the previous layer's D·H: kernels::float_gru_flow's input GEMM.
    const GruCellWeights& w = model.cells[i];
    const int layer = static_cast<int>(i) / d.D, C = layer == 0 ? d.C : d.D * d.H;
    if (w.input_size != C || w.hidden_size != d.H || w.W.size() != 3 * H * static_cast<size_t>(C) ||
        w.R.size() != 3 * H * H || w.bw.size() != 3 * H || w.br.size() != 3 * H) {
      throw Error("CUDA float GRU: cell (layer " + std::to_string(layer) + ", direction " +
                  std::to_string(static_cast<int>(i) % d.D) + ") does not have the sizes of C = " + std::to_string(C) +
                  ", H = " + std::to_string(d.H));
    }
  }
  require_device();
  QGRU_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  QGRU_CUBLAS_CHECK(blas::cublasCreate(&d.handle));
  QGRU_CUBLAS_CHECK(blas::cublasSetStream(d.handle, d.stream));
  QGRU_CUBLAS_CHECK(blas::cublasSetMathMode(d.handle, CUBLAS_DEFAULT_MATH));  // fp32 GEMMs, no TF32
  // Every upload on d.stream, ending with its synchronization (the rule: qgru/kernels/device_upload.h).
  CudaUploader uploader(d.stream);
  for (const GruCellWeights& w : model.cells) {
    DeviceCell cell;
    cell.W = uploader.put(w.W.data(), static_cast<int64_t>(w.W.size()));
    cell.R = uploader.put(w.R.data(), static_cast<int64_t>(w.R.size()));
    cell.bw = uploader.put(w.bw.data(), static_cast<int64_t>(w.bw.size()));
    cell.br = uploader.put(w.br.data(), static_cast<int64_t>(w.br.size()));
    d.cells.push_back(cell);
  }
  uploader.finish();
  d.arrays = uploader.take();
}

FloatGruCuda::~FloatGruCuda() = default;
FloatGruCuda::FloatGruCuda(FloatGruCuda&&) noexcept = default;
FloatGruCuda& FloatGruCuda::operator=(FloatGruCuda&&) noexcept = default;

FloatGruResult FloatGruCuda::run(const float* x, int T_, int N_, const float* h0, const int32_t* lengths) const {
  const Impl& d = *impl_;
  if (T_ < 1 || N_ < 1) {
    throw Error("CUDA float GRU: sequence length and batch must be positive, got T = " + std::to_string(T_) +
                ", N = " + std::to_string(N_));
  }
  check_sequence_lengths(lengths, T_, N_);
  const int64_t T = T_, N = N_, H = d.H, D = d.D;
  if (T * N > INT32_MAX || 3 * H > INT32_MAX) throw Error("CUDA float GRU: T·N or 3H exceeds cuBLAS's int");
  FloatGruModel shape;
  shape.input_size = d.C;
  shape.hidden_size = d.H;
  shape.num_directions = d.D;
  shape.num_layers = d.L;
  const kernels::WorkspaceCarve w = float_workspace(shape, T, N);
  if (d.workspace.bytes() < static_cast<size_t>(w.total_bytes)) d.workspace = DeviceBuffer(static_cast<size_t>(w.total_bytes));
  float* layer_in = at(d.workspace, w, 0);
  float* layer_out = at(d.workspace, w, 1);
  float* ih = at(d.workspace, w, 2);
  float* hh = at(d.workspace, w, 3);
  float* h = at(d.workspace, w, 4);
  float* h_n = at(d.workspace, w, 5);
  float* reset_hidden = at(d.workspace, w, 6);  // the linear_before_reset = 0 cell's r ⊙ h
  int32_t* device_lengths = nullptr;
  if (lengths != nullptr) {
    device_lengths = reinterpret_cast<int32_t*>(at(d.workspace, w, 7));
    QGRU_CUDA_CHECK(cudaMemcpyAsync(device_lengths, lengths, static_cast<size_t>(4 * N), cudaMemcpyHostToDevice, d.stream));
  }

  FloatGruResult result;
  result.T = T_;
  result.N = N_;
  result.h_n.assign(static_cast<size_t>(d.L * D * N * H), 0.0f);
  QGRU_CUDA_CHECK(cudaMemcpyAsync(layer_in, x, static_cast<size_t>(4 * T * N * d.C), cudaMemcpyHostToDevice, d.stream));
  // The flow's operations on d.stream, in kernels::float_gru_flow's order.
  struct DeviceOps {
    const Impl& d;
    const float* h0;
    float* h_n;
    const int32_t* lengths;  // on the device, or null
    int64_t N, H, blocks;
    void gemm(int64_t cell, kernels::FloatGruWeights which, const kernels::FloatGemm& g, const float* B, float* C) {
      const DeviceCell& c = d.cells[static_cast<size_t>(cell)];
      sgemm(d.handle, g, which == kernels::FloatGruWeights::W ? c.W : c.R, B, C);
    }
    void load_state(int64_t cell, float* h) {
      if (h0 != nullptr) {
        QGRU_CUDA_CHECK(cudaMemcpyAsync(h, h0 + cell * N * H, static_cast<size_t>(4 * N * H), cudaMemcpyHostToDevice,
                                        d.stream));
      } else {
        QGRU_CUDA_CHECK(cudaMemsetAsync(h, 0, static_cast<size_t>(4 * N * H), d.stream));
      }
    }
    void reset_hidden(const float* ih_t, const float* hh, const float* h, float* out, int64_t cell) {
      const DeviceCell& c = d.cells[static_cast<size_t>(cell)];
      float_gru_reset_hidden_kernel<<<static_cast<unsigned>(blocks), kFloatStepThreads, 0, d.stream>>>(ih_t, hh, c.bw, c.br,
                                                                                                       h, out, N, H);
      QGRU_CUDA_CHECK_LAUNCH("float_gru_reset_hidden_kernel<<<...>>>");
    }
    void step(const float* ih_t, const float* hh, float* h, float* out_t, int64_t out_stride, int64_t out_offset,
              int64_t t, int64_t cell) {
      const DeviceCell& c = d.cells[static_cast<size_t>(cell)];
      float_gru_step_kernel<<<static_cast<unsigned>(blocks), kFloatStepThreads, 0, d.stream>>>(
          ih_t, hh, c.bw, c.br, h, out_t, out_stride, out_offset, N, H, d.linear_before_reset, lengths, t);
      QGRU_CUDA_CHECK_LAUNCH("float_gru_step_kernel<<<...>>>");
    }
    // h_n stays on the device (a copy to pageable host memory here would block the host until this cell
    // finished, before the next cell's launches are queued); it comes back with the output below.
    void save_state(int64_t cell, const float* h) {
      QGRU_CUDA_CHECK(cudaMemcpyAsync(h_n + cell * N * H, h, static_cast<size_t>(4 * N * H), cudaMemcpyDeviceToDevice,
                                      d.stream));
    }
  } ops{d, h0, h_n, device_lengths, N, H, kernels::elementwise_blocks(N * H, kFloatStepThreads)};
  const kernels::FloatGruFlowBuffers buffers{layer_in, layer_out, ih, hh, h, reset_hidden};
  const float* output = kernels::float_gru_flow(d.C, H, d.L, D, T, N, d.linear_before_reset, buffers, ops);
  result.output.resize(static_cast<size_t>(T * N * D * H));
  const size_t output_bytes = result.output.size() * sizeof(float), h_n_bytes = result.h_n.size() * sizeof(float);
  char* pinned = static_cast<char*>(d.pinned.reserve(output_bytes + h_n_bytes));
  QGRU_CUDA_CHECK(cudaMemcpyAsync(pinned, output, output_bytes, cudaMemcpyDeviceToHost, d.stream));
  QGRU_CUDA_CHECK(cudaMemcpyAsync(pinned + output_bytes, h_n, h_n_bytes, cudaMemcpyDeviceToHost, d.stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  std::memcpy(result.output.data(), pinned, output_bytes);
  std::memcpy(result.h_n.data(), pinned + output_bytes, h_n_bytes);
  return result;
}

}  // namespace qgru::cuda
