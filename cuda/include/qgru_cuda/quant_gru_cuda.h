#pragma once
// Whole-model CUDA execution of a quantized artifact: every cell (layer, direction) is a GruCellCuda
// (weights uploaded once, at construction), chained by the shared layer loop (qgru/runtime/layer_loop.h) —
// the same h0 handling, requantization between layers and dequantization as the CPU executors, so the codes
// equal run_quantized_gru_codes's whenever each cell's do (the CPU tests hold the cell's flow to the
// reference; test_cuda_gpu holds the GPU to both). Host-only API without CUDA headers.
#include <cstdint>
#include <memory>
#include <string>

#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/quantized_gru.h"
#include "qgru_cuda/gru_cell_cuda.h"

namespace qgru::cuda {

class QuantGruCuda {
 public:
  // Throws NotSupported (a cell whose operands are wider than 16 bits; the message names the cell), NoDevice,
  // or CudaFailure. Creates one CUDA stream and one cuBLAS handle every cell runs on.
  // recurrence: every cell's (GruCellCuda; FromEnvironment reads QGRU_CUDA_GRU_PATH once).
  explicit QuantGruCuda(const QuantizedGru& model, GruRecurrence recurrence = GruRecurrence::FromEnvironment);
  ~QuantGruCuda();
  QuantGruCuda(QuantGruCuda&&) noexcept;
  QuantGruCuda& operator=(QuantGruCuda&&) noexcept;

  // As run_quantized_gru_codes / run_quantized_gru (qgru/runtime/quant_executor.h): q_x [T, N, C] codes in
  // layer 0's x space (range-checked), q_h0 [L·D, N, H] codes or null; x / h0 floats quantized on the host;
  // lengths [N] sequence lengths or null.
  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0, const int32_t* lengths = nullptr) const;
  QuantGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths = nullptr) const;

  // "int8 cuBLAS" / "16-bit wide kernel" per cell, e.g. "l0.d0 int8 cuBLAS, l0.d1 int8 cuBLAS"; an int8 cell
  // that cuBLAS refused says why: "l0.d0 16-bit wide kernel (cuBLAS int8 GEMM answered ... m=.. n=16 k=..)".
  // Then the recurrence each cell took at the last run's batch size (N = 1 before the first run), after "; ":
  // "l0.d0 int8 cuBLAS; persistent (4 blocks x 16 units, smem 12345)" or "...; per-step: <reason>".
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qgru::cuda
