#pragma once
// Internal: QuantGruCuda's state, shared by the whole call (quant_gru_cuda.cpp) and the streaming state
// (quant_gru_cuda_stream.cpp).
#include <cuda_runtime.h>

#include <vector>

#include "qgru/runtime/quantized_gru.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/gru_cell_cuda.h"
#include "qgru_cuda/quant_gru_cuda.h"
#include "blas_handle.h"

namespace qgru::cuda {

// Grows `buffer` to at least `bytes` (contents not kept).
inline void grow(DeviceBuffer& buffer, size_t bytes) {
  if (buffer.bytes() < bytes) buffer = DeviceBuffer(bytes);
}

// A counted host<->device copy on `stream` (count_host_transfer; `tally` the call's own count).
inline void counted_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream, int& tally) {
  if (bytes == 0) return;
  QGRU_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream));
  count_host_transfer();
  ++tally;
}

struct QuantGruCuda::Impl {
  QuantizedGru model;
  bool device_flow = false;         // GruFlow::Device
  cudaStream_t stream = nullptr;    // direction 0's cells and everything between the cells
  cudaStream_t stream1 = nullptr;   // direction 1's cells (bidirectional models)
  cudaEvent_t layer_ready = nullptr;   // recorded on `stream` when a layer's x is ready; stream1 waits for it
  cudaEvent_t reverse_done = nullptr;  // recorded on stream1 after a layer's direction 1; `stream` waits for it
  BlasHandle blas;                 // bound to `stream`, for direction 0's cells
  BlasHandle blas1;                // bound to stream1
  std::vector<GruCellCuda> cells;  // destroyed before the handles and the streams (declared after them)
  // The device flow's buffers, grown as needed and kept: x (floats or codes) [T, N, C], the states [L·D, N, H]
  // (h0 in, h_n out), lengths [N], the output floats and codes [T, N, D·H].
  mutable DeviceBuffer x_in, states, lengths_in, y, y_codes;
  mutable CallTransfers last;

  ~Impl() {
    cells.clear();
    blas = BlasHandle();
    blas1 = BlasHandle();
    if (layer_ready != nullptr) cudaEventDestroy(layer_ready);  // destructor: nothing to report to
    if (reverse_done != nullptr) cudaEventDestroy(reverse_done);
    if (stream1 != nullptr) cudaStreamDestroy(stream1);
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
  const GruCellCuda& cell(int layer, int direction) const {
    return cells.at(static_cast<size_t>(layer * model.num_directions + direction));
  }
  QuantGruResult run_device(const float* x, const int32_t* q_x, int T, int N, const int32_t* q_h0, const int32_t* lengths,
                            bool want_codes) const;
};

}  // namespace qgru::cuda
