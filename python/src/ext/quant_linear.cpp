// qgru.QuantLinear bound for Python: one GPTQ checkpoint layer read once and kept (qgru/gptq/resident_linear.h:
// decoded on the CPU, repacked and uploaded once on CUDA), then called on many inputs x [..., K]. The layer
// comes from a checkpoint file (read as `qgru linear` reads it: quantize_config.json's bits, format and v1
// zero-point rule) or from a checkpoint's tensors in memory with the quantize_config.json text they go with.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "arrays.h"
#include "qgru/base/error.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/layer_linear.h"
#include "qgru/gptq/resident_linear.h"
#include "qgru/io/safetensors.h"

namespace qgru::python {

namespace {

gptq::LinearDevice linear_device(const std::string& device) {
  if (device == "cpu") return gptq::LinearDevice::kCpu;
  if (device == "cuda") return gptq::LinearDevice::kCuda;
  throw Error("device '" + device + "': expected cpu or cuda");
}

// The layer `prefix` of `file` (named `source` in errors); an empty prefix is the file's only layer.
std::string resolve_layer(const SafetensorsFile& file, const std::string& prefix, const std::string& source) {
  const std::vector<std::string> layers = gptq::list_layers(file);
  std::string held;
  for (const std::string& layer : layers) held += (held.empty() ? "" : ", ") + layer;
  if (prefix.empty()) {
    if (layers.size() != 1) {
      throw Error(source + ": holds " + std::to_string(layers.size()) + " layers (" + held + "); give layer=");
    }
    return layers[0];
  }
  for (const std::string& layer : layers) {
    if (layer == prefix) return prefix;
  }
  throw Error(source + ": no layer '" + prefix + "' (no tensor '" + prefix + ".qweight'; the layers: " +
              (held.empty() ? "none" : held) + ")");
}

class QuantLinearLayer {
 public:
  QuantLinearLayer(const SafetensorsFile& file, const gptq::QuantizeConfig& config, const std::string& prefix,
                   bool with_bias, const std::string& device, int device_id, std::string source)
      : source_(std::move(source)),
        prefix_(resolve_layer(file, prefix, source_)),
        layer_(gptq::checkpoint_layer(file, config, prefix_, with_bias, source_), linear_device(device), device_id,
               source_ + ": layer '" + prefix_ + "'"),
        device_(device) {}

  // y [..., N] float32 for x [..., K] (any float or integer dtype, converted to float32 as qgru linear reads x).
  nb::ndarray<nb::numpy, float> run(const HostArray& x) const {
    const gptq::QuantizedLayer& q = layer_.checkpoint().layer;
    const Tensor input = tensor_from_array(x, "x");
    if (input.rank() < 1 || input.shape.back() != q.K) {
      throw Error("x: input has shape " + shape_string(input.shape) + ", expected [..., " + std::to_string(q.K) +
                  "] for layer '" + prefix_ + "' of " + source_);
    }
    int64_t M = 1;
    std::vector<size_t> y_shape;
    for (size_t axis = 0; axis + 1 < input.shape.size(); ++axis) {
      M *= input.shape[axis];
      y_shape.push_back(static_cast<size_t>(input.shape[axis]));
    }
    y_shape.push_back(static_cast<size_t>(q.N));
    const std::vector<float> values = tensor_to_f32(input);
    std::vector<float> y;
    {
      nb::gil_scoped_release release;
      y = layer_.run(values, M);
    }
    return numpy_owning(std::move(y), y_shape);
  }

  // Operands already in GPU memory (a CUDA tensor's addresses, from the Python side): gptq::ResidentLinear's
  // run_device (y fp16 = x fp16 · Ŵᵀ, queued on `stream`, no wait; the bias is the caller's).
  void run_device(uintptr_t x, int64_t M, uintptr_t y, uintptr_t workspace, uintptr_t stream) const {
    nb::gil_scoped_release release;
    layer_.run_device(x, M, y, workspace, stream);
  }
  int64_t workspace_bytes(int64_t M) const { return layer_.device_workspace_bytes(M); }
  // The bias run() adds (float32 [N]; empty without one).
  nb::ndarray<nb::numpy, float> bias() const {
    std::vector<float> copy = layer_.checkpoint().bias;
    const size_t n = copy.size();
    return numpy_owning(std::move(copy), {n});
  }

  const gptq::QuantizedLayer& layer() const { return layer_.checkpoint().layer; }
  bool has_bias() const { return !layer_.checkpoint().bias.empty(); }
  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }
  const std::string& device() const { return device_; }
  int device_id() const { return layer_.device_id(); }

 private:
  std::string source_, prefix_;
  gptq::ResidentLinear layer_;
  std::string device_;
};

// From the checkpoint file: quantize_config.json beside it first, then the tensors, read once (as
// read_checkpoint_layer reads them).
std::unique_ptr<QuantLinearLayer> from_checkpoint(const std::string& path, const std::string& prefix, bool with_bias,
                                                  const std::string& device, int device_id) {
  const gptq::QuantizeConfig config = gptq::read_quantize_config(gptq::quantize_config_path_beside(path));
  const SafetensorsFile file = read_safetensors(path);
  return std::make_unique<QuantLinearLayer>(file, config, prefix, with_bias, device, device_id, path);
}

// From a checkpoint's tensors in memory (name -> array) and the quantize_config.json text that describes them.
std::unique_ptr<QuantLinearLayer> from_tensors(const std::map<std::string, HostArray>& tensors,
                                               const std::string& config_text, const std::string& prefix,
                                               bool with_bias, const std::string& device, int device_id,
                                               const std::string& source) {
  const gptq::QuantizeConfig config = gptq::parse_quantize_config(config_text, source + " (its quantize_config)");
  SafetensorsFile file;
  for (const auto& [name, array] : tensors) file.tensors[name] = tensor_from_array(array, source + ": tensor '" + name + "'");
  return std::make_unique<QuantLinearLayer>(file, config, prefix, with_bias, device, device_id, source);
}

}  // namespace

void bind_quant_linear(nb::module_& m) {
  nb::class_<QuantLinearLayer>(m, "QuantLinearLayer")
      .def("run", &QuantLinearLayer::run, nb::arg("x"))
      .def("run_device", &QuantLinearLayer::run_device, nb::arg("x"), nb::arg("M"), nb::arg("y"), nb::arg("workspace"),
           nb::arg("stream"))
      .def("workspace_bytes", &QuantLinearLayer::workspace_bytes, nb::arg("M"))
      .def("bias", &QuantLinearLayer::bias)
      .def_prop_ro("N", [](const QuantLinearLayer& l) { return l.layer().N; })
      .def_prop_ro("K", [](const QuantLinearLayer& l) { return l.layer().K; })
      .def_prop_ro("G", [](const QuantLinearLayer& l) { return l.layer().G; })
      .def_prop_ro("bits", [](const QuantLinearLayer& l) { return l.layer().bits; })
      .def_prop_ro("group_size", [](const QuantLinearLayer& l) { return (l.layer().K + l.layer().G - 1) / l.layer().G; })
      .def_prop_ro("act_order", [](const QuantLinearLayer& l) {
        const gptq::QuantizedLayer& q = l.layer();
        const int64_t size = (q.K + q.G - 1) / q.G;
        for (int64_t k = 0; k < q.K; ++k) {
          if (q.g_idx[static_cast<size_t>(k)] != k / size) return true;
        }
        return false;
      })
      .def_prop_ro("has_bias", &QuantLinearLayer::has_bias)
      .def_prop_ro("source", &QuantLinearLayer::source)
      .def_prop_ro("layer", &QuantLinearLayer::prefix)
      .def_prop_ro("device", &QuantLinearLayer::device)
      .def_prop_ro("device_id", &QuantLinearLayer::device_id);
  m.def("quant_linear_from_checkpoint", &from_checkpoint, nb::arg("path"), nb::arg("layer"), nb::arg("with_bias"),
        nb::arg("device"), nb::arg("device_id"));
  m.def("quant_linear_from_tensors", &from_tensors, nb::arg("tensors"), nb::arg("quantize_config"), nb::arg("layer"),
        nb::arg("with_bias"), nb::arg("device"), nb::arg("device_id"), nb::arg("source"));
}

}  // namespace qgru::python
