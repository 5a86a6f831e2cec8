#pragma once
// The float GRU on the GPU (haste's flow): per cell, one cublasSgemm for W·x over all steps, then per step
// one cublasSgemm for R·h and ONE elementwise kernel calling float_gru_cell_element
// (qgru/model/float_gru_cell.h), the function the CPU float executor runs; the linear_before_reset = 0 cell
// applies R to h for z and r only, then float_gru_reset_hidden per element and a second cublasSgemm for
// R_n (r ⊙ h) before the step's kernel. Layers chain on the device
// (layer l's [T, N, D·H] output is layer l+1's input). fp32 GEMMs (no TF32: the handle keeps cuBLAS's
// default math mode), biases added in double in the kernel as the CPU does; results agree with
// run_float_gru within a tolerance (docs/CUDA.md), not bit for bit. Host-only API without CUDA headers.
#include <cstdint>
#include <memory>

#include "qgru/model/float_gru.h"

namespace qgru::cuda {

// Device workspace of one run (floats): layer input / output ping-pong [T, N, max(C, D·H)] each, W·x
// [T, N, 3H], R·h [N, 3H], h [N, H], h_n [L·D, N, H], r ⊙ h [N, H], the sequence lengths [N] (int32); byte
// offsets from kernels::carve_workspace.
int64_t float_gru_workspace_bytes(const FloatGruModel& model, int T, int N);

class FloatGruCuda {
 public:
  // Uploads every cell; throws qgru::Error on an inconsistent model, NoDevice, CudaFailure.
  explicit FloatGruCuda(const FloatGruModel& model);
  ~FloatGruCuda();
  FloatGruCuda(FloatGruCuda&&) noexcept;
  FloatGruCuda& operator=(FloatGruCuda&&) noexcept;

  // As run_float_gru: x [T, N, C] time-major, h0 [L·D, N, H] or null for zeros, lengths [N] or null (rows with
  // t >= lengths[n] are padding: the state stays, the output is 0; check_sequence_lengths refuses lengths outside
  // [0, T]). Synchronous.
  FloatGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qgru::cuda
