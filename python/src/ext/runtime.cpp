// The runtime bound for Python through its C API (qgru/qgru_runtime.h): contexts (device, threads, executor),
// whole runs and streams. Inputs are read in place: the C API gets the caller's float32 or int32 buffer
// itself, never a copy, and writes straight into the output arrays the Python layer allocates. The GIL is
// released while the C API computes.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arrays.h"
#include "qgru/base/error.h"
#include "qgru/runtime/quant_executor.h"
#include "toolchain.h"

namespace qgru::python {

namespace {

using OutArray = nb::ndarray<nb::c_contig, nb::device::cpu>;

void check(qgru_rt_status status) {
  if (status != QGRU_RT_OK) throw Error(qgru_rt_last_error());
}

std::string shape_text(const std::vector<size_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

template <class Array>
std::vector<size_t> shape_of(const Array& array) {
  std::vector<size_t> shape;
  for (size_t axis = 0; axis < array.ndim(); ++axis) shape.push_back(array.shape(axis));
  return shape;
}

// The pointer to hand to the C API: the array's own buffer, of exactly `dtype` and `shape`.
template <class T>
const T* input_data(const HostArray& array, DType dtype, const std::vector<size_t>& shape, const std::string& what) {
  if (!has_dtype(array, dtype)) {
    throw Error(what + ": dtype " + (dtype_text(array).empty() ? "unsupported" : dtype_text(array)) + ", expected " +
                dtype_name(dtype));
  }
  if (shape_of(array) != shape) throw Error(what + ": shape " + shape_text(shape_of(array)) + ", expected " + shape_text(shape));
  return static_cast<const T*>(array.data());
}

template <class T>
T* output_data(OutArray& array, DType dtype, const std::vector<size_t>& shape, const std::string& what) {
  const bool dtype_ok = dtype == DType::F32 ? array.dtype() == nb::dtype<float>() : array.dtype() == nb::dtype<int32_t>();
  if (!dtype_ok || shape_of(array) != shape) {
    throw Error("internal: output " + what + " is not " + dtype_name(dtype) + " " + shape_text(shape));
  }
  return static_cast<T*>(array.data());
}

qgru_rt_context_options context_options(const std::string& device, int device_id, int threads,
                                        const std::string& executor) {
  qgru_rt_context_options options = qgru_rt_context_options_default();
  if (device == "cpu") {
    options.device = QGRU_RT_DEVICE_CPU;
  } else if (device == "cuda") {
    options.device = QGRU_RT_DEVICE_CUDA;
  } else {
    throw Error("device '" + device + "': expected cpu or cuda");
  }
  if (executor == "fast") {
    options.executor = QGRU_RT_EXECUTOR_FAST;
  } else if (executor == "reference") {
    options.executor = QGRU_RT_EXECUTOR_REFERENCE;
  } else {
    throw Error("executor '" + executor + "': expected fast or reference");
  }
  if (threads < 0) throw Error("threads " + std::to_string(threads) + ": expected >= 0 (0: the hardware's thread count)");
  if (device_id < 0) throw Error("device_id " + std::to_string(device_id) + ": expected >= 0");
  options.threads = threads;
  options.device_id = device_id;
  return options;
}

// A context: the artifact prepared for one device and executor (weights packed once). Runs may be called
// from several threads at once (the C API's contract).
class Context {
 public:
  Context(const Artifact& artifact, const std::string& device, int device_id, int threads, const std::string& executor)
      : shape_(artifact.runtime().shape()),
        context_(artifact.runtime(), context_options(device, device_id, threads, executor)) {}

  std::string describe() const { return context_.describe(); }

  // x [T, N, C] float32 values or int32 codes (is_codes); h0 [L*D, N, H] of the same kind or None; y [T, N, D*H]
  // and h_n [L*D, N, H] written (float32 or int32 likewise); lengths [N] int32 or None (every sequence T frames).
  void run(const HostArray& x, const std::optional<HostArray>& h0, OutArray& y, OutArray& h_n, bool is_codes,
           const std::optional<HostArray>& lengths) const {
    if (x.ndim() != 3) throw Error("x: shape " + shape_text(shape_of(x)) + ", expected [T, N, C] with C = " + std::to_string(shape_.input_size));
    const int T = int_extent(x, 0, "x"), N = int_extent(x, 1, "x");
    const size_t LD = static_cast<size_t>(shape_.num_layers) * shape_.num_directions;
    const std::vector<size_t> x_shape{size_t(T), size_t(N), size_t(shape_.input_size)};
    const std::vector<size_t> h_shape{LD, size_t(N), size_t(shape_.hidden_size)};
    const std::vector<size_t> y_shape{size_t(T), size_t(N), size_t(shape_.output_size)};
    const int32_t* length_values = lengths ? input_data<int32_t>(*lengths, DType::I32, {size_t(N)}, "lengths") : nullptr;
    if (is_codes) {
      const int32_t* x_codes = input_data<int32_t>(x, DType::I32, x_shape, "x");
      const int32_t* h0_codes = h0 ? input_data<int32_t>(*h0, DType::I32, h_shape, "h0") : nullptr;
      int32_t* y_codes = output_data<int32_t>(y, DType::I32, y_shape, "y");
      int32_t* hn_codes = output_data<int32_t>(h_n, DType::I32, h_shape, "h_n");
      nb::gil_scoped_release release;
      check(qgru_rt_run_codes_lengths(context_.get(), x_codes, T, N, length_values, h0_codes, y_codes, hn_codes));
    } else {
      const float* x_values = input_data<float>(x, DType::F32, x_shape, "x");
      const float* h0_values = h0 ? input_data<float>(*h0, DType::F32, h_shape, "h0") : nullptr;
      float* y_values = output_data<float>(y, DType::F32, y_shape, "y");
      float* hn_values = output_data<float>(h_n, DType::F32, h_shape, "h_n");
      nb::gil_scoped_release release;
      check(qgru_rt_run_lengths(context_.get(), x_values, T, N, length_values, h0_values, y_values, hn_values));
    }
  }

  const qgru_rt_shape& shape() const { return shape_; }
  const qgru_rt::Context& handle() const { return context_; }

 private:
  qgru_rt_shape shape_;
  qgru_rt::Context context_;
};

// A stream: the state of N sequences of a unidirectional model, advanced frame by frame. One thread at a time
// (the C API's contract; the mutex makes a second thread wait rather than race).
class Stream {
 public:
  Stream(const Context& context, int N) : shape_(context.shape()), N_(N), state_(context.handle(), N) {}

  int batch() const { return N_; }

  // x [F, N, C] float32 values or int32 codes; y [F, N, H] written.
  void step(const HostArray& x, OutArray& y, bool is_codes) {
    if (x.ndim() != 3) throw Error("frame: shape " + shape_text(shape_of(x)) + ", expected [F, N, C] or [N, C]");
    const int F = int_extent(x, 0, "frame");
    const std::vector<size_t> x_shape{size_t(F), size_t(N_), size_t(shape_.input_size)};
    const std::vector<size_t> y_shape{size_t(F), size_t(N_), size_t(shape_.hidden_size)};
    if (F < 1) throw Error("frame: shape " + shape_text(shape_of(x)) + ": no frame to step");
    std::lock_guard<std::mutex> lock(mutex_);
    if (is_codes) {
      const int32_t* x_codes = input_data<int32_t>(x, DType::I32, x_shape, "frame");
      int32_t* y_codes = output_data<int32_t>(y, DType::I32, y_shape, "y");
      nb::gil_scoped_release release;
      check(qgru_rt_step_codes(state_.get(), x_codes, F, y_codes));
    } else {
      const float* x_values = input_data<float>(x, DType::F32, x_shape, "frame");
      float* y_values = output_data<float>(y, DType::F32, y_shape, "y");
      nb::gil_scoped_release release;
      check(qgru_rt_step(state_.get(), x_values, F, y_values));
    }
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mutex_);
    check(qgru_rt_state_reset(state_.get()));
  }

  // [L, N, H] int32, each layer's codes in its h space.
  nb::ndarray<nb::numpy, int32_t> get_codes() const {
    std::vector<int32_t> codes(static_cast<size_t>(shape_.num_layers) * N_ * shape_.hidden_size);
    std::lock_guard<std::mutex> lock(mutex_);
    check(qgru_rt_state_get_codes(state_.get(), codes.data()));
    return numpy_owning(std::move(codes), {size_t(shape_.num_layers), size_t(N_), size_t(shape_.hidden_size)});
  }

  void set_codes(const HostArray& codes) {
    const std::vector<size_t> shape{size_t(shape_.num_layers), size_t(N_), size_t(shape_.hidden_size)};
    const int32_t* data = input_data<int32_t>(codes, DType::I32, shape, "state");
    std::lock_guard<std::mutex> lock(mutex_);
    check(qgru_rt_state_set_codes(state_.get(), data));
  }

 private:
  qgru_rt_shape shape_;
  int N_;
  mutable std::mutex mutex_;
  qgru_rt::State state_;
};

// A tensor's quantization as a dict: bits, unsigned, shift, zero_point, code_min, code_max, scale.
nb::dict quant_dict(const TensorQuant& q) {
  nb::dict d;
  d["bits"] = q.bits;
  d["unsigned"] = q.is_unsigned;
  d["symmetric"] = q.symmetric;
  d["shift"] = q.shift;
  d["zero_point"] = q.zp;
  d["code_min"] = q.qmin();
  d["code_max"] = q.qmax();
  d["scale"] = q.scale();
  return d;
}

const TensorQuant& cell_quant(const Artifact& artifact, const std::string& tensor, int layer, int direction) {
  const QuantizedGru& model = artifact.model();
  if (layer < 0 || layer >= model.num_layers || direction < 0 || direction >= model.num_directions) {
    throw Error("cell (layer " + std::to_string(layer) + ", direction " + std::to_string(direction) +
                ") is not in a model of " + std::to_string(model.num_layers) + " layer(s) x " +
                std::to_string(model.num_directions) + " direction(s)");
  }
  if (tensor == "x") return model.cell(layer, direction).q(GruTensor::x);
  if (tensor == "h") return model.cell(layer, direction).q(GruTensor::h);
  throw Error("tensor '" + tensor + "': expected x or h");
}

// Float values [..., C] as codes in layer 0's x space (round half away from zero, saturating): what qgru_rt_run
// does to its input.
nb::ndarray<nb::numpy, int32_t> quantize_input(const Artifact& artifact, const HostArray& x) {
  const float* values = input_data<float>(x, DType::F32, shape_of(x), "x");
  std::vector<int32_t> codes = quantize_values(artifact.model().input_quant(), values, x.size());
  return numpy_owning(std::move(codes), shape_of(x));
}

// Output codes [..., D*H] as float32 values, direction d's columns in cell (L-1, d)'s h space.
nb::ndarray<nb::numpy, float> dequantize_output(const Artifact& artifact, const HostArray& codes) {
  const QuantizedGru& model = artifact.model();
  const size_t width = static_cast<size_t>(model.num_directions) * model.hidden_size;
  if (codes.ndim() < 1 || codes.shape(codes.ndim() - 1) != width) {
    throw Error("codes: shape " + shape_text(shape_of(codes)) + ", expected [..., " + std::to_string(width) + "] (D*H)");
  }
  const int32_t* data = input_data<int32_t>(codes, DType::I32, shape_of(codes), "codes");
  std::vector<float> values(codes.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const int direction = static_cast<int>(i % width) / model.hidden_size;
    values[i] = static_cast<float>(model.cell(model.num_layers - 1, direction).q(GruTensor::h).dequantize(data[i]));
  }
  return numpy_owning(std::move(values), shape_of(codes));
}

}  // namespace

void bind_runtime(nb::module_& m) {
  nb::class_<Context>(m, "Context")
      .def(nb::init<const Artifact&, const std::string&, int, int, const std::string&>(), nb::arg("artifact"),
           nb::arg("device"), nb::arg("device_id"), nb::arg("threads"), nb::arg("executor"))
      .def("describe", &Context::describe)
      .def("run", &Context::run, nb::arg("x"), nb::arg("h0").none(), nb::arg("y"), nb::arg("h_n"), nb::arg("is_codes"),
           nb::arg("lengths").none());
  nb::class_<Stream>(m, "Stream")
      .def(nb::init<const Context&, int>(), nb::arg("context"), nb::arg("batch"))
      .def_prop_ro("batch", &Stream::batch)
      .def("step", &Stream::step, nb::arg("x"), nb::arg("y"), nb::arg("is_codes"))
      .def("reset", &Stream::reset)
      .def("get_codes", &Stream::get_codes)
      .def("set_codes", &Stream::set_codes, nb::arg("codes"));
  m.def("quant", [](const Artifact& a, const std::string& tensor, int layer, int direction) {
    return quant_dict(cell_quant(a, tensor, layer, direction));
  }, nb::arg("artifact"), nb::arg("tensor"), nb::arg("layer"), nb::arg("direction"));
  m.def("quantize_input", &quantize_input, nb::arg("artifact"), nb::arg("x"));
  m.def("dequantize_output", &dequantize_output, nb::arg("artifact"), nb::arg("codes"));
  // The address of an array's data as the extension receives it: the zero-copy tests compare it with NumPy's.
  m.def("_data_address", [](const HostArray& a) { return reinterpret_cast<uintptr_t>(a.data()); }, nb::arg("array"));
}

}  // namespace qgru::python
