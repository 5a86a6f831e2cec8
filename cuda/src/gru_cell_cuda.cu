// GruCellCuda: the GEMMs (cuBLAS int8, or the wide 16-bit kernel) + one elementwise kernel per step calling
// gru_cell_element (the linear_before_reset = 0 cell: two GEMMs and two elementwise kernels per step). The flow is
// kernels::emulate_gru_cell (qgru/kernels/gru_step.h) with the device doing the GEMMs; every kernel body is
// QGRU_HD code the CPU tests run. Where the persistent plan takes an int8 cell (GruRecurrence::Persistent), B-1 and
// then ONE launch of the persistent kernel (cuda/src/persistent_gru.cu; its host emulation is
// kernels::emulate_persistent_gru_cell).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/kernels/device_flow.h"
#include "qgru/kernels/device_upload.h"
#include "qgru/kernels/gru_step.h"
#include "qgru/kernels/int8_gemm_layout.h"
#include "qgru/kernels/persistent_gru.h"
#include "qgru/kernels/wide_gemm.h"
#include "qgru/kernels/workspace.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/runtime/layer_loop.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/gru_cell_cuda.h"
#include "blas_handle.h"
#include "cuda_uploader.h"
#include "environment_setting.h"
#include "persistent_gru_launch.h"
#include "pinned_buffer.h"
#include "step_graph.h"

namespace qgru::cuda {

namespace {

constexpr int kStepThreads = 256;

// One time step, one thread per (n, j): qgru/kernels/gru_step.h (raw accumulators, the shared cell).
// Acc/Stored: int32_t/int8_t (cuBLAS int8 path) or int64_t/int16_t (wide path).
// gemm_rh/ldc_rh: the linear_before_reset = 0 cell's second GEMM (null otherwise).
template <class Acc, class Stored>
__global__ void __launch_bounds__(kStepThreads)
    gru_step_kernel(const GruCellParamsView view, const Acc* gemm_x_t, const Acc* gemm_h, int64_t ldc, int32_t x_offset,
                    int32_t h_offset, int32_t* h_state, Stored* h_stored, int64_t h_ld, int32_t* out_t, int64_t N,
                    const int32_t* lengths, int64_t t, const Acc* gemm_rh, int64_t ldc_rh) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * view.hidden_size) return;
  kernels::gru_step_element_t<Acc, Stored>(view, gemm_x_t, gemm_h, ldc, x_offset, h_offset, h_state, h_stored, h_ld,
                                           out_t, idx / view.hidden_size, static_cast<int32_t>(idx % view.hidden_size),
                                           lengths, t, gemm_rh, ldc_rh);
}

// The linear_before_reset = 0 cell's first elementwise kernel, one thread per (n, j): q_reset_hidden stored like h
// (qgru/kernels/gru_step.h gru_reset_hidden_element_t), the operand of the step's second GEMM.
template <class Acc, class Stored>
__global__ void __launch_bounds__(kStepThreads)
    reset_hidden_kernel(const GruCellParamsView view, const Acc* gemm_x_t, const Acc* gemm_h, int64_t ldc, int32_t x_offset,
                        int32_t h_offset, const int32_t* h_state, Stored* rh_stored, int64_t h_ld, int64_t N) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= N * view.hidden_size) return;
  kernels::gru_reset_hidden_element_t<Acc, Stored>(view, gemm_x_t, gemm_h, ldc, x_offset, h_offset, h_state, rh_stored,
                                                   h_ld, idx / view.hidden_size, static_cast<int32_t>(idx % view.hidden_size));
}

// The device flow's operand packing, one thread per element of the padded operand [steps, N_p, cols_p]
// (qgru/kernels/device_flow.h packed_input_element: the layer's x from its source, or h0 from the int32 state).
template <class Stored>
__global__ void __launch_bounds__(kStepThreads)
    pack_input_kernel(const kernels::LayerInputSource source, int64_t N, int64_t N_p, int64_t cols_p, int32_t offset,
                      int64_t count, Stored* out) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= count) return;
  out[idx] = kernels::packed_input_element<Stored>(source, N, N_p, cols_p, offset, idx);
}

template <class Stored>
void launch_pack_input(const kernels::LayerInputSource& source, int64_t steps, int64_t N, int64_t N_p, int64_t cols_p,
                       int32_t offset, Stored* out, cudaStream_t stream) {
  const int64_t count = steps * N_p * cols_p;
  if (count == 0) return;
  const int64_t blocks = kernels::elementwise_blocks(count, kStepThreads);
  pack_input_kernel<Stored><<<static_cast<unsigned>(blocks), kStepThreads, 0, stream>>>(source, N, N_p, cols_p, offset, count, out);
  QGRU_CUDA_CHECK_LAUNCH("pack_input_kernel<<<...>>>");
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
T* region(const DeviceBuffer& buffer, const kernels::WorkspaceCarve& carve, size_t i) {
  return reinterpret_cast<T*>(static_cast<char*>(buffer.data()) + carve.offsets[i]);
}

void copy_to_device(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes > 0) QGRU_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream));
}

// C[n_rows, ldc] (its first m columns) = the TN int8 GEMM of qgru/kernels/int8_gemm_layout.h with m weight rows
// (rows_p for R·h and W·x; rows_zr_p and rows_n_p for the linear_before_reset = 0 cell's two recurrent GEMMs, all
// multiples of 16); the cuBLAS status as it came.
cublasStatus_t int8_gemm(cublasHandle_t handle, int64_t m, int64_t ldc, int64_t n_rows, int64_t k_p, const void* A,
                         const void* B, int32_t* C) {
  const int32_t one = 1, zero = 0;
  return blas::cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(m), static_cast<int>(n_rows),
                            static_cast<int>(k_p), &one, A, CUDA_R_8I, static_cast<int>(k_p), B, CUDA_R_8I,
                            static_cast<int>(k_p), &zero, C, CUDA_R_32I, static_cast<int>(ldc), CUBLAS_COMPUTE_32I,
                            CUBLAS_GEMM_DEFAULT);
}

// Asks cuBLAS for the cell's int8 GEMM shapes (W·x, R·h; the linear_before_reset = 0 cell's two recurrent ones
// instead of R·h) at the smallest padded batch (N_p = 16 rows; larger batches differ only in n, a multiple of 16
// too) on zeroed scratch. "" when all run; the reason when cuBLAS answers NOT_SUPPORTED (the cell then takes the
// wide kernel); any other failure throws.
std::string probe_int8_gemms(cublasHandle_t handle, cudaStream_t stream, const kernels::GruGemmLayout& l,
                             bool reset_before_linear) {
  const int64_t k_max = std::max(l.C_p, l.H_p);
  DeviceBuffer a(static_cast<size_t>(l.rows_p * k_max)), b(static_cast<size_t>(l.N_p * k_max));
  DeviceBuffer c(static_cast<size_t>(4 * l.N_p * l.rows_p));
  QGRU_CUDA_CHECK(cudaMemsetAsync(a.data(), 0, a.bytes(), stream));
  QGRU_CUDA_CHECK(cudaMemsetAsync(b.data(), 0, b.bytes(), stream));
  struct Shape {
    int64_t m, k_p;
  };
  std::vector<Shape> shapes = {{l.rows_p, l.C_p}};
  if (reset_before_linear) {
    shapes.push_back({l.rows_zr_p, l.H_p});
    shapes.push_back({l.rows_n_p, l.H_p});
  } else {
    shapes.push_back({l.rows_p, l.H_p});
  }
  std::string refused;
  for (const Shape& s : shapes) {
    const cublasStatus_t status = int8_gemm(handle, s.m, s.m, l.N_p, s.k_p, a.data(), b.data(), static_cast<int32_t*>(c.data()));
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
      refused = "cuBLAS int8 GEMM answered CUBLAS_STATUS_NOT_SUPPORTED for m=" + std::to_string(s.m) +
                " n=" + std::to_string(l.N_p) + " k=" + std::to_string(s.k_p);
      break;
    }
    QGRU_CUBLAS_CHECK(status);
  }
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch buffers outlive the probe's kernels
  return refused;
}

}  // namespace

namespace {

// The persistent kernel's wait limit: QGRU_CUDA_GRU_SPIN_LIMIT_MS (milliseconds, e.g. for a run under
// compute-sanitizer, which slows every block), else kernels::kPersistentSpinLimitNs.
int64_t persistent_spin_limit_ns() {
  const char* value = std::getenv("QGRU_CUDA_GRU_SPIN_LIMIT_MS");
  if (value == nullptr || *value == '\0') return kernels::kPersistentSpinLimitNs;
  char* end = nullptr;
  const long long ms = std::strtoll(value, &end, 10);
  if (*end != '\0' || ms < 1) throw Error("QGRU_CUDA_GRU_SPIN_LIMIT_MS=" + std::string(value) + ": expected a positive number of milliseconds");
  return static_cast<int64_t>(ms) * 1000000;
}

// A positive count from the environment variable `name`, 0 when unset or empty; qgru::Error naming it otherwise.
int count_from_environment(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return 0;
  char* end = nullptr;
  const long count = std::strtol(value, &end, 10);
  if (*end != '\0' || count < 1 || count > (1L << 20)) {
    throw Error(std::string(name) + "=" + value + ": expected a positive count");
  }
  return static_cast<int>(count);
}

// QGRU_CUDA_GRU_SYNC: grid (also unset or empty), cluster or cluster-dsmem; qgru::Error naming it otherwise.
kernels::PersistentSync sync_from_environment() {
  const char* value = std::getenv("QGRU_CUDA_GRU_SYNC");
  if (value == nullptr || *value == '\0') return kernels::PersistentSync::Grid;
  for (kernels::PersistentSync sync : {kernels::PersistentSync::Grid, kernels::PersistentSync::Cluster,
                                       kernels::PersistentSync::ClusterDsmem}) {
    if (std::string(value) == kernels::persistent_sync_name(sync)) return sync;
  }
  throw Error("QGRU_CUDA_GRU_SYNC=" + std::string(value) + ": expected grid, cluster or cluster-dsmem");
}

// The persistent plan's slices from the environment, for a benchmark's sweep (else the plan's own choice):
// QGRU_CUDA_GRU_UNITS units per block (one of kernels::kPersistentUnitChoices; the plan refuses any other),
// QGRU_CUDA_GRU_ROWS batch rows per block; and how its blocks meet: QGRU_CUDA_GRU_SYNC=cluster (the cluster barrier
// where the device and the shape allow it), cluster-dsmem (the same, h exchanged in shared memory) or grid (the
// default, also when unset).
kernels::PersistentGruTuning persistent_tuning_from_environment() {
  kernels::PersistentGruTuning tuning;
  tuning.units_per_block = count_from_environment("QGRU_CUDA_GRU_UNITS");
  tuning.rows_per_block = count_from_environment("QGRU_CUDA_GRU_ROWS");
  tuning.sync = sync_from_environment();
  return tuning;
}

}  // namespace

GruRecurrence recurrence_from_environment() {
  return environment_says("QGRU_CUDA_GRU_PATH", "step", "persistent") ? GruRecurrence::Persistent : GruRecurrence::Step;
}

struct GruCellCuda::Impl {
  int64_t H = 0, C = 0;
  kernels::GruOperandPlan plan;
  std::string fallback;             // why an int8 cell runs on the wide kernel ("" when it does not)
  GruCellParamsView device_view{};  // pointers into `arrays`
  CodeSpace h_space{};
  std::vector<DeviceBuffer> arrays;  // every per-channel and activation array, and the packed weights
  const void* W = nullptr;           // int8 [rows_p, C_p] or int16 [3H, C_p], in `arrays`
  const void* R = nullptr;           // int8 [rows_p, H_p] or int16 [3H, H_p], in `arrays`
  const void* Rn = nullptr;          // the linear_before_reset = 0 cell: R's n rows, [rows_n_p, H_p], in `arrays`
  bool reset_before_linear = false;
  BlasHandle own_handle;             // when the caller passes no handle (int8 path only)
  cublasHandle_t handle = nullptr;   // int8 path only: the executor's or own_handle
  cudaStream_t stream = nullptr;
  mutable DeviceBuffer workspace;    // grown by run() as needed
  mutable DeviceBuffer lengths_buffer;  // a run's sequence lengths [N] (one address, so the step graph stays valid)
  mutable StepGraph steps;           // the time loop, captured once per shape
  mutable PinnedBuffer out_pinned;   // the output codes on their way back
  mutable PinnedBuffer in_pinned;    // the packed x and h0 on their way in
  GruRecurrence recurrence = GruRecurrence::Step;  // resolved: Step or Persistent
  kernels::PersistentDevice device;                 // what the persistent plan may use
  kernels::PersistentGruTuning tuning;              // QGRU_CUDA_GRU_UNITS / _ROWS / _SYNC, read at construction
  mutable std::map<int64_t, kernels::PersistentGruPlan> persistent_plans;  // by N, occupancy checked
  mutable int64_t last_N = 1;                      // describe()'s batch size

  bool wide() const { return plan.path == kernels::GruGemmPath::Wide16; }
  // Where a run's operands come from: the host (q_x [T, N, C] and h0 [N, H] codes, packed on the host and copied
  // up; the state in the workspace) or the device flow (x from `source`, h0 from the caller's device state, which
  // the run updates in place; packed by pack_input_kernel, nothing copied).
  struct Inputs {
    const int32_t* q_x = nullptr;
    const std::vector<int32_t>* h0 = nullptr;
    const kernels::LayerInputSource* source = nullptr;
    int32_t* device_state = nullptr;
  };
  // The run's int32 state: the caller's (device flow) or the workspace region.
  int32_t* state_of(const Inputs& in, int32_t* region_state) const {
    return in.device_state != nullptr ? in.device_state : region_state;
  }
  template <class Stored>
  void load_inputs(const Inputs& in, int64_t T, int64_t N, const kernels::GruGemmLayout& l, Stored* x_dev, Stored* h_dev,
                   int32_t* h_state) const {
    if (in.source == nullptr) {
      upload_operands<Stored>(in.q_x, T, N, *in.h0, l, x_dev, h_dev);
      copy_to_device(h_state, in.h0->data(), in.h0->size() * sizeof(int32_t), stream);
      return;
    }
    launch_pack_input<Stored>(*in.source, T, N, l.N_p, l.C_p, plan.x_offset, x_dev, stream);
    kernels::LayerInputSource state_source;
    state_source.kind = kernels::LayerInputKind::Codes;
    state_source.cols = H;
    state_source.codes = h_state;
    launch_pack_input<Stored>(state_source, 1, N, l.N_p, l.H_p, plan.h_offset, h_dev, stream);
  }
  mutable const int* last_error_word = nullptr;  // the persistent kernel's error words of the last device-flow run
  mutable std::string last_error_plan;
  // Each enqueues the run and returns the device address of the output codes [T, N, H] (workspace).
  const int32_t* run_int8(const Inputs& in, int64_t T, int64_t N, bool reverse, const int32_t* lengths) const;
  const int32_t* run_wide(const Inputs& in, int64_t T, int64_t N, bool reverse, const int32_t* lengths) const;
  const int32_t* run_any(const Inputs& in, int64_t T, int64_t N, bool reverse, const int32_t* lengths) const;
  // The host path: run_any from host codes, the output codes copied back into out_pinned (valid until the next run of
  // this cell); synchronizes.
  const int32_t* run_pinned(const int32_t* q_x, int T, int N, const int32_t* q_h0, bool reverse,
                            const int32_t* lengths) const;
  // Stored / Acc: int8_t / int32_t (Int8 path), int16_t / int64_t (Wide16 path).
  template <class Stored, class Acc>
  const int32_t* run_persistent(const kernels::PersistentGruPlan& p, const Inputs& in, int64_t T, int64_t N, bool reverse,
                                const int32_t* lengths) const;
  // After the stream synchronized: CudaFailure when the last persistent launch's wait gave up (error words read back).
  void check_persistent_error(const int* error_word, const std::string& plan_text) const;
  // The persistent plan at batch N (refused with the reason on the Step recurrence, a shape that does not fit or an
  // occupancy the device cannot give), computed once per N.
  const kernels::PersistentGruPlan& persistent_plan(int64_t N) const {
    auto found = persistent_plans.find(N);
    if (found != persistent_plans.end()) return found->second;
    kernels::PersistentGruPlan p;
    if (recurrence != GruRecurrence::Persistent) {
      p.reason = "the persistent kernel is opt-in (QGRU_CUDA_GRU_PATH=persistent)";
    } else {
      // Clusters as the device keeps them resident (else the grid barrier's plan, saying why), or the grid's.
      p = kernels::persistent_in_clusters(tuning.sync)
              ? kernels::fit_persistent_clusters(plan.path, H, N, reset_before_linear, device, tuning,
                                                 [](const kernels::PersistentGruPlan& q) { return persistent_active_clusters(q); })
              : kernels::plan_persistent_gru(plan.path, H, N, reset_before_linear, device, tuning);
      const std::string refused = p.persistent ? persistent_occupancy(p) : "";
      if (!refused.empty()) p.refuse(refused);  // a grid fallback keeps the cluster's reason after the grid's
    }
    return persistent_plans.emplace(N, p).first->second;
  }
  kernels::WorkspaceCarve workspace_carve(int64_t N, int64_t T) const {
    if (persistent_plan(N).persistent) {
      return kernels::persistent_gru_workspace(kernels::persistent_gemm_layout(plan.path, H, C, N, T), reset_before_linear);
    }
    return kernels::gru_cell_workspace(plan.path, H, C, N, T, reset_before_linear);
  }
  kernels::WorkspaceCarve reserve(kernels::WorkspaceCarve carve) const {
    if (workspace.bytes() < static_cast<size_t>(carve.total_bytes)) workspace = DeviceBuffer(static_cast<size_t>(carve.total_bytes));
    return carve;
  }
  // x [T, N, C] and h0 [N, H] packed into the padded layout (operand offsets, zero padding; row (t, n) at
  // t·N_p + n) straight into pinned memory, then copied to x_dev and h_dev on the stream. The staging memory is
  // reused by the next run only after this one synchronized (copy_out).
  template <class Stored>
  void upload_operands(const int32_t* q_x, int64_t T, int64_t N, const std::vector<int32_t>& h0,
                       const kernels::GruGemmLayout& l, Stored* x_dev, Stored* h_dev) const {
    const int64_t x_count = T * l.N_p * l.C_p, h_count = l.N_p * l.H_p;
    auto* staging = static_cast<Stored*>(in_pinned.reserve(static_cast<size_t>(x_count + h_count) * sizeof(Stored)));
    kernels::pack_signed_steps_into<Stored>(q_x, T, N, C, l.N_p, l.C_p, plan.x_offset, "q_x", staging);
    kernels::pack_signed_steps_into<Stored>(h0.data(), 1, N, H, l.N_p, l.H_p, plan.h_offset, "q_h0", staging + x_count);
    copy_to_device(x_dev, staging, static_cast<size_t>(x_count) * sizeof(Stored), stream);
    copy_to_device(h_dev, staging + x_count, static_cast<size_t>(h_count) * sizeof(Stored), stream);
  }
  // The output codes [T, N, H] from the device region `out` into pinned host memory; synchronizes. The caller
  // copies them from there straight to where they belong (no pageable staging array between).
  const int32_t* copy_out(const int32_t* out, int64_t bytes) const {
    void* pinned = out_pinned.reserve(static_cast<size_t>(bytes));
    QGRU_CUDA_CHECK(cudaMemcpyAsync(pinned, out, static_cast<size_t>(bytes), cudaMemcpyDeviceToHost, stream));
    QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
    return static_cast<const int32_t*>(pinned);
  }
};

GruCellCuda::GruCellCuda(const GruCellParamsView& v, const int32_t* q_W, const int32_t* q_R, int input_size,
                         const CodeSpace& x_space, void* stream, void* blas_handle, GruRecurrence recurrence)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  d.recurrence = recurrence == GruRecurrence::FromEnvironment ? recurrence_from_environment() : recurrence;
  d.H = v.hidden_size;
  d.C = input_size;
  d.reset_before_linear = v.reset_before_linear;
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
  d.device = persistent_device();
  d.tuning = persistent_tuning_from_environment();
  if (!d.wide()) {
    if (blas_handle == nullptr) {
      d.own_handle = BlasHandle(d.stream);
      d.handle = d.own_handle.get();
    } else {
      d.handle = static_cast<cublasHandle_t>(blas_handle);
    }
    // Chosen once per cell: cuBLAS runs the padded int8 shapes, or the cell takes the wide kernel (exact for
    // 8-bit operands too: qgru/kernels/wide_gemm.h).
    d.fallback = probe_int8_gemms(d.handle, d.stream, kernels::plan_gru_gemm(d.H, d.C, 1, 1), d.reset_before_linear);
    if (!d.fallback.empty()) {
      d.plan = kernels::plan_wide_operands(*W_range.first, *W_range.second, *R_range.first, *R_range.second, x_space, v.h);
      kernels::plan_gru_wide(d.H, d.C, 1, 1);
    }
  }
  // Every upload on d.stream, ending with its synchronization (the rule: qgru/kernels/device_upload.h).
  CudaUploader uploader(d.stream);
  const kernels::GruCellUpload uploaded = kernels::upload_gru_cell(v, q_W, q_R, d.C, d.plan.path, uploader);
  d.arrays = uploader.take();
  d.device_view = uploaded.view;
  d.W = uploaded.W;
  d.R = uploaded.R;
  d.Rn = uploaded.Rn;
}

GruCellCuda::~GruCellCuda() = default;
GruCellCuda::GruCellCuda(GruCellCuda&&) noexcept = default;
GruCellCuda& GruCellCuda::operator=(GruCellCuda&&) noexcept = default;

bool GruCellCuda::wide() const { return impl_->wide(); }

const std::string& GruCellCuda::fallback_reason() const { return impl_->fallback; }

int64_t GruCellCuda::workspace_bytes(int T, int N) const {
  return impl_->workspace_carve(N, T).total_bytes;
}

std::string GruCellCuda::describe_path(int N) const { return impl_->persistent_plan(N).describe(); }

std::string GruCellCuda::describe() const { return describe_path(static_cast<int>(impl_->last_N)); }

// B-1 for every step (the path's GEMM: cuBLAS int8 or the wide kernel), then one cooperative launch of the persistent
// kernel for all T steps.
template <class Stored, class Acc>
const int32_t* GruCellCuda::Impl::run_persistent(const kernels::PersistentGruPlan& p, const Inputs& in, int64_t T,
                                                 int64_t N, bool reverse, const int32_t* lengths) const {
  const kernels::GruGemmLayout l = kernels::persistent_gemm_layout(plan.path, H, C, N, T);
  const kernels::WorkspaceCarve w = reserve(kernels::persistent_gru_workspace(l, reset_before_linear));
  Stored* x_stored = region<Stored>(workspace, w, 0);
  auto* h_exchange = region<Stored>(workspace, w, 1);
  auto* gemm_x = region<Acc>(workspace, w, 2);
  auto* h_state = state_of(in, region<int32_t>(workspace, w, 3));
  auto* out = region<int32_t>(workspace, w, 4);
  const kernels::PersistentBuffers<Stored, Acc> buffers = kernels::persistent_buffers<Stored, Acc>(
      p, l, T, reverse, plan.x_offset, plan.h_offset, gemm_x, h_exchange,
      reset_before_linear ? region<Stored>(workspace, w, 5) : nullptr, h_state, out, lengths);
  PersistentLaunch launch;
  launch.R = R;
  launch.arrivals = region<unsigned long long>(workspace, w, 6);
  launch.error = reinterpret_cast<int*>(launch.arrivals + 1);
  launch.spin_limit_ns = persistent_spin_limit_ns();
  // x for every step and h0 into exchange buffer 0 (packed, padding 0); the state; the counter and error words 0.
  load_inputs<Stored>(in, T, N, l, x_stored, h_exchange, h_state);
  QGRU_CUDA_CHECK(cudaMemsetAsync(launch.arrivals, 0, static_cast<size_t>(kernels::kPersistentSyncBytes), stream));
  if constexpr (sizeof(Stored) == 1) {
    QGRU_CUBLAS_CHECK(int8_gemm(handle, l.rows_p, l.rows_p, T * l.N_p, l.C_p, W, x_stored, gemm_x));
  } else {
    launch_wide_gemm(kernels::plan_wide_gemm(l.rows_p, T * l.N_p, l.C_p), static_cast<const int16_t*>(W), l.C_p, x_stored,
                     l.C_p, gemm_x, l.rows_p, stream);
  }
  launch_persistent_gru<Stored, Acc>(p, device_view, buffers, launch, stream);
  last_error_word = launch.error;
  last_error_plan = p.describe();
  return out;
}

void GruCellCuda::Impl::check_persistent_error(const int* error_word, const std::string& plan_text) const {
  int error[kernels::kPersistentErrorWords] = {0, 0, 0};
  QGRU_CUDA_CHECK(cudaMemcpy(error, error_word, sizeof(error), cudaMemcpyDeviceToHost));
  count_host_transfer();
  check_error_words(error, plan_text);
}

void GruCellCuda::check_error_words(const int* error, const std::string& plan_text) {
  if (error[0] == kernels::kPersistentWrongCluster) {
    throw CudaFailure("persistent GRU kernel (" + plan_text + "): block " + std::to_string(error[1]) +
                      " ran in a cluster of " + std::to_string(error[2]) + " blocks");
  }
  if (error[0] != 0) {
    throw CudaFailure("persistent GRU kernel (" + plan_text + "): block " + std::to_string(error[1]) + " waited more than " +
                      std::to_string(persistent_spin_limit_ns() / 1000000) + " ms for phase " + std::to_string(error[2]));
  }
}

const int32_t* GruCellCuda::Impl::run_int8(const Inputs& in, int64_t T, int64_t N, bool reverse,
                                           const int32_t* lengths) const {
  const kernels::GruGemmLayout l = kernels::plan_gru_gemm(H, C, N, T);
  const kernels::WorkspaceCarve w = reserve(workspace_carve(N, T));
  int8_t* x8 = region<int8_t>(workspace, w, 0);
  int8_t* h8 = region<int8_t>(workspace, w, 1);
  int32_t* gemm_x = region<int32_t>(workspace, w, 2);
  int32_t* gemm_h = region<int32_t>(workspace, w, 3);
  int32_t* h_state = state_of(in, region<int32_t>(workspace, w, 4));
  int32_t* out = region<int32_t>(workspace, w, 5);
  int8_t* rh8 = reset_before_linear ? region<int8_t>(workspace, w, 6) : nullptr;       // q_reset_hidden, stored like h
  int32_t* gemm_rh = reset_before_linear ? region<int32_t>(workspace, w, 7) : nullptr;  // R_n against it
  // Inputs: x for all steps and the initial state (padded rows and columns 0, every run)
  load_inputs<int8_t>(in, T, N, l, x8, h8, h_state);
  // q_reset_hidden's padding (columns j >= H, rows n >= N) stays 0 from here on, as h8's does
  if (rh8 != nullptr) QGRU_CUDA_CHECK(cudaMemsetAsync(rh8, 0, static_cast<size_t>(l.rh_bytes), stream));

  // B-1 for every step: gemm_x[t·N_p + n, c] = Σ_k W8[c, k] · x8[t·N_p + n, k]
  QGRU_CUBLAS_CHECK(int8_gemm(handle, l.rows_p, l.rows_p, T * l.N_p, l.C_p, W, x8, gemm_x));
  const int64_t blocks = kernels::elementwise_blocks(N * H, kStepThreads);
  steps.run(stream, T, N, reverse, workspace.data(), lengths, h_state, [&] {
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = reverse ? T - 1 - s : s;
      const int32_t* gemm_x_t = gemm_x + t * l.N_p * l.rows_p;
      // B-2: gemm_h[n, c] = Σ_k R8[c, k] · h8[n, k] over the N_p padded rows (the z and r rows alone for the
      // linear_before_reset = 0 cell, whose n channels come from R_n (r ⊙ h): gemm_rh)
      QGRU_CUBLAS_CHECK(int8_gemm(handle, reset_before_linear ? l.rows_zr_p : l.rows_p, l.rows_p, l.N_p, l.H_p, R, h8, gemm_h));
      if (reset_before_linear) {
        reset_hidden_kernel<int32_t, int8_t><<<static_cast<unsigned>(blocks), kStepThreads, 0, stream>>>(
            device_view, gemm_x_t, gemm_h, l.rows_p, plan.x_offset, plan.h_offset, h_state, rh8, l.H_p, N);
        QGRU_CUDA_CHECK_LAUNCH("reset_hidden_kernel<int32_t, int8_t><<<...>>>");
        QGRU_CUBLAS_CHECK(int8_gemm(handle, l.rows_n_p, l.rows_n_p, l.N_p, l.H_p, Rn, rh8, gemm_rh));
      }
      gru_step_kernel<int32_t, int8_t><<<static_cast<unsigned>(blocks), kStepThreads, 0, stream>>>(
          device_view, gemm_x_t, gemm_h, l.rows_p, plan.x_offset, plan.h_offset, h_state, h8, l.H_p, out + t * N * H, N,
          lengths, t, gemm_rh, l.rows_n_p);
      QGRU_CUDA_CHECK_LAUNCH("gru_step_kernel<int32_t, int8_t><<<...>>>");
    }
  });
  return out;
}

const int32_t* GruCellCuda::Impl::run_wide(const Inputs& in, int64_t T, int64_t N, bool reverse,
                                           const int32_t* lengths) const {
  const kernels::GruGemmLayout l = kernels::plan_gru_wide(H, C, N, T);
  const kernels::WorkspaceCarve w = reserve(workspace_carve(N, T));
  int16_t* x16 = region<int16_t>(workspace, w, 0);
  int16_t* h16 = region<int16_t>(workspace, w, 1);
  int64_t* gemm_x = region<int64_t>(workspace, w, 2);
  int64_t* gemm_h = region<int64_t>(workspace, w, 3);
  int32_t* h_state = state_of(in, region<int32_t>(workspace, w, 4));
  int32_t* out = region<int32_t>(workspace, w, 5);
  int16_t* rh16 = reset_before_linear ? region<int16_t>(workspace, w, 6) : nullptr;
  int64_t* gemm_rh = reset_before_linear ? region<int64_t>(workspace, w, 7) : nullptr;
  load_inputs<int16_t>(in, T, N, l, x16, h16, h_state);
  if (rh16 != nullptr) QGRU_CUDA_CHECK(cudaMemsetAsync(rh16, 0, static_cast<size_t>(l.rh_bytes), stream));

  const auto* W16 = static_cast<const int16_t*>(W);
  const auto* R16 = static_cast<const int16_t*>(R);
  const auto* Rn16 = static_cast<const int16_t*>(Rn);
  // B-1 for every step: gemm_x[t·N + n, c] = Σ_k W16[c, k] · x16[t·N + n, k]
  launch_wide_gemm(kernels::plan_wide_gemm(l.rows_p, T * l.N_p, l.C_p), W16, l.C_p, x16, l.C_p, gemm_x, l.rows_p, stream);
  const kernels::WideGemmGeometry step_gemm = kernels::plan_wide_gemm(reset_before_linear ? l.rows_zr_p : l.rows_p, l.N_p, l.H_p);
  const kernels::WideGemmGeometry rh_gemm = kernels::plan_wide_gemm(l.rows_n_p, l.N_p, l.H_p);
  const int64_t blocks = kernels::elementwise_blocks(N * H, kStepThreads);
  steps.run(stream, T, N, reverse, workspace.data(), lengths, h_state, [&] {
    for (int64_t s = 0; s < T; ++s) {
      const int64_t t = reverse ? T - 1 - s : s;
      const int64_t* gemm_x_t = gemm_x + t * l.N_p * l.rows_p;
      // B-2: gemm_h[n, c] = Σ_k R16[c, k] · h16[n, k] (z and r rows alone for the linear_before_reset = 0 cell)
      launch_wide_gemm(step_gemm, R16, l.H_p, h16, l.H_p, gemm_h, l.rows_p, stream);
      if (reset_before_linear) {
        reset_hidden_kernel<int64_t, int16_t><<<static_cast<unsigned>(blocks), kStepThreads, 0, stream>>>(
            device_view, gemm_x_t, gemm_h, l.rows_p, plan.x_offset, plan.h_offset, h_state, rh16, l.H_p, N);
        QGRU_CUDA_CHECK_LAUNCH("reset_hidden_kernel<int64_t, int16_t><<<...>>>");
        launch_wide_gemm(rh_gemm, Rn16, l.H_p, rh16, l.H_p, gemm_rh, l.rows_n_p, stream);
      }
      gru_step_kernel<int64_t, int16_t><<<static_cast<unsigned>(blocks), kStepThreads, 0, stream>>>(
          device_view, gemm_x_t, gemm_h, l.rows_p, plan.x_offset, plan.h_offset, h_state, h16, l.H_p, out + t * N * H, N,
          lengths, t, gemm_rh, l.rows_n_p);
      QGRU_CUDA_CHECK_LAUNCH("gru_step_kernel<int64_t, int16_t><<<...>>>");
    }
  });
  return out;
}

const int32_t* GruCellCuda::Impl::run_any(const Inputs& in, int64_t T, int64_t N, bool reverse, const int32_t* lengths) const {
  last_N = N;
  last_error_word = nullptr;
  const kernels::PersistentGruPlan& p = persistent_plan(N);
  if (p.persistent) {
    return wide() ? run_persistent<int16_t, int64_t>(p, in, T, N, reverse, lengths)
                  : run_persistent<int8_t, int32_t>(p, in, T, N, reverse, lengths);
  }
  return wide() ? run_wide(in, T, N, reverse, lengths) : run_int8(in, T, N, reverse, lengths);
}

const int32_t* GruCellCuda::Impl::run_pinned(const int32_t* q_x, int T, int N, const int32_t* q_h0, bool reverse,
                                             const int32_t* lengths) const {
  std::vector<int32_t> h0(static_cast<size_t>(int64_t{N} * H), h_space.zp);
  if (q_h0 != nullptr) h0.assign(q_h0, q_h0 + int64_t{N} * H);
  // The lengths on the device, in a buffer kept between runs (the captured step graph holds its address); the
  // host array outlives the copy (the run synchronizes before it returns).
  const int32_t* device_lengths = nullptr;
  if (lengths != nullptr) {
    const size_t bytes = static_cast<size_t>(N) * sizeof(int32_t);
    if (lengths_buffer.bytes() < bytes) lengths_buffer = DeviceBuffer(bytes);
    copy_to_device(lengths_buffer.data(), lengths, bytes, stream);
    device_lengths = static_cast<const int32_t*>(lengths_buffer.data());
  }
  Inputs in;
  in.q_x = q_x;
  in.h0 = &h0;
  const int32_t* out = run_any(in, T, N, reverse, device_lengths);
  const int32_t* codes = copy_out(out, int64_t{T} * N * H * static_cast<int64_t>(sizeof(int32_t)));  // synchronizes
  if (last_error_word != nullptr) check_persistent_error(last_error_word, last_error_plan);
  return codes;
}

std::vector<int32_t> GruCellCuda::run(const int32_t* q_x, int T, int N, const int32_t* q_h0, bool reverse,
                                      const int32_t* lengths) const {
  std::vector<int32_t> out(static_cast<size_t>(int64_t{T} * N * impl_->H));
  if (T == 0 || N == 0) return out;
  const int32_t* codes = impl_->run_pinned(q_x, T, N, q_h0, reverse, lengths);
  std::memcpy(out.data(), codes, out.size() * sizeof(int32_t));
  return out;
}

void GruCellCuda::run_into(const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h, bool reverse, int32_t* out,
                           int out_stride, int out_offset, const int32_t* lengths) const {
  const Impl& d = *impl_;
  const size_t count = static_cast<size_t>(int64_t{T} * N * d.H);
  if (q_h.size() != static_cast<size_t>(int64_t{N} * d.H)) {
    throw Error("GruCellCuda::run_into: " + std::to_string(q_h.size()) + " starting state codes, expected N·H = " +
                std::to_string(int64_t{N} * d.H));
  }
  if (T == 0 || N == 0) return;
  const int32_t* codes = d.run_pinned(q_x, T, N, q_h.data(), reverse, lengths);
  store_cell_codes(codes, count, T, N, static_cast<int>(d.H), reverse ? 1 : 0, q_h, out, out_stride, out_offset, lengths);
}

}  // namespace qgru::cuda

namespace qgru::cuda {

const int32_t* GruCellCuda::run_on_device(const kernels::LayerInputSource& x_source, int T, int N, int32_t* h_state,
                                          bool reverse, const int32_t* lengths) const {
  const Impl& d = *impl_;
  if (T <= 0 || N <= 0) throw Error("GruCellCuda::run_on_device: empty shape T=" + std::to_string(T) + " N=" + std::to_string(N));
  Impl::Inputs in;
  in.source = &x_source;
  in.device_state = h_state;
  return d.run_any(in, T, N, reverse, lengths);
}

void GruCellCuda::reserve(int T, int N) const { impl_->reserve(impl_->workspace_carve(N, T)); }

void GruCellCuda::check_device_errors() const {
  const Impl& d = *impl_;
  if (d.last_error_word != nullptr) d.check_persistent_error(d.last_error_word, d.last_error_plan);
}

GruCellCuda::DeviceErrorWords GruCellCuda::last_device_error_words() const {
  const Impl& d = *impl_;
  DeviceErrorWords words;
  if (d.last_error_word == nullptr) return words;
  words.words = d.last_error_word;
  words.plan = d.last_error_plan;
  return words;
}

const void* GruCellCuda::workspace_address() const { return impl_->workspace.data(); }

}  // namespace qgru::cuda
