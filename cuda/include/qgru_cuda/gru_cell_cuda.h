#pragma once
// The CUDA GRU executor shell: one quantized GRU cell (one layer, one direction) over all time steps.
//   B-1 once: gemm_x = W·x for every step; per step: B-2 gemm_h = R·h, then ONE elementwise kernel that
//   calls the QGRU_HD cell function gru_cell_element (qgru/fixed/gru_cell.h), the code the CPU executor runs.
//   The linear_before_reset = 0 cell (host_view.reset_before_linear, docs/FIXED_POINT.md §3a): per step R's z and r
//   rows against h, an elementwise kernel writing q_reset_hidden (r ⊙ h in h's space, stored like h), the GEMM of
//   R's n rows (packed apart) against it, then the step kernel.
// The GEMMs take one of two exact paths (kernels::plan_gru_operands, qgru/kernels/gru_step.h):
//   int8 operands:        cublasGemmEx int8 x int8 -> int32 (CUBLAS_COMPUTE_32I), every dimension padded to 16,
//                         qgru/kernels/int8_gemm_layout.h; asked once at construction, and when cuBLAS answers
//                         NOT_SUPPORTED for the cell's shapes the cell takes the wide kernel (fallback_reason());
//   up to 16-bit operands: wide_gemm_kernel, int16 x int16 -> int64, qgru/kernels/wide_gemm.h.
// Construction uploads every array on the cell's stream and ends with that stream's synchronization
// (qgru/kernels/device_upload.h), so run() on any stream sees the weights. The time loop is captured once per
// (T, N, direction) into a CUDA graph and replayed (not on the legacy default stream).
// Layouts, padding, operand offsets, launch geometry and workspace are host code the CPU tests check; the
// whole flow is kernels::emulate_gru_cell on the host. Host-only API without CUDA headers. Requires a
// device (NoDevice otherwise).
// The persistent recurrence (cuda/src/persistent_gru.cu, qgru/kernels/persistent_gru.h): with GruRecurrence::Persistent
// a cell whose plan fits the device (per batch size N; int8 or 16-bit operands) runs all T steps in ONE cooperative
// launch after the B-1 GEMM; elsewhere it stays on the per-step path, and describe_path(N) says why. Opt-in (QGRU_CUDA_GRU_PATH=persistent)
// until the GPU self-test has passed on a GPU (docs/CUDA.md "The GRU executor").
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qgru/fixed/gru_cell.h"
#include "qgru/kernels/device_flow.h"

namespace qgru::cuda {

// Which recurrence a cell runs: Step (the per-step path), Persistent (the persistent kernel where its plan takes the
// cell, the per-step path elsewhere), or FromEnvironment: QGRU_CUDA_GRU_PATH=persistent or step, unset = step.
enum class GruRecurrence { FromEnvironment, Step, Persistent };
// QGRU_CUDA_GRU_PATH read: Step when unset or "step", Persistent for "persistent"; qgru::Error naming the variable
// and the value otherwise.
GruRecurrence recurrence_from_environment();

class GruCellCuda {
 public:
  // host_view: GruCellQuantParams::view() of the cell (host pointers; every array is copied to the device).
  // q_W: [3H, C] and q_R: [3H, H] weight codes (row-major, signed, at most 16 bits).
  // x_space: the code space of the cell's input x (h's is in host_view.h). Operands no path takes (more than
  // 16 bits) throw NotSupported naming the cell's shape and the operand. stream: a cudaStream_t every call
  // of this cell is issued on (null: the default stream); not owned. blas_handle: a cublasHandle_t bound to
  // `stream` with a workspace of its own (one per executor, shared by its cells), or null for a handle of the
  // cell's own; not owned.
  // recurrence: FromEnvironment is resolved here, once.
  GruCellCuda(const GruCellParamsView& host_view, const int32_t* q_W, const int32_t* q_R, int input_size,
              const CodeSpace& x_space, void* stream = nullptr, void* blas_handle = nullptr,
              GruRecurrence recurrence = GruRecurrence::FromEnvironment);
  ~GruCellCuda();
  GruCellCuda(GruCellCuda&&) noexcept;
  GruCellCuda& operator=(GruCellCuda&&) noexcept;

  // q_x: [T, N, C] codes in x's space; q_h0: [N, H] codes in h's space or null for zp_h. reverse: visit
  // t = T-1 .. 0. Returns the hidden codes after each step, [T, N, H] indexed by input time t.
  // The device workspace is computed up front from (T, N) (kernels::carve_workspace over the path's layout)
  // and kept for the next call of the same or a smaller shape. Synchronous: returns after the copy back.
  // lengths: [N] sequence lengths or null (kernels::gru_step_element_t: padded steps keep the state and
  // output zp_h).
  std::vector<int32_t> run(const int32_t* q_x, int T, int N, const int32_t* q_h0, bool reverse,
                           const int32_t* lengths = nullptr) const;
  // As run(), with the codes written straight from the pinned copy-back buffer into out's columns
  // [out_offset, out_offset + H) of rows of out_stride codes, [T, N, out_stride] by input time (the layer loop's
  // output, store_cell_codes in qgru/runtime/layer_loop.h), with no [T, N, H] array between. q_h: [N, H] the
  // starting codes on entry, the state after each row's last valid step on return.
  void run_into(const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h, bool reverse, int32_t* out, int out_stride,
                int out_offset, const int32_t* lengths = nullptr) const;

  // The device flow (QuantGruCuda's whole call, its streaming): x from `x_source` (device pointers: the caller's
  // codes or floats, or the previous layer's cell outputs, qgru/kernels/device_flow.h), packed on the device;
  // h_state: device int32 [N, H], the starting codes on entry and the state after each row's last valid step on
  // return; lengths: device [N] or null. Enqueued on the cell's stream with no host copy and no synchronization;
  // returns the device address of the output codes [T, N, H] by input time, valid until this cell's next run.
  // The sources must stay valid until the stream has run the call. T, N >= 1.
  const int32_t* run_on_device(const kernels::LayerInputSource& x_source, int T, int N, int32_t* h_state, bool reverse,
                               const int32_t* lengths) const;
  // The workspace of a (T, N) run allocated now (a streaming state asks for T = 1 at creation: no allocation per step).
  void reserve(int T, int N) const;
  // After the stream of a run_on_device synchronized: CudaFailure when the persistent kernel's wait gave up (one
  // small copy of its error words; nothing when the run took the per-step path).
  void check_device_errors() const;
  // The persistent kernel's error words of the last run_on_device issued (kPersistentErrorWords ints on the device, in the
  // workspace) and the plan that run took; `words` is null when the run took the per-step path. Work captured from
  // a run_on_device and replayed later (QuantGruCudaStream's frame graph) keeps these from the capture and copies the
  // words back with its output: the cell's own are replaced by its next run.
  struct DeviceErrorWords {
    const int* words = nullptr;
    std::string plan;
  };
  DeviceErrorWords last_device_error_words() const;
  // CudaFailure naming the plan when host copies of such words say a wait gave up or a cluster had the wrong size.
  static void check_error_words(const int* host_words, const std::string& plan);
  // The workspace's device address: work captured from run_on_device holds addresses inside it, and a larger run
  // (reserve, a whole call of a longer T) moves it.
  const void* workspace_address() const;

  bool wide() const;                        // true: the 16-bit path (wide kernel), false: int8 cuBLAS
  const std::string& fallback_reason() const;  // why an int8 cell runs on the wide kernel; "" when it does not
  int64_t workspace_bytes(int T, int N) const;  // what run(T, N) allocates
  // The recurrence run(T, N) takes: "persistent (B blocks x U units, smem S)" or "per-step: <reason>".
  std::string describe_path(int N) const;
  // The recurrence of the last run (N = 1 before the first), as describe_path.
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qgru::cuda
