// Writing the artifact (format in qgru/runtime/artifact.h).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <nlohmann/json.hpp>

#include "qgru/io/strict_json.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/message_text.h"
#include "qgru/base/sha256.h"
#include "qgru/io/safetensors.h"
#include "qgru/quant/artifact_write.h"
#include "qgru/runtime/artifact_keys.h"
#include "qgru/runtime/overflow_check.h"

namespace qgru {

namespace {

using nlohmann::json;

template <class T>
Tensor to_tensor(const std::vector<int32_t>& values, std::vector<int64_t> shape) {
  std::vector<T> narrowed(values.size());
  for (size_t i = 0; i < values.size(); ++i) narrowed[i] = static_cast<T>(values[i]);  // codes fit: checked widths
  return Tensor::from_vector(std::move(shape), narrowed);
}

Tensor weight_tensor(const std::vector<int32_t>& codes, int bits, int64_t rows, int64_t cols) {
  return bits <= 8 ? to_tensor<int8_t>(codes, {rows, cols}) : to_tensor<int16_t>(codes, {rows, cols});
}

json cell_json(const GruCellQuantParams& p, const BitwidthConfig& config, std::map<std::string, Tensor>& tensors) {
  const std::string prefix = artifact_cell_prefix(p.layer, p.direction);
  const int64_t channels = 3 * static_cast<int64_t>(p.hidden_size);
  json cell = {{"layer", p.layer},
               {"direction", p.direction},
               {"input_size", p.input_size},
               {"hidden_size", p.hidden_size},
               {"gemm_x_accumulator", p.gemm_x_int32 ? "int32" : "int64"},
               {"gemm_h_accumulator", p.gemm_h_int32 ? "int32" : "int64"}};
  json quant = json::object();
  for (int i = 0; i < kGruTensorCount; ++i) {
    const auto tensor = static_cast<GruTensor>(i);
    const TensorQuant& q = p.q(tensor);
    if (gru_tensor_is_parameter(tensor)) {
      const std::vector<int32_t>& shifts = *parameter_shifts(p, tensor);
      const auto [lo, hi] = std::minmax_element(shifts.begin(), shifts.end());
      quant[gru_tensor_name(tensor)] = {{"bits", q.bits}, {"per_channel", config.of(tensor).per_channel},
                                        {"shift_min", *lo}, {"shift_max", *hi}};
    } else {
      const FloatRange& r = p.range[static_cast<size_t>(i)];
      quant[gru_tensor_name(tensor)] = {{"bits", q.bits}, {"unsigned", q.is_unsigned}, {"symmetric", q.symmetric},
                                        {"shift", q.shift}, {"zp", q.zp}, {"range", {r.first, r.second}}};
      if (p.multiplier_scales) quant[gru_tensor_name(tensor)]["mantissa"] = q.mantissa;  // exact: shortest round-trip
    }
  }
  cell["tensors"] = quant;
  json derived = json::object();
  for (const ScalarShiftKey& key : scalar_shift_keys(p.linear_before_reset)) {
    derived[key.name] = p.*(key.member);
    if (p.multiplier_scales) derived[multiplier_key(key.name)] = p.*(key.multiplier);
  }
  derived["quant_one_in_update_gate_scale"] = p.quant_one_in_update_gate_scale;
  cell["derived"] = derived;

  tensors[prefix + "W"] = weight_tensor(p.q_W, p.q(GruTensor::W).bits, channels, p.input_size);
  tensors[prefix + "R"] = weight_tensor(p.q_R, p.q(GruTensor::R).bits, channels, p.hidden_size);
  tensors[prefix + "bw"] = Tensor::from_vector({channels}, p.q_bw);
  tensors[prefix + "br"] = Tensor::from_vector({channels}, p.q_br);
  tensors[prefix + "W_sum"] = Tensor::from_vector({channels}, p.W_sum);
  tensors[prefix + "R_sum"] = Tensor::from_vector({channels}, p.R_sum);
  for (const ChannelShiftKey& key : channel_shift_keys()) tensors[prefix + key.name] = Tensor::from_vector({channels}, p.*(key.member));
  if (p.multiplier_scales) {
    for (const ChannelMultiplierKey& key : channel_multiplier_keys()) {
      tensors[prefix + key.name] = Tensor::from_vector({channels}, p.*(key.member));
    }
    for (const ChannelMantissaKey& key : channel_mantissa_keys()) {
      tensors[prefix + "mantissa_" + gru_tensor_name(key.tensor)] = Tensor::from_vector({channels}, p.*(key.member));
    }
  }

  json activations = json::object();
  for (int g = 0; g < 3; ++g) {
    const auto gate = static_cast<GateKind>(g);
    json entry;
    activation_to_artifact(p.activation[static_cast<size_t>(g)], prefix + gate_kind_name(gate), entry, tensors);
    activations[gate_kind_name(gate)] = entry;
  }
  cell["activations"] = activations;
  return cell;
}

// For readers of the JSON only (read_artifact proves again): how many checks, the least headroom.
json overflow_summary(const QuantizedGru& model) {
  const OverflowProof proof = prove_no_overflow(model);
  double least = 1e9;
  for (const OverflowCheck& c : proof.checks) {
    if (c.type.rfind("shift", 0) != 0 && std::isfinite(c.log2_bound)) least = std::min(least, c.log2_limit - c.log2_bound);
  }
  return {{"ok", proof.ok()}, {"checks", proof.checks.size()}, {"least_spare_bits", std::round(least * 100.0) / 100.0}};
}

// Every key of the artifact's JSON that describes the model, the cells' tensors staged in `tensors`.
json parameters_json(const QuantizedGru& model, std::map<std::string, Tensor>& tensors) {
  json cells = json::array();
  for (const GruCellQuantParams& p : model.cells) cells.push_back(cell_json(p, model.config, tensors));
  return {{"shapes",
           {{"input_size", model.input_size}, {"hidden_size", model.hidden_size}, {"num_layers", model.num_layers},
            {"num_directions", model.num_directions}}},
          {"gemm_operands_fit_int8", gemm_operands_fit_int8(model)},
          {"overflow_proof", overflow_summary(model)},
          {"cells", cells}};
}

}  // namespace

json artifact_parameters_json(const QuantizedGru& model) {
  std::map<std::string, Tensor> unused;
  return parameters_json(model, unused);
}

std::string artifact_tensor_path(const std::string& json_path) {
  auto strip = [](std::string& text, const std::string& suffix) {
    const bool has = text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (has) text.resize(text.size() - suffix.size());
    return has;
  };
  std::string name = json_path;
  const bool follows_rule = strip(name, ".qgru.json");
  const size_t slash = name.find_last_of('/');
  const bool has_name = name.size() > (slash == std::string::npos ? 0 : slash + 1);
  if (follows_rule && has_name) return name + ".qgru.safetensors";
  if (!follows_rule) {
    strip(name, ".json");
    strip(name, ".qgru");
  }
  const std::string suggestion = has_name ? name + ".qgru.json" : name + "model.qgru.json";
  throw UsageError("artifact " + printable(json_path) +
                   ": an artifact is written as NAME.qgru.json beside its tensor file NAME.qgru.safetensors, so that "
                   "the tensor file can never be one of the inputs; use " + printable(suggestion));
}

ArtifactBytes serialize_artifact(const QuantizedGru& model, const std::string& tensor_file_name,
                                 const nlohmann::json& provenance_extra) {
  const bool linear_before_reset = model.linear_before_reset();
  const bool multiplier_scales = !model.cells.empty() && model.cells.front().multiplier_scales;
  for (const GruCellQuantParams& p : model.cells) {
    if (p.linear_before_reset != linear_before_reset || p.multiplier_scales != multiplier_scales) {
      throw Error("internal: serialize_artifact: cell (layer " + std::to_string(p.layer) + ", direction " +
                  std::to_string(p.direction) + ") is another GRU variant or scale kind than cell (0, 0)");
    }
  }
  const int version = multiplier_scales     ? kArtifactVersionMultiplierScales
                      : linear_before_reset ? kArtifactVersionLinearBeforeReset
                                            : kArtifactVersionResetBeforeLinear;
  SafetensorsFile file;
  file.metadata["format"] = "qgru.artifact tensors";
  const json parameters = parameters_json(model, file.tensors);
  ArtifactBytes bytes;
  bytes.tensors = serialize_safetensors(file);

  const QuantProvenance& prov = model.provenance;
  json root = {
      {"schema", kArtifactSchema},
      {"version", version},
      {"tool_version", QGRU_ARTIFACT_TOOL_VERSION},
      {"tensor_file", tensor_file_name},
      {"tensor_file_sha256", sha256_hex(bytes.tensors.data(), bytes.tensors.size())},
      {"provenance",
       {{"model", {{"path", prov.model_path}, {"sha256", prov.model_sha256}}},
        {"stats", {{"path", prov.stats_path}, {"sha256", prov.stats_sha256}}},
        {"config", {{"source", prov.config_source}, {"sha256", prov.config_sha256}}},
        {"quantized_by", prov.tool_version}}},
      {"config", bitwidth_config_to_json(model.config)}};
  root.update(parameters);
  for (const auto& [key, value] : provenance_extra.items()) root["provenance"][key] = value;
  if (version >= kArtifactVersionResetBeforeLinear) root["linear_before_reset"] = linear_before_reset;  // qgru/runtime/artifact.h
  if (multiplier_scales) root["scales"] = "multiplier";  // version 3's key
  bytes.json = json_text(root, 2) + "\n";
  return bytes;
}

void stage_artifact(AtomicFileGroup& group, const std::string& json_path, const QuantizedGru& model,
                    const nlohmann::json& provenance_extra) {
  const std::string tensor_path = artifact_tensor_path(json_path);
  const ArtifactBytes bytes =
      serialize_artifact(model, std::filesystem::path(tensor_path).filename().string(), provenance_extra);
  group.add(tensor_path).write(bytes.tensors.data(), bytes.tensors.size());
  group.add(json_path).write(bytes.json);
}

void write_artifact(const std::string& json_path, const QuantizedGru& model, const nlohmann::json& provenance_extra) {
  AtomicFileGroup group;
  stage_artifact(group, json_path, model, provenance_extra);
  group.commit_all();
}

}  // namespace qgru
