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
#include "qgru/kernels/workspace.h"
#include "qgru/model/float_gru_cell.h"
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

// A linear's value plus its bias, W x + bw or R h + br: the sum rounded to float once, as the CPU executor adds
// the bias in double.
__device__ __forceinline__ float with_bias(float linear, float bias) {
  return static_cast<float>(static_cast<double>(linear) + static_cast<double>(bias));
}

// One step of one cell, one thread per (n, j). ih_t [N, 3H] = W·x of this step and hh [N, 3H] = R·h, both
// without bias (the linear_before_reset = 0 cell: hh's n channels hold R_n (r ⊙ h) instead, without br_n);
// h [N, H] old state in, new state out (each thread reads and writes only its own element, and the GEMMs
// that read h finished before this kernel on the same stream); out_t: the step's row of the layer output,
// [N, out_stride] at column offset out_offset. lengths [N] or null: a row with t >= lengths[n] is padding
// (qgru::row_is_valid): its state stays and its output is 0, as in run_float_gru.
__global__ void __launch_bounds__(kFloatStepThreads)
    float_gru_step_kernel(const float* ih_t, const float* hh, const float* bw, const float* br, float* h, float* out_t,
                          int64_t out_stride, int64_t out_offset, int64_t N, int64_t H, bool linear_before_reset,
                          const int32_t* lengths, int64_t t) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * H) return;
  const int64_t n = idx / H, j = idx % H;
  float* out = out_t + n * out_stride + out_offset + j;
  if (lengths != nullptr && t >= lengths[n]) {
    *out = 0.0f;
    return;
  }
  float ih[3], hr[3];
  for (int g = 0; g < 3; ++g) {
    const int64_t c = g * H + j;
    ih[g] = with_bias(ih_t[n * 3 * H + c], bw[c]);
    hr[g] = with_bias(hh[n * 3 * H + c], br[c]);
  }
  const FloatGruElement e = float_gru_cell_element(ih[0], ih[1], ih[2], hr[0], hr[1], hr[2], h[idx], linear_before_reset);
  h[idx] = e.h_new;
  *out = e.h_new;
}

// The linear_before_reset = 0 cell's first half-step, one thread per (n, j): reset_hidden [N, H] = r ⊙ h from
// the step's W·x and R·h of the r channels (without bias; hh's z and r channels, its n channels not yet
// written), through the CPU executor's element (float_gru_reset_hidden). Padded rows compute it too; their
// state does not change and the step kernel ignores them.
__global__ void __launch_bounds__(kFloatStepThreads)
    float_gru_reset_hidden_kernel(const float* ih_t, const float* hh, const float* bw, const float* br, const float* h,
                                  float* reset_hidden, int64_t N, int64_t H) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * H) return;
  const int64_t n = idx / H, j = idx % H, c = H + j;  // the r channel of unit j
  reset_hidden[idx] =
      float_gru_reset_hidden(with_bias(ih_t[n * 3 * H + c], bw[c]), with_bias(hh[n * 3 * H + c], br[c]), h[idx]);
}

struct DeviceCell {
  int64_t C = 0;
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
  for (const GruCellWeights& w : model.cells) {
    if (w.W.size() != 3 * H * static_cast<size_t>(w.input_size) || w.R.size() != 3 * H * H || w.bw.size() != 3 * H ||
        w.br.size() != 3 * H) {
      throw Error("CUDA float GRU: a cell's tensors do not have the sizes of C = " + std::to_string(w.input_size) +
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
    cell.C = w.input_size;
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
  const float one = 1.0f, zero = 0.0f;
  const int64_t blocks = kernels::elementwise_blocks(N * H, kFloatStepThreads);
  // Rows of R applied to h: all three gates, or (linear_before_reset = 0) z and r, R_n taking r ⊙ h after.
  const int64_t rows_on_h = d.linear_before_reset ? 3 * H : 2 * H;
  for (int l = 0; l < d.L; ++l) {
    for (int dir = 0; dir < D; ++dir) {
      const size_t cell_index = static_cast<size_t>(l * D + dir);
      const DeviceCell& cell = d.cells[cell_index];
      // W·x for every (t, n): ih[t·N + n, c] = Σ_k W[c, k] · x[t·N + n, k] (the TN form, as the int8 path).
      QGRU_CUBLAS_CHECK(blas::cublasSgemm(d.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(3 * H),
                                          static_cast<int>(T * N), static_cast<int>(cell.C), &one, cell.W,
                                          static_cast<int>(cell.C), layer_in, static_cast<int>(cell.C), &zero, ih,
                                          static_cast<int>(3 * H)));
      if (h0 != nullptr) {
        QGRU_CUDA_CHECK(cudaMemcpyAsync(h, h0 + cell_index * N * H, static_cast<size_t>(4 * N * H), cudaMemcpyHostToDevice,
                                        d.stream));
      } else {
        QGRU_CUDA_CHECK(cudaMemsetAsync(h, 0, static_cast<size_t>(4 * N * H), d.stream));
      }
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = dir == 0 ? s : T - 1 - s;
        const float* ih_t = ih + t * N * 3 * H;
        // R·h: hh[n, c] = Σ_k R[c, k] · h[n, k] for c < rows_on_h (R's first rows_on_h rows, [rows_on_h, H])
        QGRU_CUBLAS_CHECK(blas::cublasSgemm(d.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows_on_h),
                                            static_cast<int>(N), static_cast<int>(H), &one, cell.R,
                                            static_cast<int>(H), h, static_cast<int>(H), &zero, hh,
                                            static_cast<int>(3 * H)));
        if (!d.linear_before_reset) {
          float_gru_reset_hidden_kernel<<<static_cast<unsigned>(blocks), kFloatStepThreads, 0, d.stream>>>(
              ih_t, hh, cell.bw, cell.br, h, reset_hidden, N, H);
          QGRU_CUDA_CHECK_LAUNCH("float_gru_reset_hidden_kernel<<<...>>>");
          // hh[n, 2H + j] = Σ_k R_n[j, k] · reset_hidden[n, k]: R's last H rows, into hh's n channels (ldc 3H)
          QGRU_CUBLAS_CHECK(blas::cublasSgemm(d.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(H),
                                              static_cast<int>(N), static_cast<int>(H), &one, cell.R + 2 * H * H,
                                              static_cast<int>(H), reset_hidden, static_cast<int>(H), &zero,
                                              hh + 2 * H, static_cast<int>(3 * H)));
        }
        float_gru_step_kernel<<<static_cast<unsigned>(blocks), kFloatStepThreads, 0, d.stream>>>(
            ih_t, hh, cell.bw, cell.br, h, layer_out + t * N * D * H, D * H, dir * H, N, H, d.linear_before_reset,
            device_lengths, t);
        QGRU_CUDA_CHECK_LAUNCH("float_gru_step_kernel<<<...>>>");
      }
      // h_n stays on the device (a copy to pageable host memory here would block the host until this cell
      // finished, before the next cell's launches are queued); it comes back with the output below.
      QGRU_CUDA_CHECK(cudaMemcpyAsync(h_n + cell_index * N * H, h, static_cast<size_t>(4 * N * H),
                                      cudaMemcpyDeviceToDevice, d.stream));
    }
    std::swap(layer_in, layer_out);  // layer l's output is layer l+1's input
  }
  result.output.resize(static_cast<size_t>(T * N * D * H));
  const size_t output_bytes = result.output.size() * sizeof(float), h_n_bytes = result.h_n.size() * sizeof(float);
  char* pinned = static_cast<char*>(d.pinned.reserve(output_bytes + h_n_bytes));
  QGRU_CUDA_CHECK(cudaMemcpyAsync(pinned, layer_in, output_bytes, cudaMemcpyDeviceToHost, d.stream));
  QGRU_CUDA_CHECK(cudaMemcpyAsync(pinned + output_bytes, h_n, h_n_bytes, cudaMemcpyDeviceToHost, d.stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(d.stream));
  std::memcpy(result.output.data(), pinned, output_bytes);
  std::memcpy(result.h_n.data(), pinned + output_bytes, h_n_bytes);
  return result;
}

}  // namespace qgru::cuda
