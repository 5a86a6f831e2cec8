#include "qgru_cuda/quant_gru_cuda.h"

#include <cuda_runtime.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/io/sequence_io.h"
#include "qgru/kernels/device_flow.h"
#include "qgru/runtime/code_maps.h"
#include "qgru/runtime/layer_loop.h"
#include "qgru/runtime/quantize_input.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/gru_cell_cuda.h"
#include "blas_handle.h"
#include "device_flow_launch.h"
#include "environment_setting.h"
#include "quant_gru_cuda_impl.h"

namespace qgru::cuda {

namespace {

// The earlier host chaining (QGRU_CUDA_GRU_FLOW=host): each cell's codes back to the host, run_layer_loop.
class CudaCellRunner : public GruCellRunner {
 public:
  CudaCellRunner(const std::vector<GruCellCuda>& cells, int num_directions) : cells_(cells), D_(num_directions) {}
  void run_cell(int layer, int direction, const int32_t* q_x, int T, int N, std::vector<int32_t>& q_h, int32_t* out,
                int out_stride, int out_offset) override {
    const GruCellCuda& cell = cells_.at(static_cast<size_t>(layer * D_ + direction));
    cell.run_into(q_x, T, N, q_h, direction == 1, out, out_stride, out_offset, lengths);
  }

 private:
  const std::vector<GruCellCuda>& cells_;
  int D_;
};

}  // namespace

GruFlow gru_flow_from_environment() {
  return environment_says("QGRU_CUDA_GRU_FLOW", "host", "device") ? GruFlow::Device : GruFlow::Host;
}

QuantGruCuda::QuantGruCuda(const QuantizedGru& model, GruRecurrence recurrence, GruFlow flow)
    : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  if (recurrence == GruRecurrence::FromEnvironment) recurrence = recurrence_from_environment();
  if (flow == GruFlow::FromEnvironment) flow = gru_flow_from_environment();
  d.device_flow = flow == GruFlow::Device;
  d.model = model;
  if (model.cells.empty() || model.cells.size() != static_cast<size_t>(model.num_layers) * model.num_directions) {
    throw Error("CUDA executor: the model has " + std::to_string(model.cells.size()) + " cells, expected " +
                std::to_string(model.num_layers * model.num_directions));
  }
  require_device();
  QGRU_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  d.blas = BlasHandle(d.stream);
  if (model.num_directions == 2) {
    QGRU_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream1, cudaStreamNonBlocking));
    d.blas1 = BlasHandle(d.stream1);
    QGRU_CUDA_CHECK(cudaEventCreateWithFlags(&d.layer_ready, cudaEventDisableTiming));
    QGRU_CUDA_CHECK(cudaEventCreateWithFlags(&d.reverse_done, cudaEventDisableTiming));
  }
  for (const GruCellQuantParams& p : d.model.cells) {
    const TensorQuant& xq = p.q(GruTensor::x);
    const CodeSpace x_space{xq.zp, xq.qmin(), xq.qmax()};
    // Direction 1 on its own stream and cuBLAS handle, so a layer's two directions run at once.
    cudaStream_t stream = p.direction == 1 ? d.stream1 : d.stream;
    cublasHandle_t blas = p.direction == 1 ? d.blas1.get() : d.blas.get();
    try {
      d.cells.emplace_back(p.view(), p.q_W.data(), p.q_R.data(), p.input_size, x_space, stream, blas, recurrence);
    } catch (const NotSupported& e) {
      throw NotSupported("layer " + std::to_string(p.layer) + " direction " + std::to_string(p.direction) + ": " +
                         e.what());
    }
  }
}

QuantGruCuda::~QuantGruCuda() = default;
QuantGruCuda::QuantGruCuda(QuantGruCuda&&) noexcept = default;
QuantGruCuda& QuantGruCuda::operator=(QuantGruCuda&&) noexcept = default;

// One whole call on the device (qgru/kernels/device_flow.h): x up once, the layers chained on the device, the
// directions of a layer on two streams, the output dequantized there, the floats (and the codes when asked) down once.
QuantGruResult QuantGruCuda::Impl::run_device(const float* x, const int32_t* q_x, int T, int N, const int32_t* q_h0,
                                              const int32_t* lengths, bool want_codes) const {
  const int L = model.num_layers, D = model.num_directions, H = model.hidden_size, C = model.input_size;
  last = CallTransfers{};
  if (q_x != nullptr) {
    check_input_codes(model, q_x, T, N);  // the caller's codes, once: packed on the device unchecked
    last.host_passes = 1;
  }
  check_sequence_lengths(lengths, T, N);
  const size_t NH = static_cast<size_t>(N) * H;
  const size_t x_count = static_cast<size_t>(T) * N * C, y_count = static_cast<size_t>(T) * N * D * H;
  grow(x_in, x_count * 4);  // float or int32
  grow(states, static_cast<size_t>(L) * D * NH * sizeof(int32_t));
  grow(y, y_count * sizeof(float));
  if (want_codes) grow(y_codes, y_count * sizeof(int32_t));
  auto* state_codes = static_cast<int32_t*>(states.data());
  // Inputs: x, the starting states (h0 codes, range-checked per cell, or each cell's zp_h), the lengths.
  counted_copy(x_in.data(), x != nullptr ? static_cast<const void*>(x) : static_cast<const void*>(q_x), x_count * 4,
               cudaMemcpyHostToDevice, stream, last.uploads);
  if (q_h0 != nullptr) {
    for (int l = 0; l < L; ++l) {
      for (int d = 0; d < D; ++d) initial_h_codes(model, q_h0, l, d, N);  // throws on a code outside h's range
    }
    counted_copy(state_codes, q_h0, static_cast<size_t>(L) * D * NH * sizeof(int32_t), cudaMemcpyHostToDevice, stream,
                 last.uploads);
  } else {
    for (size_t c = 0; c < model.cells.size(); ++c) {
      launch_fill_codes(state_codes + c * NH, static_cast<int64_t>(NH), model.cells[c].q(GruTensor::h).zp, stream);
    }
  }
  const int32_t* device_lengths = nullptr;
  if (lengths != nullptr) {
    grow(lengths_in, static_cast<size_t>(N) * sizeof(int32_t));
    counted_copy(lengths_in.data(), lengths, static_cast<size_t>(N) * sizeof(int32_t), cudaMemcpyHostToDevice, stream,
                 last.uploads);
    device_lengths = static_cast<const int32_t*>(lengths_in.data());
  }

  kernels::LayerInputSource source;
  source.cols = C;
  if (x != nullptr) {
    source.kind = kernels::LayerInputKind::Floats;
    source.values = static_cast<const float*>(x_in.data());
    source.quantizer = input_quantizer(model.input_quant());
  } else {
    source.kind = kernels::LayerInputKind::Codes;
    source.codes = static_cast<const int32_t*>(x_in.data());
  }
  const int32_t* outs[2] = {nullptr, nullptr};
  for (int l = 0; l < L; ++l) {
    if (D == 2) {  // direction 1 starts when the layer's x is ready on `stream`
      QGRU_CUDA_CHECK(cudaEventRecord(layer_ready, stream));
      QGRU_CUDA_CHECK(cudaStreamWaitEvent(stream1, layer_ready, 0));
    }
    for (int d = 0; d < D; ++d) {
      outs[d] = cell(l, d).run_on_device(source, T, N, state_codes + (static_cast<size_t>(l) * D + d) * NH, d == 1,
                                         device_lengths);
    }
    if (D == 2) {  // the next layer (or the output) reads both directions
      QGRU_CUDA_CHECK(cudaEventRecord(reverse_done, stream1));
      QGRU_CUDA_CHECK(cudaStreamWaitEvent(stream, reverse_done, 0));
    }
    source = kernels::LayerInputSource{};
    source.kind = kernels::LayerInputKind::PreviousLayer;
    source.cols = static_cast<int64_t>(D) * H;
    source.H = H;
    for (int d = 0; d < D; ++d) {
      source.previous[d] = outs[d];
      if (l + 1 < L) source.rescale[d] = h_to_next_x_map(model, l, d);
    }
  }
  kernels::OutputSink sink;
  sink.H = H;
  sink.D = D;
  sink.y = static_cast<float*>(y.data());
  sink.codes = want_codes ? static_cast<int32_t*>(y_codes.data()) : nullptr;
  for (int d = 0; d < D; ++d) {
    sink.cell_out[d] = outs[d];
    sink.dequantizer[d] = code_dequantizer(model.cell(L - 1, d).q(GruTensor::h));
  }
  launch_output(sink, static_cast<int64_t>(y_count), stream);

  QuantGruResult result;
  result.T = T;
  result.N = N;
  result.output.resize(y_count);
  result.h_n_codes.resize(static_cast<size_t>(L) * D * NH);
  counted_copy(result.output.data(), y.data(), y_count * sizeof(float), cudaMemcpyDeviceToHost, stream, last.downloads);
  counted_copy(result.h_n_codes.data(), state_codes, result.h_n_codes.size() * sizeof(int32_t), cudaMemcpyDeviceToHost,
               stream, last.downloads);
  if (want_codes) {
    result.output_codes.resize(y_count);
    counted_copy(result.output_codes.data(), y_codes.data(), y_count * sizeof(int32_t), cudaMemcpyDeviceToHost, stream,
                 last.downloads);
  }
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
  const int64_t before = host_transfer_count();
  for (const GruCellCuda& c : cells) c.check_device_errors();  // the persistent kernel's error words, if it ran
  last.downloads += static_cast<int>(host_transfer_count() - before);
  // h_n's floats from its codes: L·D·N·H values, by the function the device dequantizes with.
  result.h_n.resize(result.h_n_codes.size());
  for (size_t c = 0; c < model.cells.size(); ++c) {
    const CodeDequantizer deq = code_dequantizer(model.cells[c].q(GruTensor::h));
    for (size_t i = 0; i < NH; ++i) result.h_n[c * NH + i] = dequantize_code(deq, result.h_n_codes[c * NH + i]);
  }
  return result;
}

QuantGruResult QuantGruCuda::run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0, const int32_t* lengths) const {
  const Impl& d = *impl_;
  if (d.device_flow && T > 0 && N > 0) return d.run_device(nullptr, q_x, T, N, q_h0, lengths, true);
  d.last = CallTransfers{};
  CudaCellRunner runner(d.cells, d.model.num_directions);
  return run_layer_loop(d.model, q_x, T, N, q_h0, runner, lengths);
}

QuantGruResult QuantGruCuda::run(const float* x, int T, int N, const float* h0, const int32_t* lengths) const {
  const Impl& d = *impl_;
  const QuantizedGru& model = d.model;
  const std::vector<int32_t> q_h0 = quantize_initial_state(model, h0, N);  // [L·D, N, H]: not a pass over [T, N, ·]
  if (d.device_flow && T > 0 && N > 0) {
    return d.run_device(x, nullptr, T, N, q_h0.empty() ? nullptr : q_h0.data(), lengths, true);
  }
  // x's codes by the vectorized quantization (qgru/runtime/quantize_input.h: TensorQuant::quantize's codes, exactly).
  std::vector<int32_t> q_x(static_cast<size_t>(T) * N * model.input_size);
  quantize_fast(model.input_quant(), x, q_x.size(), q_x.data());
  return run_codes(q_x.data(), T, N, q_h0.empty() ? nullptr : q_h0.data(), lengths);
}

QuantGruResult QuantGruCuda::run_floats(const float* x, int T, int N, const float* h0, const int32_t* lengths) const {
  const Impl& d = *impl_;
  if (!d.device_flow || T == 0 || N == 0) {
    QuantGruResult r = run(x, T, N, h0, lengths);
    r.output_codes.clear();
    return r;
  }
  const std::vector<int32_t> q_h0 = quantize_initial_state(d.model, h0, N);
  return d.run_device(x, nullptr, T, N, q_h0.empty() ? nullptr : q_h0.data(), lengths, false);
}

QuantGruCuda::CallTransfers QuantGruCuda::last_call_transfers() const { return impl_->last; }

bool QuantGruCuda::device_flow() const { return impl_->device_flow; }

std::string QuantGruCuda::describe() const {
  std::string text;
  for (size_t i = 0; i < impl_->cells.size(); ++i) {
    const GruCellQuantParams& p = impl_->model.cells[i];
    if (!text.empty()) text += ", ";
    const GruCellCuda& cell = impl_->cells[i];
    text += "l" + std::to_string(p.layer) + ".d" + std::to_string(p.direction) +
            (cell.wide() ? " 16-bit wide kernel" : " int8 cuBLAS");
    if (!cell.fallback_reason().empty()) text += " (" + cell.fallback_reason() + ")";
    text += "; " + cell.describe();
  }
  return text;
}

}  // namespace qgru::cuda
