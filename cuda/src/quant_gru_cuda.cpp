#include "qgru_cuda/quant_gru_cuda.h"

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "qgru/runtime/quantize_input.h"
#include "qgru/runtime/layer_loop.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/gru_cell_cuda.h"
#include "blas_handle.h"

namespace qgru::cuda {

namespace {

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

struct QuantGruCuda::Impl {
  QuantizedGru model;
  cudaStream_t stream = nullptr;
  BlasHandle blas;                 // one cuBLAS handle and workspace for every cell, bound to `stream`
  std::vector<GruCellCuda> cells;  // destroyed before the handle and the stream (declared after them)
  ~Impl() {
    cells.clear();
    blas = BlasHandle();
    if (stream != nullptr) cudaStreamDestroy(stream);  // destructor: nothing to report to
  }
};

QuantGruCuda::QuantGruCuda(const QuantizedGru& model, GruRecurrence recurrence) : impl_(std::make_unique<Impl>()) {
  Impl& d = *impl_;
  if (recurrence == GruRecurrence::FromEnvironment) recurrence = recurrence_from_environment();
  d.model = model;
  if (model.cells.empty() || model.cells.size() != static_cast<size_t>(model.num_layers) * model.num_directions) {
    throw Error("CUDA executor: the model has " + std::to_string(model.cells.size()) + " cells, expected " +
                std::to_string(model.num_layers * model.num_directions));
  }
  require_device();
  QGRU_CUDA_CHECK(cudaStreamCreateWithFlags(&d.stream, cudaStreamNonBlocking));
  d.blas = BlasHandle(d.stream);
  for (const GruCellQuantParams& p : d.model.cells) {
    const TensorQuant& xq = p.q(GruTensor::x);
    const CodeSpace x_space{xq.zp, xq.qmin(), xq.qmax()};
    try {
      d.cells.emplace_back(p.view(), p.q_W.data(), p.q_R.data(), p.input_size, x_space, d.stream, d.blas.get(), recurrence);
    } catch (const NotSupported& e) {
      throw NotSupported("layer " + std::to_string(p.layer) + " direction " + std::to_string(p.direction) + ": " +
                         e.what());
    }
  }
}

QuantGruCuda::~QuantGruCuda() = default;
QuantGruCuda::QuantGruCuda(QuantGruCuda&&) noexcept = default;
QuantGruCuda& QuantGruCuda::operator=(QuantGruCuda&&) noexcept = default;

QuantGruResult QuantGruCuda::run_codes(const int32_t* q_x, int T, int N, const int32_t* q_h0, const int32_t* lengths) const {
  const Impl& d = *impl_;
  CudaCellRunner runner(d.cells, d.model.num_directions);
  return run_layer_loop(d.model, q_x, T, N, q_h0, runner, lengths);
}

QuantGruResult QuantGruCuda::run(const float* x, int T, int N, const float* h0, const int32_t* lengths) const {
  const QuantizedGru& model = impl_->model;
  // x's codes by the vectorized quantization (qgru/runtime/quantize_input.h: TensorQuant::quantize's codes, exactly).
  // For the 1.6 M values of (256, 100, 64) the scalar quantize_values took 15 ms on the development VM and this
  // 0.45 ms; run_codes itself takes 3.3 ms on an H200.
  std::vector<int32_t> q_x(static_cast<size_t>(T) * N * model.input_size);
  quantize_fast(model.input_quant(), x, q_x.size(), q_x.data());
  const std::vector<int32_t> q_h0 = quantize_initial_state(model, h0, N);
  return run_codes(q_x.data(), T, N, q_h0.empty() ? nullptr : q_h0.data(), lengths);
}

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
