// Reading and validating the artifact (format in qgru/runtime/artifact.h).
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "qgru/io/strict_json.h"
#include "qgru/runtime/artifact_keys.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/sha256.h"
#include "qgru/io/safetensors.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/overflow_check.h"

namespace qgru {

namespace {

using nlohmann::json;

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error("artifact " + source_ + ": " + where + ": " + what);
  }
  const json& at(const json& object, const std::string& key, const std::string& where) const {
    if (!object.is_object() || !object.contains(key)) fail(where + "." + key, "missing");
    return object.at(key);
  }
  int64_t integer(const json& object, const std::string& key, const std::string& where, int64_t lo, int64_t hi) const {
    const json& v = at(object, key, where);
    if (!v.is_number_integer()) fail(where + "." + key, "expected an integer, got " + v.dump());
    const int64_t value = v.get<int64_t>();
    if (value < lo || value > hi) {
      fail(where + "." + key, std::to_string(value) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return value;
  }
  int int32(const json& object, const std::string& key, const std::string& where, int64_t lo, int64_t hi) const {
    return static_cast<int>(integer(object, key, where, lo, hi));
  }
  bool boolean(const json& object, const std::string& key, const std::string& where) const {
    const json& v = at(object, key, where);
    if (!v.is_boolean()) fail(where + "." + key, "expected true or false, got " + v.dump());
    return v.get<bool>();
  }
  std::string string(const json& object, const std::string& key, const std::string& where) const {
    const json& v = at(object, key, where);
    if (!v.is_string()) fail(where + "." + key, "expected a string, got " + v.dump());
    return v.get<std::string>();
  }

  // A tensor of the given shape and one of the allowed dtypes, as int64 values.
  std::vector<int64_t> tensor(const std::map<std::string, Tensor>& tensors, const std::string& name,
                              const std::vector<int64_t>& shape, std::initializer_list<DType> dtypes) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) fail("tensor " + name, "missing from the tensor file");
    const Tensor& t = it->second;
    bool dtype_ok = false;
    std::string expected;
    for (DType d : dtypes) {
      dtype_ok = dtype_ok || t.dtype == d;
      expected += (expected.empty() ? "" : " or ") + std::string(dtype_name(d));
    }
    if (!dtype_ok) fail("tensor " + name, std::string("dtype ") + dtype_name(t.dtype) + ", expected " + expected);
    if (t.shape != shape) fail("tensor " + name, "shape " + shape_string(t.shape) + ", expected " + shape_string(shape));
    return tensor_to_i64(t, name);
  }
  std::vector<int32_t> int32_tensor(const std::map<std::string, Tensor>& tensors, const std::string& name,
                                    const std::vector<int64_t>& shape, std::initializer_list<DType> dtypes, int64_t lo,
                                    int64_t hi) const {
    const std::vector<int64_t> values = tensor(tensors, name, shape, dtypes);
    std::vector<int32_t> result(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (values[i] < lo || values[i] > hi) {
        fail("tensor " + name, "value " + std::to_string(values[i]) + " at flat index " + std::to_string(i) + " outside [" +
                                   std::to_string(lo) + ", " + std::to_string(hi) + "]");
      }
      result[i] = static_cast<int32_t>(values[i]);
    }
    return result;
  }

  // A scale mantissa: 1 for a tensor the config gives a power-of-two scale, else in [0.5, 1) (frexp's).
  void check_mantissa(double mantissa, bool real_scale, const std::string& where) const {
    if (!real_scale && mantissa != 1.0) fail(where, "a power-of-two tensor needs the mantissa 1, got " + std::to_string(mantissa));
    if (real_scale && !(mantissa >= 0.5 && mantissa < 1.0)) fail(where, "mantissa " + std::to_string(mantissa) + " outside [0.5, 1)");
  }
  std::vector<double> mantissa_tensor(const std::map<std::string, Tensor>& tensors, const std::string& name,
                                      int64_t channels, bool real_scale) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) fail("tensor " + name, "missing from the tensor file");
    const Tensor& t = it->second;
    if (t.dtype != DType::F64) fail("tensor " + name, std::string("dtype ") + dtype_name(t.dtype) + ", expected F64");
    if (t.shape != std::vector<int64_t>{channels}) {
      fail("tensor " + name, "shape " + shape_string(t.shape) + ", expected " + shape_string({channels}));
    }
    std::vector<double> values = tensor_to_f64(t);
    for (size_t i = 0; i < values.size(); ++i) check_mantissa(values[i], real_scale, "tensor " + name + " element " + std::to_string(i));
    return values;
  }

  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

void read_cell(const Reader& r, const json& cell, const std::map<std::string, Tensor>& tensors, const BitwidthConfig& config,
               GruCellQuantParams& p, int layer, int direction, int input_size, int hidden_size, bool linear_before_reset,
               bool multiplier_scales) {
  const std::string where = "cells[" + std::to_string(layer) + "," + std::to_string(direction) + "]";
  if (r.int32(cell, "layer", where, 0, 1 << 20) != layer || r.int32(cell, "direction", where, 0, 1) != direction) {
    r.fail(where, "holds layer/direction " + cell["layer"].dump() + "/" + cell["direction"].dump() + ", expected " +
                      std::to_string(layer) + "/" + std::to_string(direction));
  }
  p.layer = layer;
  p.direction = direction;
  p.linear_before_reset = linear_before_reset;
  p.multiplier_scales = multiplier_scales;
  p.input_size = r.int32(cell, "input_size", where, 1, int64_t{1} << 30);
  p.hidden_size = r.int32(cell, "hidden_size", where, 1, int64_t{1} << 30);
  if (p.input_size != input_size) r.fail(where + ".input_size", std::to_string(p.input_size) + ", expected " + std::to_string(input_size));
  if (p.hidden_size != hidden_size) r.fail(where + ".hidden_size", std::to_string(p.hidden_size) + ", expected " + std::to_string(hidden_size));
  auto accumulator = [&](const std::string& key) {
    const std::string text = r.string(cell, key, where);
    if (text != "int32" && text != "int64") r.fail(where + "." + key, "'" + text + "' is not int32 or int64");
    return text == "int32";
  };
  p.gemm_x_int32 = accumulator("gemm_x_accumulator");
  p.gemm_h_int32 = accumulator("gemm_h_accumulator");

  const json& quant = r.at(cell, "tensors", where);
  for (int i = 0; i < kGruTensorCount; ++i) {
    const auto tensor = static_cast<GruTensor>(i);
    const std::string tw = where + ".tensors." + gru_tensor_name(tensor);
    const json& entry = r.at(quant, gru_tensor_name(tensor), where + ".tensors");
    TensorQuant q = config.spec(tensor);
    if (r.int32(entry, "bits", tw, 2, 16) != q.bits) r.fail(tw + ".bits", "differs from the config's " + std::to_string(q.bits));
    if (!gru_tensor_is_parameter(tensor)) {
      if (r.boolean(entry, "unsigned", tw) != q.is_unsigned) r.fail(tw + ".unsigned", "differs from the config");
      if (r.boolean(entry, "symmetric", tw) != q.symmetric) r.fail(tw + ".symmetric", "differs from the config");
      q.shift = r.int32(entry, "shift", tw, kMinShift, kMaxShift);
      q.zp = r.int32(entry, "zp", tw, q.qmin(), q.qmax());
      if (q.symmetric && q.zp != 0) r.fail(tw + ".zp", "a symmetric tensor needs zp 0, got " + std::to_string(q.zp));
      if (multiplier_scales) {
        const json& mantissa = r.at(entry, "mantissa", tw);
        if (!mantissa.is_number()) r.fail(tw + ".mantissa", "expected a number, got " + mantissa.dump());
        q.mantissa = mantissa.get<double>();
        r.check_mantissa(q.mantissa, config.of(tensor).multiplier_scale, tw + ".mantissa");
      } else if (entry.contains("mantissa")) {
        r.fail(tw + ".mantissa", "only a multiplier-scale artifact (version 3) has scale mantissas");
      }
      const json& range = r.at(entry, "range", tw);
      if (!range.is_array() || range.size() != 2 || !range[0].is_number() || !range[1].is_number()) {
        r.fail(tw + ".range", "expected [min, max], got " + range.dump());
      }
      p.range[static_cast<size_t>(i)] = {range[0].get<double>(), range[1].get<double>()};
    }
    p.quant[static_cast<size_t>(i)] = q;
  }

  const std::string prefix = artifact_cell_prefix(layer, direction);
  const int64_t channels = 3 * static_cast<int64_t>(hidden_size);
  auto weight_codes = [&](GruTensor tensor, int64_t cols) {
    const int bits = p.q(tensor).bits;
    const int64_t bound = int64_t{1} << (bits - 1);
    return r.int32_tensor(tensors, prefix + gru_tensor_name(tensor), {channels, cols},
                          {bits <= 8 ? DType::I8 : DType::I16}, -bound, bound - 1);
  };
  p.q_W = weight_codes(GruTensor::W, input_size);
  p.q_R = weight_codes(GruTensor::R, hidden_size);
  auto bias_codes = [&](GruTensor tensor) {
    const int64_t bound = int64_t{1} << (p.q(tensor).bits - 1);
    return r.int32_tensor(tensors, prefix + gru_tensor_name(tensor), {channels}, {DType::I32}, -bound, bound - 1);
  };
  p.q_bw = bias_codes(GruTensor::bw);
  p.q_br = bias_codes(GruTensor::br);
  for (const ChannelShiftKey& key : channel_shift_keys()) {
    p.*(key.member) = r.int32_tensor(tensors, prefix + key.name, {channels}, {DType::I32}, -2 * kMaxShift, 2 * kMaxShift);
  }
  for (GruTensor tensor : {GruTensor::W, GruTensor::R, GruTensor::bw, GruTensor::br}) {
    for (int32_t s : *parameter_shifts(p, tensor)) {
      if (s < kMinShift || s > kMaxShift) r.fail("tensor " + prefix + "shift_" + gru_tensor_name(tensor), "shift " + std::to_string(s) + " outside [" + std::to_string(kMinShift) + ", " + std::to_string(kMaxShift) + "]");
    }
    if (!config.of(tensor).per_channel) {
      const std::vector<int32_t>& shifts = *parameter_shifts(p, tensor);
      if (std::adjacent_find(shifts.begin(), shifts.end(), std::not_equal_to<>()) != shifts.end()) {
        r.fail("tensor " + prefix + "shift_" + gru_tensor_name(tensor), "a per-tensor quantization needs one shift for every channel");
      }
    }
  }
  std::vector<std::vector<int32_t>> stored_channel_multipliers;
  if (multiplier_scales) {
    for (const ChannelMantissaKey& key : channel_mantissa_keys()) {
      p.*(key.member) = r.mantissa_tensor(tensors, prefix + "mantissa_" + gru_tensor_name(key.tensor), channels,
                                          config.of(key.tensor).multiplier_scale);
      const std::vector<double>& mantissas = p.*(key.member);
      if (!config.of(key.tensor).per_channel &&
          std::adjacent_find(mantissas.begin(), mantissas.end(), std::not_equal_to<>()) != mantissas.end()) {
        r.fail("tensor " + prefix + "mantissa_" + gru_tensor_name(key.tensor), "a per-tensor quantization needs one scale for every channel");
      }
    }
    for (const ChannelMultiplierKey& key : channel_multiplier_keys()) {
      stored_channel_multipliers.push_back(r.int32_tensor(tensors, prefix + key.name, {channels}, {DType::I32}, 1, INT32_MAX));
    }
  }
  const std::vector<int64_t> W_sum = r.tensor(tensors, prefix + "W_sum", {channels}, {DType::I64});
  const std::vector<int64_t> R_sum = r.tensor(tensors, prefix + "R_sum", {channels}, {DType::I64});

  const json& derived = r.at(cell, "derived", where);
  std::vector<std::pair<std::string, int64_t>> stored_scalars;
  std::vector<int64_t> stored_multipliers;
  for (const ScalarShiftKey& key : scalar_shift_keys(linear_before_reset)) {
    stored_scalars.emplace_back(key.name, r.integer(derived, key.name, where + ".derived", -2 * kMaxShift, 2 * kMaxShift));
    if (multiplier_scales) stored_multipliers.push_back(r.integer(derived, multiplier_key(key.name), where + ".derived", 1, INT32_MAX));
  }
  const int64_t stored_one = r.integer(derived, "quant_one_in_update_gate_scale", where + ".derived", INT64_MIN, INT64_MAX);

  // Recompute every derived quantity from the base shifts and codes, and compare with what is stored.
  const std::vector<std::vector<int32_t>> stored_channel = {p.shift_gemm_x_to_weight_ih_linear, p.shift_bw_to_gemm_x,
                                                            p.shift_gemm_h_to_weight_hh_linear, p.shift_br_to_gemm_h};
  compute_derived_shifts(p);
  if (p.W_sum != W_sum) r.fail("tensor " + prefix + "W_sum", "differs from the row sums of " + prefix + "W");
  if (p.R_sum != R_sum) r.fail("tensor " + prefix + "R_sum", "differs from the row sums of " + prefix + "R");
  size_t k = 0;
  for (const ChannelShiftKey& key : channel_shift_keys()) {
    if (!key.derived) continue;
    if (p.*(key.member) != stored_channel[k++]) {
      r.fail("tensor " + prefix + key.name, "differs from the value derived from the base shifts");
    }
  }
  for (size_t i = 0; i < stored_channel_multipliers.size(); ++i) {
    const ChannelMultiplierKey& key = channel_multiplier_keys()[i];
    if (p.*(key.member) != stored_channel_multipliers[i]) {
      r.fail("tensor " + prefix + key.name, "differs from the value derived from the scales");
    }
  }
  for (size_t i = 0; i < stored_scalars.size(); ++i) {
    const ScalarShiftKey& key = scalar_shift_keys(linear_before_reset)[i];
    if (p.*(key.member) != stored_scalars[i].second) {
      r.fail(where + ".derived." + key.name, std::to_string(stored_scalars[i].second) + " differs from the derived " +
                                                 std::to_string(p.*(key.member)));
    }
    if (multiplier_scales && p.*(key.multiplier) != stored_multipliers[i]) {
      r.fail(where + ".derived." + multiplier_key(key.name), std::to_string(stored_multipliers[i]) + " differs from the derived " +
                                                                 std::to_string(p.*(key.multiplier)));
    }
  }
  if (p.quant_one_in_update_gate_scale != stored_one) {
    r.fail(where + ".derived.quant_one_in_update_gate_scale", std::to_string(stored_one) + " differs from the derived " +
                                                                  std::to_string(p.quant_one_in_update_gate_scale));
  }

  const json& activations = r.at(cell, "activations", where);
  const struct {
    GateKind gate;
    ActivationFunction function;
    GruTensor input, output;
  } gates[] = {{GateKind::Update, ActivationFunction::Sigmoid, GruTensor::update_gate_input, GruTensor::update_gate_output},
               {GateKind::Reset, ActivationFunction::Sigmoid, GruTensor::reset_gate_input, GruTensor::reset_gate_output},
               {GateKind::New, ActivationFunction::Tanh, GruTensor::new_gate_input, GruTensor::new_gate_output}};
  for (const auto& g : gates) {
    const std::string gw = where + ".activations." + gate_kind_name(g.gate);
    ActivationTables tables =
        activation_from_artifact(r.at(activations, gate_kind_name(g.gate), where + ".activations"), tensors,
                                 prefix + gate_kind_name(g.gate), r.source());
    auto same = [](const TensorQuant& a, const TensorQuant& b) {
      return a.bits == b.bits && a.is_unsigned == b.is_unsigned && a.shift == b.shift && a.zp == b.zp;
    };
    if (tables.function != g.function) r.fail(gw, std::string("function ") + activation_function_name(tables.function) + ", expected " + activation_function_name(g.function));
    if (!same(tables.input, p.q(g.input))) r.fail(gw + ".input", std::string("differs from ") + gru_tensor_name(g.input));
    if (!same(tables.output, p.q(g.output))) r.fail(gw + ".output", std::string("differs from ") + gru_tensor_name(g.output));
    tables.input.mantissa = p.q(g.input).mantissa;  // the activation object holds shift and zp; the scale is the tensor's
    tables.output.mantissa = p.q(g.output).mantissa;
    p.activation[static_cast<size_t>(g.gate)] = std::move(tables);
  }
}

// The artifact's "tensor_file": a plain file name, read from the JSON's folder.
std::string tensor_file_name(const Reader& r, const json& root) {
  if (!root.is_object()) r.fail("(top level)", "expected a JSON object");
  const std::string tensor_name = r.string(root, "tensor_file", "");
  if (tensor_name.empty() || tensor_name == "." || tensor_name == ".." ||
      std::filesystem::path(tensor_name).filename().string() != tensor_name) {
    r.fail("tensor_file", "'" + tensor_name + "' must be a file name in the JSON's folder");
  }
  return tensor_name;
}

std::string tensor_path_beside(const std::string& json_path, const std::string& tensor_name) {
  return (std::filesystem::path(json_path).parent_path() / tensor_name).string();
}

// The reader of both sources: json_text is the artifact's JSON, named json_path in messages; tensor_bytes
// returns the tensor file's bytes and its name for messages, given the JSON's "tensor_file".
QuantizedGru parse_artifact(const std::string& json_text, const std::string& json_path,
                            const std::function<std::vector<uint8_t>(const std::string& tensor_name, std::string* source)>& tensor_bytes) {
  const Reader r(json_path);
  const json root = parse_strict_json(json_text, "artifact " + json_path);
  const std::string tensor_name = tensor_file_name(r, root);
  const std::string schema = r.string(root, "schema", "");
  if (schema != kArtifactSchema) r.fail("schema", "'" + schema + "' is not '" + kArtifactSchema + "'");
  const int64_t version = r.integer(root, "version", "", INT64_MIN, INT64_MAX);
  if (version > kArtifactVersion) {
    r.fail("version", std::to_string(version) + " is newer than this qgru reads (" + std::to_string(kArtifactVersion) +
                          "); use a newer qgru or quantize again");
  }
  if (version < 1) r.fail("version", std::to_string(version) + " is not a valid version");
  // Version 1: the linear_before_reset = 1 cell; version 2 names the cell variant; version 3 also says "scales":
  // "multiplier" (qgru/runtime/artifact.h).
  bool linear_before_reset = true;
  if (version == 1) {
    if (root.contains("linear_before_reset")) {
      r.fail("linear_before_reset", "a version 1 artifact holds the linear_before_reset = 1 cell only; the key needs version 2");
    }
  } else {
    linear_before_reset = r.boolean(root, "linear_before_reset", "");
  }
  const bool multiplier_scales = version >= kArtifactVersionMultiplierScales;
  if (multiplier_scales) {
    const std::string scales = r.string(root, "scales", "");
    if (scales != "multiplier") r.fail("scales", "'" + scales + "' is not 'multiplier'");
  } else if (root.contains("scales")) {
    r.fail("scales", "a version " + std::to_string(version) + " artifact has power-of-two scales only; the key needs version 3");
  }

  std::string tensor_path;
  const std::vector<uint8_t> bytes = tensor_bytes(tensor_name, &tensor_path);
  const std::string recorded = r.string(root, "tensor_file_sha256", "");
  const std::string actual = sha256_hex(bytes.data(), bytes.size());
  if (recorded != actual) {
    r.fail("tensor_file_sha256", "the tensor file " + tensor_path + " has sha256 " + actual + ", the artifact records " +
                                     recorded + " (modified or from another quantization)");
  }
  const SafetensorsFile file = parse_safetensors(bytes, tensor_path);

  QuantizedGru model;
  model.config = parse_bitwidth_config(r.at(root, "config", ""), json_path + " (config)");
  if (model.config.multiplier_scales() != multiplier_scales) {
    r.fail("config", multiplier_scales ? "a multiplier-scale artifact needs a config with multiplier scales"
                                       : "a config with multiplier scales needs a multiplier-scale artifact (version 3)");
  }
  const json& shapes = r.at(root, "shapes", "");
  model.input_size = r.int32(shapes, "input_size", "shapes", 1, int64_t{1} << 30);
  model.hidden_size = r.int32(shapes, "hidden_size", "shapes", 1, int64_t{1} << 30);
  model.num_layers = r.int32(shapes, "num_layers", "shapes", 1, 1 << 20);
  model.num_directions = r.int32(shapes, "num_directions", "shapes", 1, 2);
  const json& cells = r.at(root, "cells", "");
  const size_t expected_cells = static_cast<size_t>(model.num_layers) * model.num_directions;
  if (!cells.is_array() || cells.size() != expected_cells) {
    r.fail("cells", "expected an array of " + std::to_string(expected_cells) + " cells (layers x directions)");
  }
  model.cells.resize(expected_cells);
  for (int l = 0; l < model.num_layers; ++l) {
    for (int d = 0; d < model.num_directions; ++d) {
      const int input_size = l == 0 ? model.input_size : model.num_directions * model.hidden_size;
      read_cell(r, cells[static_cast<size_t>(l * model.num_directions + d)], file.tensors, model.config, model.cell(l, d), l, d,
                input_size, model.hidden_size, linear_before_reset, multiplier_scales);
    }
    const TensorQuant& x0 = model.cell(l, 0).q(GruTensor::x);
    for (int d = 1; d < model.num_directions; ++d) {
      const TensorQuant& xd = model.cell(l, d).q(GruTensor::x);
      if (xd.shift != x0.shift || xd.zp != x0.zp || xd.mantissa != x0.mantissa) {
        r.fail("cells[" + std::to_string(l) + "," + std::to_string(d) + "].tensors.x", "the directions of a layer must share x's shift and zp");
      }
    }
  }
  const json& provenance = r.at(root, "provenance", "");
  auto optional_string = [&](const json& object, const char* a, const char* b) {
    return object.contains(a) && object[a].is_object() && object[a].contains(b) && object[a][b].is_string()
               ? object[a][b].get<std::string>()
               : std::string();
  };
  model.provenance.model_path = optional_string(provenance, "model", "path");
  model.provenance.model_sha256 = optional_string(provenance, "model", "sha256");
  model.provenance.stats_path = optional_string(provenance, "stats", "path");
  model.provenance.stats_sha256 = optional_string(provenance, "stats", "sha256");
  model.provenance.config_source = optional_string(provenance, "config", "source");
  model.provenance.config_sha256 = optional_string(provenance, "config", "sha256");
  model.provenance.tool_version = r.string(root, "tool_version", "");

  const OverflowProof proof = prove_no_overflow(model);
  if (!proof.ok()) r.fail("cells", "overflow: " + proof.first_failure());
  return model;
}

}  // namespace

std::string recorded_artifact_tensor_path(const std::string& json_path) {
  const json root = parse_strict_json(read_file_text(json_path), "artifact " + json_path);
  return tensor_path_beside(json_path, tensor_file_name(Reader(json_path), root));
}

void add_artifact_input(std::vector<CommandFile>& inputs, const std::string& flag, const std::string& json_path) {
  inputs.push_back({flag, json_path});
  std::error_code error;
  if (!json_path.empty() && std::filesystem::is_regular_file(json_path, error)) {
    inputs.push_back({flag + " (its tensor file)", recorded_artifact_tensor_path(json_path)});
  }
}

QuantizedGru read_artifact(const std::string& json_path) {
  return parse_artifact(read_file_text(json_path), json_path, [&](const std::string& tensor_name, std::string* source) {
    *source = tensor_path_beside(json_path, tensor_name);
    return read_file_bytes(*source);
  });
}

QuantizedGru read_artifact_memory(const std::string& json_text, const uint8_t* tensor_bytes, size_t tensor_size,
                                  const std::string& source_name) {
  if (!tensor_bytes && tensor_size > 0) throw Error("artifact " + source_name + ": null tensor bytes of size " + std::to_string(tensor_size));
  return parse_artifact(json_text, source_name, [&](const std::string& tensor_name, std::string* source) {
    *source = source_name + " (tensor bytes for " + tensor_name + ")";
    return tensor_bytes ? std::vector<uint8_t>(tensor_bytes, tensor_bytes + tensor_size) : std::vector<uint8_t>();
  });
}

}  // namespace qgru
