// GPTQ bound for Python: `qgru gptq` on a weight and activations held in memory (gptq::run_job, the CLI's
// one library call, so defaults, checks, errors and the checkpoint written are the CLI's), and `qgru linear
// --device cpu` on a checkpoint layer. The library's option struct is bound field by field (GptqOptions):
// a new option is one def_rw line here, and the Python keyword arguments follow the struct's fields; the
// column order (act_order, group_aware) goes by its --order name instead.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "arrays.h"
#include "qgru/base/error.h"
#include "qgru/base/output_policy.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/hessian.h"
#include "qgru/gptq/job.h"
#include "qgru/gptq/job_device.h"
#include "qgru/gptq/layer_linear.h"
#include "qgru/io/safetensors.h"

namespace qgru::python {

// qgru.Hessian: H = 2·X·Xᵀ of one layer input, accumulated in float64 chunk by chunk (on the CPU the library's
// HessianAccumulator, the one `qgru gptq` and qgru.gptq's activations go through, so the same chunks in the
// same order give the same H bit for bit; on "cuda" the GPU's accumulator of `qgru gptq --device cuda`), or
// given whole as a matrix. The symmetric matrix is made once after the last add and shared by every layer
// quantized from it (q, k and v read one input).
class Hessian {
 public:
  Hessian(int64_t K, const std::string& device) : K_(K) {
    gptq::JobDevice job_device = gptq::make_job_device(device);
    if (job_device.hessian) device_accumulator_ = job_device.hessian(K);
    else accumulator_.emplace(K);
  }

  static std::unique_ptr<Hessian> from_matrix(const HostArray& matrix, int64_t tokens, const std::string& name) {
    const Tensor tensor = tensor_from_array(matrix, name);
    if (tensor.rank() != 2 || tensor.shape[0] != tensor.shape[1] || tensor.shape[0] <= 0) {
      throw Error(name + ": Hessian has shape " + shape_string(tensor.shape) + ", expected a square [K, K]");
    }
    std::unique_ptr<Hessian> hessian(new Hessian(tensor.shape[0]));
    std::vector<double> H = tensor_to_f64(tensor);
    gptq::check_hessian(H, hessian->K_, name);
    hessian->matrix_ = std::make_shared<const std::vector<double>>(std::move(H));
    hessian->tokens_ = tokens;
    return hessian;
  }

  // Rows are tokens: [..., K] float (leading dimensions flattened), as a linear layer sees them.
  void add(const HostArray& rows, const std::string& name) {
    const Tensor tensor = tensor_from_array(rows, name);
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    if (accumulator_) {
      accumulator_->add_tensor(tensor, false, name);
      tokens_ = accumulator_->tokens();
    } else if (device_accumulator_) {
      const std::vector<float> values = gptq::activation_values(tensor, K_, false, name);
      const int64_t M = tensor.numel() / K_;
      device_accumulator_->add(values, M, false);
      tokens_ += M;
    } else {
      throw Error(name + ": this Hessian was given as a matrix; it takes no more rows");
    }
    matrix_.reset();
  }

  // Rows already in GPU memory (a CUDA tensor's __cuda_array_interface__, read by the Python side): [M, K] float32
  // at `rows`, row stride `ld`, written on `stream` (the interface's convention). Only a "cuda" Hessian reads
  // them where they are; the others are refused (the Python side copies rows to the host for them).
  void add_device(uintptr_t rows, int64_t M, int64_t ld, uintptr_t stream, const std::string& name) {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!device_accumulator_) gptq::JobDevice::Hessian::refuse_device_rows(name);
    device_accumulator_->add_device_rows(rows, M, ld, stream, name);
    tokens_ += M;
    matrix_.reset();
  }

  int64_t K() const { return K_; }
  int64_t tokens() {
    std::lock_guard<std::mutex> lock(mutex_);
    return tokens_;
  }

  std::shared_ptr<const std::vector<double>> matrix() {
    nb::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!matrix_) {
      matrix_ = std::make_shared<const std::vector<double>>(accumulator_ ? accumulator_->hessian()
                                                                         : device_accumulator_->finish());
    }
    return matrix_;
  }

  nb::ndarray<nb::numpy, double> numpy() {
    std::vector<double> copy = *matrix();
    return numpy_owning(std::move(copy), {static_cast<size_t>(K_), static_cast<size_t>(K_)});
  }

 private:
  explicit Hessian(int64_t K) : K_(K) {}

  int64_t K_;
  int64_t tokens_ = 0;
  std::optional<gptq::HessianAccumulator> accumulator_;           // device "cpu"
  std::unique_ptr<gptq::JobDevice::Hessian> device_accumulator_;  // device "cuda"
  std::shared_ptr<const std::vector<double>> matrix_;             // made by matrix(), or given whole
  std::mutex mutex_;
};

namespace {

// The result of one layer: the checkpoint's tensors (name -> NumPy array) and the CLI's report line.
// `weights` are the layer's tensors as a weights file would hold them: tensor_name [N, K] and PREFIX.bias.
// The layer's Hessian comes from `activations` or, when they are empty, from `hessian`.
nb::dict gptq_layer(const std::map<std::string, HostArray>& weights, const std::string& tensor_name,
                    const std::vector<HostArray>& activations, bool activations_feature_major,
                    const gptq::GptqOptions& options, const std::string& format, const std::string& output_path,
                    Hessian* hessian, const std::string& device) {
  const std::string source = "weight (in memory)";
  SafetensorsFile input;
  for (const auto& [name, array] : weights) input.tensors[name] = tensor_from_array(array, source + ": tensor '" + name + "'");
  gptq::JobOptions job;
  job.weights_path = source;
  job.weights = &input;
  gptq::LayerJob layer;
  layer.tensor = tensor_name;
  job.layers.push_back(layer);
  for (size_t i = 0; i < activations.size(); ++i) {
    const std::string name = "activations[" + std::to_string(i) + "]";
    job.activation_arrays[tensor_name].emplace_back(name, tensor_from_array(activations[i], name));
  }
  if (hessian != nullptr) {
    job.hessian_arrays[tensor_name] = {"hessian", hessian->matrix(), hessian->tokens()};
  }
  job.activations_feature_major = activations_feature_major;
  job.device = gptq::make_job_device(device);
  job.gptq = options;
  job.format = gptq::parse_format(format);
  job.output_path = output_path;
  // The checkpoint and the quantize_config.json beside it, checked as `qgru gptq -o` checks them
  // (qgru/base/output_policy.h); the inputs are in memory.
  if (!output_path.empty()) {
    check_command_files({}, {{"-o", output_path},
                             {"-o (its quantize_config.json)", gptq::quantize_config_path_beside(output_path)}});
  }
  SafetensorsFile checkpoint;
  job.checkpoint = &checkpoint;
  std::vector<gptq::LayerReport> reports;
  {
    nb::gil_scoped_release release;
    reports = gptq::run_job(job);
  }
  nb::dict tensors;
  for (const auto& [name, tensor] : checkpoint.tensors) tensors[name.c_str()] = numpy_from_tensor(tensor);
  const gptq::LayerReport& r = reports.at(0);
  nb::dict report;
  report["tensor"] = r.tensor;
  report["N"] = r.N;
  report["K"] = r.K;
  report["tokens"] = r.tokens;
  report["gptq_error"] = r.gptq_error;
  report["rtn_error"] = r.rtn_error;
  report["seconds"] = r.seconds;
  report["hessian_seconds"] = r.hessian_seconds;
  report["damp_used"] = r.damp_used;
  report["dead_columns"] = r.dead_columns;
  nb::dict result;
  result["tensors"] = tensors;
  result["report"] = report;
  return result;
}

// `qgru linear --device cpu`: y [M, N] = x [M, K] · Ŵᵀ + bias for the layer PREFIX of the checkpoint, read as
// the CLI reads it (read_checkpoint_layer: quantize_config.json's bits, format and v1 zero rule; the bias
// unless with_bias is false, as --no-bias).
nb::ndarray<nb::numpy, float> gptq_linear(const std::string& checkpoint, const std::string& prefix, const HostArray& x,
                                          const std::string& x_name, bool with_bias) {
  const gptq::CheckpointLayer layer = gptq::read_checkpoint_layer(checkpoint, prefix, with_bias);
  int64_t M = 0;
  const std::vector<float> values = gptq::linear_input(tensor_from_array(x, x_name), x_name, layer, prefix, M);
  std::vector<float> y;
  {
    nb::gil_scoped_release release;
    y = gptq::layer_linear_f32(layer.layer, layer.qweight, values, M);
    gptq::add_linear_bias(y, layer.bias, M);
  }
  return numpy_owning(std::move(y), {static_cast<size_t>(M), static_cast<size_t>(layer.layer.N)});
}

// The quantize_config.json `qgru gptq` writes for these options and format (checkpoint_config, then
// quantize_config_json: one source for the keys), as text; the whole-model writer puts it into config.json.
std::string quantize_config_text(const gptq::GptqOptions& options, const std::string& format) {
  gptq::JobOptions job;
  job.gptq = options;
  job.format = gptq::parse_format(format);
  return gptq::quantize_config_json(gptq::checkpoint_config(job));
}

std::vector<std::string> checkpoint_layers(const std::string& checkpoint) {
  return gptq::list_layers(read_safetensors(checkpoint));
}

}  // namespace

void bind_gptq(nb::module_& m) {
  nb::class_<gptq::GptqOptions>(m, "GptqOptions")
      .def(nb::init<>())
      .def_rw("bits", &gptq::GptqOptions::bits)
      .def_rw("group_size", &gptq::GptqOptions::group_size)
      .def_rw("static_groups", &gptq::GptqOptions::static_groups)
      .def_rw("sym", &gptq::GptqOptions::sym)
      .def_rw("damp", &gptq::GptqOptions::damp)
      .def_rw("block_size", &gptq::GptqOptions::block_size)
      .def_rw("max_damp_retries", &gptq::GptqOptions::max_damp_retries);
  // The options `qgru gptq` starts from (its JobOptions' defaults). The column order (act_order, group_aware)
  // is set by name, as --order takes it.
  m.def("gptq_cli_defaults", [] { return gptq::JobOptions().gptq; });
  m.def("column_order_names", &gptq::column_order_names);
  m.def("set_column_order", &gptq::set_column_order, nb::arg("options"), nb::arg("order"));
  m.def("column_order_name", &gptq::column_order_name, nb::arg("options"));
  nb::class_<Hessian>(m, "Hessian")
      .def(nb::init<int64_t, const std::string&>(), nb::arg("K"), nb::arg("device"))
      .def_static("from_matrix", &Hessian::from_matrix, nb::arg("matrix"), nb::arg("tokens"), nb::arg("name"))
      .def("add", &Hessian::add, nb::arg("rows"), nb::arg("name"))
      .def("add_device", &Hessian::add_device, nb::arg("rows"), nb::arg("M"), nb::arg("ld"), nb::arg("stream"),
           nb::arg("name"))
      .def_prop_ro("K", &Hessian::K)
      .def_prop_ro("tokens", &Hessian::tokens)
      .def("matrix", &Hessian::numpy);
  m.def("gptq_layer", &gptq_layer, nb::arg("weights"), nb::arg("tensor_name"), nb::arg("activations"),
        nb::arg("activations_feature_major"), nb::arg("options"), nb::arg("format"), nb::arg("output_path"),
        nb::arg("hessian").none(), nb::arg("device"));
  m.def("gptq_devices", &gptq::job_devices);
  m.def("gptq_linear", &gptq_linear, nb::arg("checkpoint"), nb::arg("layer"), nb::arg("x"), nb::arg("x_name"),
        nb::arg("with_bias"));
  m.def("checkpoint_layers", &checkpoint_layers, nb::arg("checkpoint"));
  m.def("quantize_config_text", &quantize_config_text, nb::arg("options"), nb::arg("format"));
}

}  // namespace qgru::python
