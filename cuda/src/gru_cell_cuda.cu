// GruCellCuda: the GEMMs (cuBLAS int8, or the wide 16-bit kernel) + one elementwise kernel per step calling
// gru_cell_element. The flow is kernels::emulate_gru_cell (qgru/kernels/gru_step.h) with the device doing the
// GEMMs; every kernel body is QGRU_HD code the CPU tests run.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "qgru/kernels/gru_step.h"
#include "qgru/kernels/int8_gemm_layout.h"
#include "qgru/kernels/wide_gemm.h"
#include "qgru/kernels/workspace.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/gru_cell_cuda.h"

namespace qgru::cuda {

namespace {

constexpr int kStepThreads = 256;

// One time step, one thread per (n, j): qgru/kernels/gru_step.h (raw accumulators, the shared cell).
// Acc/Stored: int32_t/int8_t (cuBLAS int8 path) or int64_t/int16_t (wide path).
template <class Acc, class Stored>
__global__ void __launch_bounds__(kStepThreads)
    gru_step_kernel(const GruCellParamsView view, const Acc* gemm_x_t, const Acc* gemm_h, int64_t ldc, int32_t x_offset,
                    int32_t h_offset, int32_t* h_state, Stored* h_stored, int64_t h_ld, int32_t* out_t, int64_t N,
                    const int32_t* lengths, int64_t t) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * view.hidden_size) return;
  kernels::gru_step_element_t<Acc, Stored>(view, gemm_x_t, gemm_h, ldc, x_offset, h_offset, h_state, h_stored, h_ld,
                                           out_t, idx / view.hidden_size, static_cast<int32_t>(idx % view.hidden_size),
                                           lengths, t);
}

// C[b·ldc + c] = Σ_k A[c·lda + k]·B[b·ldb + k], int16 operands, int64 accumulation (qgru/kernels/wide_gemm.h:
// geometry from plan_wide_gemm, the three phases are the QGRU_HD functions emulate_wide_gemm_tiled runs).
__global__ void __launch_bounds__(kernels::kWideTile* kernels::kWideTile)
    wide_gemm_kernel(const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb, int64_t* C, int64_t ldc, int64_t m,
                     int64_t n, int64_t k_p) {
  __shared__ int16_t a_tile[kernels::kWideTile * kernels::kWideTileLd];
  __shared__ int16_t b_tile[kernels::kWideTile * kernels::kWideTileLd];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t bx = blockIdx.x, by = blockIdx.y;
  int64_t acc = 0;
  for (int64_t k0 = 0; k0 < k_p; k0 += kernels::kWideTile) {
    kernels::wide_gemm_load_tile(A, lda, B, ldb, m, n, k0, bx, by, tx, ty, a_tile, b_tile);
    __syncthreads();
    acc = kernels::wide_gemm_tile_dot(a_tile, b_tile, tx, ty, acc);
    __syncthreads();
  }
  kernels::wide_gemm_store(C, ldc, m, n, bx, by, tx, ty, acc);
}

void launch_wide_gemm(const kernels::WideGemmGeometry& g, const int16_t* A, int64_t lda, const int16_t* B, int64_t ldb,
                      int64_t* C, int64_t ldc, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(g.grid_x), static_cast<unsigned>(g.grid_y));
  const dim3 block(kernels::kWideTile, kernels::kWideTile);
  wide_gemm_kernel<<<grid, block, 0, stream>>>(A, lda, B, ldb, C, ldc, g.m, g.n, g.k_p);
  QGRU_CUDA_CHECK_LAUNCH("wide_gemm_kernel<<<grid, 16x16>>>");
}

template <typename T>
DeviceBuffer upload_array(const T* host, int64_t count) {
  DeviceBuffer buffer(static_cast<size_t>(count) * sizeof(T));
  buffer.upload(host, static_cast<size_t>(count) * sizeof(T));
  return buffer;
}

template <typename T>
T* region(const DeviceBuffer& buffer, const kernels::WorkspaceCarve& carve, size_t i) {
  return reinterpret_cast<T*>(static_cast<char*>(buffer.data()) + carve.offsets[i]);
}

void copy_to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes > 0) QGRU_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

}  // namespace

struct GruCellCuda::Impl {
  int64_t H = 0, C = 0;
  kernels::GruOperandPlan plan;
  GruCellParamsView device_view{};  // pointers into the buffers below
  CodeSpace h_space{};
  std::vector<DeviceBuffer> arrays;  // every per-channel and activation array
  DeviceBuffer W, R;                 // int8 [rows_p, C_p], [rows_p, H_p] or int16 [3H, C_p], [3H, H_p]
  cublasHandle_t handle = nullptr;   // int8 path only
  cudaStream_t stream = nullptr;
  mutable DeviceBuffer workspace;    // grown by run() as needed
  ~Impl() {
    if (handle != nullptr) cublasDestroy(handle);  // destructor: nothing to report to
  }

  template <typename T>
  const T* keep(const T* host, int64_t count) {
    arrays.push_back(upload_array(host, count));
    return static_cast<const T*>(arrays.back().data());
  }
  ActivationView copy_activation(const ActivationView& a) {
    ActivationView d = a;
    if (a.impl == ActivationImpl::Table) {
      d.table = keep(a.table, static_cast<int64_t>(a.q_in_max) - a.q_in_min + 1);
    } else {
      d.pwl_threshold = keep(a.pwl_threshold, a.num_segments);
      d.pwl_q_b = keep(a.pwl_q_b, a.num_segments);
      d.pwl_term_c = keep(a.pwl_term_c, a.num_segments);
      d.pwl_shift = keep(a.pwl_shift, a.num_segments);
    }
    return d;
  }
  bool wide() const { return plan.path == kernels::GruGemmPath::Wide16; }
  void run_int8(const int32_t* q_x, int64_t T, int64_t N, const std::vector<int32_t>& h0, bool reverse, int32_t* out,
                const int32_t* lengths) const;
  void run_wide(const int32_t* q_x, int64_t T, int64_t N, const std::vector<int32_t>& h0, bool reverse, int32_t* out,
                const int32_t* lengths) const;
  kernels::WorkspaceCarve reserve(kernels::WorkspaceCarve carve) const {
    if (workspace.bytes() < static_cast<size_t>(carve.total_bytes)) workspace = DeviceBuffer(static_cast<size_t>(carve.total_bytes));
    return carve;
  }
};

GruCellCuda::GruCellCuda(const GruCellParamsView& v, const int32_t* q_W, const int32_t* q_R, int input_size,
                         const CodeSpace& x_space, void* stream)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.H = v.hidden_size;
  d.C = input_size;
  d.stream = static_cast<cudaStream_t>(stream);
  const int64_t rows = 3 * d.H;
  const auto W_range = std::minmax_element(q_W, q_W + rows * d.C);
  const auto R_range = std::minmax_element(q_R, q_R + rows * d.H);
  d.plan = kernels::plan_gru_operands(*W_range.first, *W_range.second, *R_range.first, *R_range.second, x_space, v.h);
  if (!d.plan.refused.empty()) {
    throw NotSupported("GRU cell on CUDA (H=" + std::to_string(d.H) + " C=" + std::to_string(d.C) + "): " + d.plan.refused);
  }
  d.h_space = v.h;
  // Shapes are checked before the device is asked (plan_* throw qgru::Error naming the shape).
  if (d.wide()) {
    kernels::plan_gru_wide(d.H, d.C, 1, 1);
  } else {
    kernels::plan_gru_gemm(d.H, d.C, 1, 1);
  }

  require_device();
  d.device_view = v;
  d.device_view.W_sum = d.keep(v.W_sum, rows);
  d.device_view.q_bw = d.keep(v.q_bw, rows);
  d.device_view.shift_bw_to_gemm_x = d.keep(v.shift_bw_to_gemm_x, rows);
  d.device_view.shift_gemm_x_to_weight_ih_linear = d.keep(v.shift_gemm_x_to_weight_ih_linear, rows);
  d.device_view.R_sum = d.keep(v.R_sum, rows);
  d.device_view.q_br = d.keep(v.q_br, rows);
  d.device_view.shift_br_to_gemm_h = d.keep(v.shift_br_to_gemm_h, rows);
  d.device_view.shift_gemm_h_to_weight_hh_linear = d.keep(v.shift_gemm_h_to_weight_hh_linear, rows);
  d.device_view.update_gate = d.copy_activation(v.update_gate);
  d.device_view.reset_gate = d.copy_activation(v.reset_gate);
  d.device_view.new_gate = d.copy_activation(v.new_gate);
  if (d.wide()) {
    const kernels::GruGemmLayout l = kernels::plan_gru_wide(d.H, d.C, 1, 1);
    d.W = DeviceBuffer::from(kernels::pack_int16_rows(q_W, rows, d.C, l.rows_p, l.C_p, 0, "q_W"));
    d.R = DeviceBuffer::from(kernels::pack_int16_rows(q_R, rows, d.H, l.rows_p, l.H_p, 0, "q_R"));
  } else {
    const kernels::GruGemmLayout l = kernels::plan_gru_gemm(d.H, d.C, 1, 1);
    d.W = DeviceBuffer::from(kernels::pack_int8_rows(q_W, rows, d.C, l.rows_p, l.C_p, 0, "q_W"));
    d.R = DeviceBuffer::from(kernels::pack_int8_rows(q_R, rows, d.H, l.rows_p, l.H_p, 0, "q_R"));
    QGRU_CUBLAS_CHECK(cublasCreate(&d.handle));
    QGRU_CUBLAS_CHECK(cublasSetStream(d.handle, d.stream));
  }
}

GruCellCuda::~GruCellCuda() = default;
GruCellCuda::GruCellCuda(GruCellCuda&&) noexcept = default;
GruCellCuda& GruCellCuda::operator=(GruCellCuda&&) noexcept = default;

bool GruCellCuda::wide() const { return impl_->wide(); }

int64_t GruCellCuda::workspace_bytes(int T, int N) const {
  return kernels::gru_cell_workspace(impl_->plan.path, impl_->H, impl_->C, N, T).total_bytes;
}

void GruCellCuda::Impl::run_int8(const int32_t* q_x, int64_t T, int64_t N, const std::vector<int32_t>& h0, bool reverse,
                                 int32_t* out_host, const int32_t* lengths) const {
  const kernels::GruGemmLayout l = kernels::plan_gru_gemm(H, C, N, T);
  const kernels::WorkspaceCarve w = reserve(kernels::gru_cell_workspace(plan.path, H, C, N, T));
  int8_t* x8 = region<int8_t>(workspace, w, 0);
  int8_t* h8 = region<int8_t>(workspace, w, 1);
  int32_t* gemm_x = region<int32_t>(workspace, w, 2);
  int32_t* gemm_h = region<int32_t>(workspace, w, 3);
  int32_t* h_state = region<int32_t>(workspace, w, 4);
  int32_t* out = region<int32_t>(workspace, w, 5);
  // Inputs: x for all steps and the initial state, packed with their offsets (host vectors live until the
  // stream is synchronized below).
  const std::vector<int8_t> x_host = kernels::pack_int8_rows(q_x, T * N, C, T * N, l.C_p, plan.x_offset, "q_x");
  const std::vector<int8_t> h_host = kernels::pack_int8_rows(h0.data(), N, H, N, l.H_p, plan.h_offset, "q_h0");
  copy_to_device(x8, x_host.data(), x_host.size(), stream);
  copy_to_device(h8, h_host.data(), h_host.size(), stream);
  copy_to_device(h_state, h0.data(), h0.size() * sizeof(int32_t), stream);

  const int32_t one = 1, zero = 0;
  // B-1 for every step: gemm_x[t·N + n, c] = Σ_k W8[c, k] · x8[t·N + n, k]
  QGRU_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(l.rows_p), static_cast<int>(T * N),
                                 static_cast<int>(l.C_p), &one, W.data(), CUDA_R_8I, static_cast<int>(l.C_p), x8, CUDA_R_8I,
                                 static_cast<int>(l.C_p), &zero, gemm_x, CUDA_R_32I, static_cast<int>(l.rows_p),
                                 CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
  const int64_t blocks = kernels::elementwise_blocks(N * H, kStepThreads);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    // B-2: gemm_h[n, c] = Σ_k R8[c, k] · h8[n, k]
    QGRU_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(l.rows_p), static_cast<int>(N),
                                   static_cast<int>(l.H_p), &one, R.data(), CUDA_R_8I, static_cast<int>(l.H_p), h8,
                                   CUDA_R_8I, static_cast<int>(l.H_p), &zero, gemm_h, CUDA_R_32I,
                                   static_cast<int>(l.rows_p), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
    gru_step_kernel<int32_t, int8_t><<<static_cast<unsigned>(blocks), kStepThreads, 0, stream>>>(
        device_view, gemm_x + t * N * l.rows_p, gemm_h, l.rows_p, plan.x_offset, plan.h_offset, h_state, h8, l.H_p,
        out + t * N * H, N, lengths, t);
    QGRU_CUDA_CHECK_LAUNCH("gru_step_kernel<int32_t, int8_t><<<...>>>");
  }
  QGRU_CUDA_CHECK(cudaMemcpyAsync(out_host, out, static_cast<size_t>(l.output_bytes), cudaMemcpyDeviceToHost, stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
}

void GruCellCuda::Impl::run_wide(const int32_t* q_x, int64_t T, int64_t N, const std::vector<int32_t>& h0, bool reverse,
                                 int32_t* out_host, const int32_t* lengths) const {
  const kernels::GruGemmLayout l = kernels::plan_gru_wide(H, C, N, T);
  const kernels::WorkspaceCarve w = reserve(kernels::gru_cell_workspace(plan.path, H, C, N, T));
  int16_t* x16 = region<int16_t>(workspace, w, 0);
  int16_t* h16 = region<int16_t>(workspace, w, 1);
  int64_t* gemm_x = region<int64_t>(workspace, w, 2);
  int64_t* gemm_h = region<int64_t>(workspace, w, 3);
  int32_t* h_state = region<int32_t>(workspace, w, 4);
  int32_t* out = region<int32_t>(workspace, w, 5);
  const std::vector<int16_t> x_host = kernels::pack_int16_rows(q_x, T * N, C, T * N, l.C_p, plan.x_offset, "q_x");
  const std::vector<int16_t> h_host = kernels::pack_int16_rows(h0.data(), N, H, N, l.H_p, plan.h_offset, "q_h0");
  copy_to_device(x16, x_host.data(), x_host.size() * sizeof(int16_t), stream);
  copy_to_device(h16, h_host.data(), h_host.size() * sizeof(int16_t), stream);
  copy_to_device(h_state, h0.data(), h0.size() * sizeof(int32_t), stream);

  const auto* W16 = static_cast<const int16_t*>(W.data());
  const auto* R16 = static_cast<const int16_t*>(R.data());
  // B-1 for every step: gemm_x[t·N + n, c] = Σ_k W16[c, k] · x16[t·N + n, k]
  launch_wide_gemm(kernels::plan_wide_gemm(l.rows_p, T * N, l.C_p), W16, l.C_p, x16, l.C_p, gemm_x, l.rows_p, stream);
  const kernels::WideGemmGeometry step_gemm = kernels::plan_wide_gemm(l.rows_p, N, l.H_p);
  const int64_t blocks = kernels::elementwise_blocks(N * H, kStepThreads);
  for (int64_t s = 0; s < T; ++s) {
    const int64_t t = reverse ? T - 1 - s : s;
    // B-2: gemm_h[n, c] = Σ_k R16[c, k] · h16[n, k]
    launch_wide_gemm(step_gemm, R16, l.H_p, h16, l.H_p, gemm_h, l.rows_p, stream);
    gru_step_kernel<int64_t, int16_t><<<static_cast<unsigned>(blocks), kStepThreads, 0, stream>>>(
        device_view, gemm_x + t * N * l.rows_p, gemm_h, l.rows_p, plan.x_offset, plan.h_offset, h_state, h16, l.H_p,
        out + t * N * H, N, lengths, t);
    QGRU_CUDA_CHECK_LAUNCH("gru_step_kernel<int64_t, int16_t><<<...>>>");
  }
  QGRU_CUDA_CHECK(cudaMemcpyAsync(out_host, out, static_cast<size_t>(l.output_bytes), cudaMemcpyDeviceToHost, stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::vector<int32_t> GruCellCuda::run(const int32_t* q_x, int T, int N, const int32_t* q_h0, bool reverse,
                                      const int32_t* lengths) const {
  const Impl& d = *impl_;
  std::vector<int32_t> h0(static_cast<size_t>(int64_t{N} * d.H), d.h_space.zp);
  if (q_h0 != nullptr) h0.assign(q_h0, q_h0 + int64_t{N} * d.H);
  std::vector<int32_t> out(static_cast<size_t>(int64_t{T} * N * d.H));
  if (T == 0 || N == 0) return out;
  // The lengths on the device for the run (kept until the run has synchronized).
  const DeviceBuffer lengths_device = lengths != nullptr ? upload_array(lengths, N) : DeviceBuffer();
  const int32_t* device_lengths = lengths != nullptr ? static_cast<const int32_t*>(lengths_device.data()) : nullptr;
  if (d.wide()) {
    d.run_wide(q_x, T, N, h0, reverse, out.data(), device_lengths);
  } else {
    d.run_int8(q_x, T, N, h0, reverse, out.data(), device_lengths);
  }
  return out;
}

}  // namespace qgru::cuda
