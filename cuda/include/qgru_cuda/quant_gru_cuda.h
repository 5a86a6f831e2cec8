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

class QuantGruCudaStream;

// How a whole call is organised: Device (docs/CUDA.md "Whole calls on the device": x up once, the layers chained on
// the device, the directions on two streams, one copy of the floats back), Host (the shared layer loop with each
// cell's codes back on the host), or FromEnvironment: QGRU_CUDA_GRU_FLOW=device or host, unset = host. Host is the
// default until the GPU self-test has passed on a GPU (then the default flips, as the persistent recurrence's will).
enum class GruFlow { FromEnvironment, Host, Device };
// QGRU_CUDA_GRU_FLOW read: Host when unset or "host", Device for "device"; qgru::Error naming the variable otherwise.
GruFlow gru_flow_from_environment();

// Not thread-safe, although its runs are const: every run (and every step of its QuantGruCudaStream states) uses the
// executor's device buffers, its cells' workspaces and captured step graphs, its streams and cuBLAS handles, so
// calls on one executor must not overlap; the executor chooser's CUDA executor (lib/src/executor/cuda_executor.cpp)
// holds a lock around each.
class QuantGruCuda {
 public:
  // What the last whole call moved between host and device and how often it passed over [T, N, ·] on the host
  // (kernels::plan_device_call says what it must be; the GPU self-test requires them equal).
  struct CallTransfers {
    int uploads = 0, downloads = 0, host_passes = 0;
  };

  // Throws NotSupported (a cell whose operands are wider than 16 bits; the message names the cell), NoDevice,
  // or CudaFailure. Creates one CUDA stream and one cuBLAS handle every cell runs on.
  // recurrence: every cell's (GruCellCuda; FromEnvironment reads QGRU_CUDA_GRU_PATH once).
  // flow: GruFlow above (FromEnvironment is resolved here, once).
  explicit QuantGruCuda(const QuantizedGru& model, GruRecurrence recurrence = GruRecurrence::FromEnvironment,
                        GruFlow flow = GruFlow::FromEnvironment);
  ~QuantGruCuda();
  QuantGruCuda(QuantGruCuda&&) noexcept;
  QuantGruCuda& operator=(QuantGruCuda&&) noexcept;

  // As run_quantized_gru_codes / run_quantized_gru (qgru/runtime/quant_executor.h): q_x [T, N, C] codes in
  // layer 0's x space (range-checked), q_h0 [L·D, N, H] codes or null; x / h0 floats quantized on the host;
  // lengths [N] sequence lengths or null.
  QuantGruResult run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0, const int32_t* lengths = nullptr) const;
  QuantGruResult run(const float* x, int T, int N, const float* h0, const int32_t* lengths = nullptr) const;
  // As run(), without the output codes: result.output_codes stays empty and only the floats (and h_n's codes) come
  // back from the device.
  QuantGruResult run_floats(const float* x, int T, int N, const float* h0, const int32_t* lengths = nullptr) const;
  // The last call's copies (zero on the Host flow, which does not count them).
  CallTransfers last_call_transfers() const;
  bool device_flow() const;  // the flow resolved at construction is GruFlow::Device

  // "int8 cuBLAS" / "16-bit wide kernel" per cell, e.g. "l0.d0 int8 cuBLAS, l0.d1 int8 cuBLAS"; an int8 cell
  // that cuBLAS refused says why: "l0.d0 16-bit wide kernel (cuBLAS int8 GEMM answered ... m=.. n=16 k=..)".
  // Then the recurrence each cell took at the last run's batch size (N = 1 before the first run), after "; ":
  // "l0.d0 int8 cuBLAS; persistent (4 blocks x 16 units, smem 12345)" or "...; per-step: <reason>".
  std::string describe() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  friend class QuantGruCudaStream;
};

// Streaming on the device (the runtime C API's qgru_rt_step on a CUDA context): N streams of a unidirectional model
// advanced a frame at a time, the state h [L, N, H] kept on the device between frames. Every buffer (the state, one
// frame in and out, pinned staging, each cell's workspace for one step) is made here; a step allocates nothing
// (device_allocation_count(), qgru_cuda/device_buffer.h). A frame's work: one copy up (the frame), each layer's cell
// for one step (x packed on the device from the frame, or from the previous layer's codes requantized), the output
// dequantized on the device, one copy down (and each persistent layer's error words), one synchronization. The codes
// equal the reference's step_layer_loop.
// How the work is issued (FrameIssue): Graph (the default) runs a kind of frame's first frame (floats or codes, with
// or without output) as launches, captures the second into a CUDA graph of this state's own and replays it from then
// on: one launch a frame; the executor's other states and its whole calls between frames leave the graph valid, except
// a run of a larger shape (a whole call of a longer T or a larger N, a new state of a larger N), which moves a
// cell's workspace: the next frame captures again. If a capture, or a new graph's first launch, fails, frames are
// issued as launches from then on and describe() says why. Launches issues every kernel, GEMM and copy of every frame; the
// cells' own step graphs are then recaptured whenever another state of the executor ran between frames.
// The executor must outlive the stream; not thread-safe.
enum class FrameIssue { Graph, Launches };
class QuantGruCudaStream {
 public:
  // Error for a bidirectional model (streaming_refusal) or N < 1.
  QuantGruCudaStream(const QuantGruCuda& executor, int N, FrameIssue issue = FrameIssue::Graph);
  ~QuantGruCudaStream();
  QuantGruCudaStream(QuantGruCudaStream&&) noexcept;
  QuantGruCudaStream& operator=(QuantGruCudaStream&&) noexcept;

  // x [frames, N, C] floats (quantized on the device); y [frames, N, H] floats or null.
  void step(const float* x, int frames, float* y);
  // q_x [frames, N, C] codes in layer 0's x space (range-checked here: qgru::Error, the state unchanged);
  // y_codes [frames, N, H] the last layer's codes or null.
  void step_codes(const int32_t* q_x, int frames, int32_t* y_codes);
  void get_codes(int32_t* q_h) const;  // [L, N, H]
  void set_codes(const int32_t* q_h);  // [L, N, H], each layer's codes within its h range (the caller checked)
  int batch() const;
  // "one graph a frame (captured K times)", "launches a frame (asked)" or "launches a frame: <why the capture failed>".
  std::string describe() const;
  int captures() const;  // frame graphs captured so far (each kind once, unless a cell's workspace moved)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qgru::cuda
