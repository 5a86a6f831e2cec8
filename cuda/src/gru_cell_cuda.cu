// GruCellCuda: cuBLAS int8 GEMMs + one elementwise kernel per step calling gru_cell_element.
// The flow is emulate_gru_cell_int8 (qgru/dequant/gru_step.h) with cublasGemmEx for the reference GEMM.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "qgru/dequant/gru_step.h"
#include "qgru/dequant/int8_gemm_layout.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/gru_cell_cuda.h"

namespace qgru::cuda {

namespace {

constexpr int kStepThreads = 256;

// One time step, one thread per (n, j): qgru/dequant/gru_step.h (raw accumulators, the shared cell).
__global__ void __launch_bounds__(kStepThreads)
    gru_step_kernel(const GruCellParamsView view, const int32_t* gemm_x_t, const int32_t* gemm_h, int64_t ldc,
                    int32_t x_offset, int32_t h_offset, int32_t* h_state, int8_t* h8, int64_t h8_ld, int32_t* out_t,
                    int64_t N) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * view.hidden_size) return;
  dequant::gru_step_element(view, gemm_x_t, gemm_h, ldc, x_offset, h_offset, h_state, h8, h8_ld, out_t,
                            idx / view.hidden_size, static_cast<int32_t>(idx % view.hidden_size));
}

template <typename T>
DeviceBuffer upload_array(const T* host, int64_t count) {
  DeviceBuffer buffer(static_cast<size_t>(count) * sizeof(T));
  buffer.upload(host, static_cast<size_t>(count) * sizeof(T));
  return buffer;
}

}  // namespace

struct GruCellCuda::Impl {
  int64_t H = 0, C = 0;
  int32_t x_offset = 0, h_offset = 0;
  GruCellParamsView device_view{};  // pointers into the buffers below
  CodeSpace h_space{};
  std::vector<DeviceBuffer> arrays;  // every per-channel and activation array
  DeviceBuffer W8, R8;               // int8 [rows_p, C_p], [rows_p, H_p]
  int64_t rows_p = 0, C_p = 0, H_p = 0;
  cublasHandle_t handle = nullptr;
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
};

GruCellCuda::GruCellCuda(const GruCellParamsView& v, const int32_t* q_W, const int32_t* q_R, int input_size,
                         const CodeSpace& x_space)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.H = v.hidden_size;
  d.C = input_size;
  const dequant::GruGemmLayout layout = dequant::plan_gru_gemm(d.H, d.C, 1, 1);
  d.rows_p = layout.rows_p;
  d.C_p = layout.C_p;
  d.H_p = layout.H_p;
  const int64_t rows = 3 * d.H;
  auto require_int8 = [&](const char* what, int32_t q_min, int32_t q_max, bool weights, int32_t& offset) {
    const std::string why = dequant::int8_operand_offset(q_min, q_max, offset);
    if (!why.empty() || (weights && offset != 0)) {
      throw NotSupported(std::string("GRU cell on CUDA (H=") + std::to_string(d.H) + " C=" + std::to_string(d.C) + "): " +
                         what + (why.empty() ? " must be signed codes in [-128, 127]" : ": " + why));
    }
  };
  int32_t unused = 0;
  const auto W_range = std::minmax_element(q_W, q_W + rows * d.C);
  const auto R_range = std::minmax_element(q_R, q_R + rows * d.H);
  require_int8("q_W", *W_range.first, *W_range.second, true, unused);
  require_int8("q_R", *R_range.first, *R_range.second, true, unused);
  require_int8("x", x_space.q_min, x_space.q_max, false, d.x_offset);
  require_int8("h", v.h.q_min, v.h.q_max, false, d.h_offset);
  d.h_space = v.h;

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
  d.W8 = DeviceBuffer::from(dequant::pack_int8_rows(q_W, rows, d.C, d.rows_p, d.C_p, 0, "q_W"));
  d.R8 = DeviceBuffer::from(dequant::pack_int8_rows(q_R, rows, d.H, d.rows_p, d.H_p, 0, "q_R"));
  QGRU_CUBLAS_CHECK(cublasCreate(&d.handle));
}

GruCellCuda::~GruCellCuda() = default;
GruCellCuda::GruCellCuda(GruCellCuda&&) noexcept = default;
GruCellCuda& GruCellCuda::operator=(GruCellCuda&&) noexcept = default;

std::vector<int32_t> GruCellCuda::run(const int32_t* q_x, int T, int N, const int32_t* q_h0, bool reverse) const {
  const Impl& d = *impl_;
  const dequant::GruGemmLayout l = dequant::plan_gru_gemm(d.H, d.C, N, T);
  const int64_t H = d.H;
  // Inputs: x for all steps and the initial state, packed with their offsets.
  const DeviceBuffer x8 = DeviceBuffer::from(dequant::pack_int8_rows(q_x, int64_t{T} * N, d.C, int64_t{T} * N, l.C_p, d.x_offset, "q_x"));
  std::vector<int32_t> h0(static_cast<size_t>(N * H), d.h_space.zp);
  if (q_h0 != nullptr) h0.assign(q_h0, q_h0 + N * H);
  DeviceBuffer h_state = DeviceBuffer::from(h0);
  DeviceBuffer h8 = DeviceBuffer::from(dequant::pack_int8_rows(h0.data(), N, H, N, l.H_p, d.h_offset, "q_h0"));
  DeviceBuffer gemm_x(static_cast<size_t>(l.gemm_x_bytes)), gemm_h(static_cast<size_t>(l.gemm_h_bytes));
  DeviceBuffer out(static_cast<size_t>(l.output_bytes));

  const int32_t one = 1, zero = 0;
  // B-1 for every step: gemm_x[t·N + n, c] = Σ_k W8[c, k] · x8[t·N + n, k]
  QGRU_CUBLAS_CHECK(cublasGemmEx(d.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(l.rows_p), T * N,
                                 static_cast<int>(l.C_p), &one, d.W8.data(), CUDA_R_8I, static_cast<int>(l.C_p), x8.data(),
                                 CUDA_R_8I, static_cast<int>(l.C_p), &zero, gemm_x.data(), CUDA_R_32I,
                                 static_cast<int>(l.rows_p), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
  const int64_t blocks = (int64_t{N} * H + kStepThreads - 1) / kStepThreads;
  for (int s = 0; s < T; ++s) {
    const int t = reverse ? T - 1 - s : s;
    // B-2: gemm_h[n, c] = Σ_k R8[c, k] · h8[n, k]
    QGRU_CUBLAS_CHECK(cublasGemmEx(d.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(l.rows_p), N,
                                   static_cast<int>(l.H_p), &one, d.R8.data(), CUDA_R_8I, static_cast<int>(l.H_p),
                                   h8.data(), CUDA_R_8I, static_cast<int>(l.H_p), &zero, gemm_h.data(), CUDA_R_32I,
                                   static_cast<int>(l.rows_p), CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT));
    gru_step_kernel<<<static_cast<unsigned>(blocks), kStepThreads>>>(
        d.device_view, static_cast<const int32_t*>(gemm_x.data()) + int64_t{t} * N * l.rows_p,
        static_cast<const int32_t*>(gemm_h.data()), l.rows_p, d.x_offset, d.h_offset, static_cast<int32_t*>(h_state.data()),
        static_cast<int8_t*>(h8.data()), l.H_p, static_cast<int32_t*>(out.data()) + int64_t{t} * N * H, N);
    QGRU_CUDA_CHECK_LAUNCH("gru_step_kernel<<<...>>>");
  }
  QGRU_CUDA_CHECK(cudaDeviceSynchronize());
  return out.to_vector<int32_t>(static_cast<size_t>(int64_t{T} * N * H));
}

}  // namespace qgru::cuda
