// QuantGruCudaStream (qgru_cuda/quant_gru_cuda.h): streaming on the device, the state kept there between frames.
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "qgru/base/error.h"
#include "qgru/kernels/device_flow.h"
#include "qgru/runtime/code_maps.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/stream_step.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/quant_gru_cuda.h"
#include "device_flow_launch.h"
#include "pinned_buffer.h"
#include "quant_gru_cuda_impl.h"

namespace qgru::cuda {

struct QuantGruCudaStream::Impl {
  const QuantGruCuda::Impl* executor = nullptr;
  int N = 0;
  DeviceBuffer state;    // [L, N, H] int32
  DeviceBuffer frame;    // [N, C] floats or codes
  DeviceBuffer y;        // [N, H] floats
  DeviceBuffer y_codes;  // [N, H] codes
  PinnedBuffer in, out;  // one frame each way
  std::vector<HToNextXMap> rescales;  // layer l -> l + 1
  CodeDequantizer dequantizer;        // the last layer's h
  InputQuantizer quantizer;           // layer 0's x

  // One frame: x (floats or codes, per `floats`) already in `in`; the output (floats or codes) left in `out`.
  void step_frame(bool floats, bool want_output) {
    const QuantizedGru& model = executor->model;
    const int L = model.num_layers, H = model.hidden_size, C = model.input_size;
    const size_t NH = static_cast<size_t>(N) * H;
    cudaStream_t stream = executor->stream;
    int uploads = 0, downloads = 0;
    counted_copy(frame.data(), in.reserve(static_cast<size_t>(N) * C * 4), static_cast<size_t>(N) * C * 4,
                 cudaMemcpyHostToDevice, stream, uploads);
    kernels::LayerInputSource source;
    source.cols = C;
    if (floats) {
      source.kind = kernels::LayerInputKind::Floats;
      source.values = static_cast<const float*>(frame.data());
      source.quantizer = quantizer;
    } else {
      source.kind = kernels::LayerInputKind::Codes;
      source.codes = static_cast<const int32_t*>(frame.data());
    }
    const int32_t* out_codes = nullptr;
    for (int l = 0; l < L; ++l) {
      out_codes = executor->cell(l, 0).run_on_device(source, 1, N, static_cast<int32_t*>(state.data()) + l * NH, false,
                                                     nullptr);
      source = kernels::LayerInputSource{};
      source.kind = kernels::LayerInputKind::PreviousLayer;
      source.cols = H;
      source.H = H;
      source.previous[0] = out_codes;
      if (l + 1 < L) source.rescale[0] = rescales[static_cast<size_t>(l)];
    }
    if (want_output) {
      kernels::OutputSink sink;
      sink.H = H;
      sink.D = 1;
      sink.cell_out[0] = out_codes;
      sink.dequantizer[0] = dequantizer;
      sink.y = static_cast<float*>(y.data());
      sink.codes = floats ? nullptr : static_cast<int32_t*>(y_codes.data());
      launch_output(sink, static_cast<int64_t>(NH), stream);
      counted_copy(out.reserve(NH * 4), floats ? y.data() : y_codes.data(), NH * 4, cudaMemcpyDeviceToHost, stream,
                   downloads);
    }
    QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (int l = 0; l < L; ++l) executor->cell(l, 0).check_device_errors();
  }
};

QuantGruCudaStream::QuantGruCudaStream(const QuantGruCuda& executor, int N) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.executor = executor.impl_.get();
  const QuantizedGru& model = s.executor->model;
  const std::string refusal = streaming_refusal(model);
  if (!refusal.empty()) throw Error("CUDA streaming: " + refusal);
  if (N < 1) throw Error("CUDA streaming: N = " + std::to_string(N) + ", expected >= 1");
  s.N = N;
  const int L = model.num_layers, H = model.hidden_size, C = model.input_size;
  const size_t NH = static_cast<size_t>(N) * H;
  // Every buffer a step uses, now: the state, one frame each way (device and pinned), each cell's one-step workspace.
  s.state = DeviceBuffer(static_cast<size_t>(L) * NH * sizeof(int32_t));
  s.frame = DeviceBuffer(static_cast<size_t>(N) * C * 4);
  s.y = DeviceBuffer(NH * sizeof(float));
  s.y_codes = DeviceBuffer(NH * sizeof(int32_t));
  s.in.reserve(static_cast<size_t>(N) * C * 4);
  s.out.reserve(NH * 4);
  for (int l = 0; l < L; ++l) {
    s.executor->cell(l, 0).reserve(1, N);
    if (l + 1 < L) s.rescales.push_back(h_to_next_x_map(model, l, 0));
  }
  s.dequantizer = code_dequantizer(model.cell(L - 1, 0).q(GruTensor::h));
  s.quantizer = input_quantizer(model.input_quant());
  for (int l = 0; l < L; ++l) {
    launch_fill_codes(static_cast<int32_t*>(s.state.data()) + l * NH, static_cast<int64_t>(NH), model.cell(l, 0).q(GruTensor::h).zp,
                      s.executor->stream);
  }
  QGRU_CUDA_CHECK(cudaStreamSynchronize(s.executor->stream));
}

QuantGruCudaStream::~QuantGruCudaStream() = default;
QuantGruCudaStream::QuantGruCudaStream(QuantGruCudaStream&&) noexcept = default;
QuantGruCudaStream& QuantGruCudaStream::operator=(QuantGruCudaStream&&) noexcept = default;

int QuantGruCudaStream::batch() const { return impl_->N; }

void QuantGruCudaStream::step(const float* x, int frames, float* y) {
  Impl& s = *impl_;
  const QuantizedGru& model = s.executor->model;
  const size_t frame_in = static_cast<size_t>(s.N) * model.input_size, frame_out = static_cast<size_t>(s.N) * model.hidden_size;
  for (int f = 0; f < frames; ++f) {
    std::memcpy(s.in.reserve(frame_in * 4), x + static_cast<size_t>(f) * frame_in, frame_in * sizeof(float));
    s.step_frame(true, y != nullptr);
    if (y != nullptr) std::memcpy(y + static_cast<size_t>(f) * frame_out, s.out.reserve(frame_out * 4), frame_out * sizeof(float));
  }
}

void QuantGruCudaStream::step_codes(const int32_t* q_x, int frames, int32_t* y_codes) {
  Impl& s = *impl_;
  const QuantizedGru& model = s.executor->model;
  check_input_codes(model, q_x, frames, s.N);  // every frame before the state changes
  const size_t frame_in = static_cast<size_t>(s.N) * model.input_size, frame_out = static_cast<size_t>(s.N) * model.hidden_size;
  for (int f = 0; f < frames; ++f) {
    std::memcpy(s.in.reserve(frame_in * 4), q_x + static_cast<size_t>(f) * frame_in, frame_in * sizeof(int32_t));
    s.step_frame(false, y_codes != nullptr);
    if (y_codes != nullptr) {
      std::memcpy(y_codes + static_cast<size_t>(f) * frame_out, s.out.reserve(frame_out * 4), frame_out * sizeof(int32_t));
    }
  }
}

void QuantGruCudaStream::get_codes(int32_t* q_h) const {
  const Impl& s = *impl_;
  int copies = 0;  // on the executor's stream: ordered after the steps (a legacy-stream copy would not be)
  counted_copy(q_h, s.state.data(), s.state.bytes(), cudaMemcpyDeviceToHost, s.executor->stream, copies);
  QGRU_CUDA_CHECK(cudaStreamSynchronize(s.executor->stream));
}

void QuantGruCudaStream::set_codes(const int32_t* q_h) {
  const Impl& s = *impl_;
  int copies = 0;
  counted_copy(s.state.data(), q_h, s.state.bytes(), cudaMemcpyHostToDevice, s.executor->stream, copies);
  QGRU_CUDA_CHECK(cudaStreamSynchronize(s.executor->stream));
}

}  // namespace qgru::cuda
