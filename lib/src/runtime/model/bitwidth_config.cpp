#include "qgru/runtime/bitwidth_config.h"

#include <set>

#include <nlohmann/json.hpp>

#include "qgru/base/error.h"
#include "qgru/io/strict_json.h"

namespace qgru {

namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& key, const std::string& what) {
  throw Error("bit-width config " + source + ": key '" + key + "': " + what);
}

void refuse_unknown_keys(const json& object, const std::set<std::string>& allowed, const std::string& source,
                         const std::string& where) {
  for (const auto& item : object.items()) {
    if (!allowed.count(item.key())) {
      std::string list;
      for (const auto& name : allowed) list += (list.empty() ? "" : ", ") + name;
      fail(source, where.empty() ? item.key() : where + "." + item.key(), "unknown key (expected one of: " + list + ")");
    }
  }
}

const json& require(const json& object, const std::string& name, const std::string& source, const std::string& where) {
  const std::string key = where.empty() ? name : where + "." + name;
  if (!object.contains(name)) fail(source, key, "missing");
  return object.at(name);
}

std::string get_string(const json& value, const std::string& source, const std::string& key) {
  if (!value.is_string()) fail(source, key, "expected a string, got " + value.dump());
  return value.get<std::string>();
}

bool get_bool(const json& value, const std::string& source, const std::string& key) {
  if (!value.is_boolean()) fail(source, key, "expected true or false, got " + value.dump());
  return value.get<bool>();
}

int get_int(const json& value, const std::string& source, const std::string& key, int lo, int hi) {
  if (!value.is_number_integer()) fail(source, key, "expected an integer, got " + value.dump());
  const int64_t number = value.get<int64_t>();
  if (number < lo || number > hi) {
    fail(source, key, std::to_string(number) + " outside " + std::to_string(lo) + ".." + std::to_string(hi));
  }
  return static_cast<int>(number);
}

// "power_of_two" -> false, "multiplier" -> true.
bool parse_scale_kind(const json& value, const std::string& source, const std::string& key) {
  const std::string text = get_string(value, source, key);
  if (text == "power_of_two") return false;
  if (text == "multiplier") return true;
  fail(source, key, "'" + text + "' is not power_of_two or multiplier");
}

const char* scale_kind_name(bool multiplier) { return multiplier ? "multiplier" : "power_of_two"; }

TensorBitwidth parse_tensor(const json& value, GruTensor tensor, const std::string& source, bool default_multiplier) {
  const std::string where = std::string("tensors.") + gru_tensor_name(tensor);
  if (!value.is_object()) fail(source, where, "expected an object, got " + value.dump());
  const bool parameter = gru_tensor_is_parameter(tensor);
  std::set<std::string> allowed = {"bits", "signed", "symmetric", "range_method", "scale"};
  if (parameter) allowed.insert("granularity");
  refuse_unknown_keys(value, allowed, source, where);
  TensorBitwidth result;
  result.multiplier_scale =
      value.contains("scale") ? parse_scale_kind(value.at("scale"), source, where + ".scale") : default_multiplier;
  result.bits = get_int(require(value, "bits", source, where), source, where + ".bits", 2, 16);
  result.is_unsigned = !get_bool(require(value, "signed", source, where), source, where + ".signed");
  result.symmetric = get_bool(require(value, "symmetric", source, where), source, where + ".symmetric");
  if (value.contains("range_method")) {
    result.range_method = get_string(value.at("range_method"), source, where + ".range_method");
    if (result.range_method.empty()) fail(source, where + ".range_method", "empty string");
  }
  if (parameter) {
    // Weights and biases enter the GEMM and the bias fusion with zero point 0 (docs/FIXED_POINT.md §2).
    if (!result.symmetric) fail(source, where + ".symmetric", "weights and biases must be symmetric (zp = 0)");
    if (result.is_unsigned) fail(source, where + ".signed", "weights and biases must be signed");
    const std::string granularity =
        value.contains("granularity") ? get_string(value.at("granularity"), source, where + ".granularity") : "per_channel";
    if (granularity == "per_channel") {
      result.per_channel = true;
    } else if (granularity == "per_tensor") {
      result.per_channel = false;
    } else {
      fail(source, where + ".granularity", "'" + granularity + "' is not per_tensor or per_channel");
    }
  }
  if (result.symmetric && result.is_unsigned) {
    fail(source, where + ".symmetric", "an unsigned tensor cannot be symmetric (zp = 0 would leave no negative codes)");
  }
  return result;
}

GateActivationChoice parse_activation(const json& value, GateKind gate, const std::string& source) {
  const std::string where = std::string("activations.") + gate_kind_name(gate);
  if (!value.is_object()) fail(source, where, "expected an object, got " + value.dump());
  refuse_unknown_keys(value, {"impl", "segments"}, source, where);
  GateActivationChoice choice;
  const std::string impl = get_string(require(value, "impl", source, where), source, where + ".impl");
  if (impl == "table") {
    choice.impl = ActivationImpl::Table;
    if (value.contains("segments")) fail(source, where + ".segments", "only a pwl activation has segments");
  } else if (impl == "pwl") {
    choice.impl = ActivationImpl::Pwl;
    if (value.contains("segments")) choice.segments = get_int(value.at("segments"), source, where + ".segments", 1, 4096);
  } else {
    fail(source, where + ".impl", "'" + impl + "' is not table or pwl");
  }
  return choice;
}

GruTensor gate_input(GateKind gate) {
  switch (gate) {
    case GateKind::Update: return GruTensor::update_gate_input;
    case GateKind::Reset: return GruTensor::reset_gate_input;
    case GateKind::New: return GruTensor::new_gate_input;
  }
  return GruTensor::update_gate_input;
}

}  // namespace

const char* gate_kind_name(GateKind gate) {
  switch (gate) {
    case GateKind::Update: return "update_gate";
    case GateKind::Reset: return "reset_gate";
    case GateKind::New: return "new_gate";
  }
  return "?";
}

const std::string& BitwidthConfig::range_method_of(GruTensor tensor) const {
  const std::string& own = of(tensor).range_method;
  return own.empty() ? range_method : own;
}

TensorQuant BitwidthConfig::spec(GruTensor tensor) const {
  TensorQuant quant;
  quant.bits = of(tensor).bits;
  quant.is_unsigned = of(tensor).is_unsigned;
  quant.symmetric = of(tensor).symmetric;
  return quant;
}

bool BitwidthConfig::multiplier_scales() const {
  for (const TensorBitwidth& t : tensors) {
    if (t.multiplier_scale) return true;
  }
  return false;
}

BitwidthConfig parse_bitwidth_config(const json& root, const std::string& source) {
  if (!root.is_object()) fail(source, "(top level)", "expected a JSON object");
  refuse_unknown_keys(root, {"schema", "version", "name", "description", "range_method", "gemm_accumulator", "scales", "tensors",
                            "activations"},
                      source, "");
  const std::string schema = get_string(require(root, "schema", source, ""), source, "schema");
  if (schema != kBitwidthConfigSchema) {
    fail(source, "schema", "'" + schema + "' is not '" + kBitwidthConfigSchema + "'");
  }
  const json& version = require(root, "version", source, "");
  if (!version.is_number_integer()) fail(source, "version", "expected an integer, got " + version.dump());
  if (version.get<int64_t>() != kBitwidthConfigVersion) {
    fail(source, "version", std::to_string(version.get<int64_t>()) + " is not supported (this qgru reads version " +
                                std::to_string(kBitwidthConfigVersion) + ")");
  }
  BitwidthConfig config;
  config.name = root.contains("name") ? get_string(root.at("name"), source, "name") : std::string();
  if (root.contains("description")) config.description = get_string(root.at("description"), source, "description");
  if (root.contains("range_method")) {
    config.range_method = get_string(root.at("range_method"), source, "range_method");
    if (config.range_method.empty()) fail(source, "range_method", "empty string");
  }
  if (root.contains("gemm_accumulator")) {
    const std::string text = get_string(root.at("gemm_accumulator"), source, "gemm_accumulator");
    if (text == "auto") config.gemm_accumulator = GemmAccumulator::Auto;
    else if (text == "int32") config.gemm_accumulator = GemmAccumulator::Int32;
    else if (text == "int64") config.gemm_accumulator = GemmAccumulator::Int64;
    else fail(source, "gemm_accumulator", "'" + text + "' is not auto, int32 or int64");
  }

  const bool default_multiplier = root.contains("scales") && parse_scale_kind(root.at("scales"), source, "scales");

  const json& tensors = require(root, "tensors", source, "");
  if (!tensors.is_object()) fail(source, "tensors", "expected an object");
  for (const auto& item : tensors.items()) {
    if (!gru_tensor_from_name(item.key())) fail(source, "tensors." + item.key(), "not a GRU tensor (see qgru/gru_tensors.h)");
  }
  for (int i = 0; i < kGruTensorCount; ++i) {
    const auto tensor = static_cast<GruTensor>(i);
    config.tensors[static_cast<size_t>(i)] = parse_tensor(require(tensors, gru_tensor_name(tensor), source, "tensors"), tensor, source,
                                                 default_multiplier);
  }

  const json& activations = require(root, "activations", source, "");
  if (!activations.is_object()) fail(source, "activations", "expected an object");
  refuse_unknown_keys(activations, {"update_gate", "reset_gate", "new_gate"}, source, "activations");
  for (int g = 0; g < 3; ++g) {
    const auto gate = static_cast<GateKind>(g);
    GateActivationChoice choice = parse_activation(require(activations, gate_kind_name(gate), source, "activations"), gate, source);
    // A full table has 2^bits entries: refuse it above 12 input bits (seed: table for inputs <= 12 bits).
    const int input_bits = config.of(gate_input(gate)).bits;
    if (choice.impl == ActivationImpl::Table && input_bits > kActivationTableMaxInputBits) {
      fail(source, std::string("activations.") + gate_kind_name(gate) + ".impl",
           "a table needs the gate input to have <= 12 bits, " + std::string(gru_tensor_name(gate_input(gate))) +
               " has " + std::to_string(input_bits) + " (use \"pwl\")");
    }
    config.activations[static_cast<size_t>(g)] = choice;
  }
  return config;
}

BitwidthConfig parse_bitwidth_config_text(const std::string& text, const std::string& source) {
  return parse_bitwidth_config(parse_strict_json(text, "bit-width config " + source), source);
}

json bitwidth_config_to_json(const BitwidthConfig& config) {
  json root = json::object();
  root["schema"] = kBitwidthConfigSchema;
  root["version"] = kBitwidthConfigVersion;
  root["name"] = config.name;
  root["description"] = config.description;
  if (!config.range_method.empty()) root["range_method"] = config.range_method;
  root["gemm_accumulator"] = config.gemm_accumulator == GemmAccumulator::Auto    ? "auto"
                             : config.gemm_accumulator == GemmAccumulator::Int32 ? "int32"
                                                                                  : "int64";
  // "scales" only for a config that has a real scale (a power-of-two config's JSON stays as it always was):
  // the kind most tensors have, and "scale" on the tensors that differ from it.
  int multiplier_count = 0;
  for (const TensorBitwidth& t : config.tensors) multiplier_count += t.multiplier_scale ? 1 : 0;
  const bool default_multiplier = 2 * multiplier_count >= kGruTensorCount;
  if (multiplier_count > 0) root["scales"] = scale_kind_name(default_multiplier);
  json tensors = json::object();
  for (int i = 0; i < kGruTensorCount; ++i) {
    const auto tensor = static_cast<GruTensor>(i);
    const TensorBitwidth& bw = config.of(tensor);
    json entry = {{"bits", bw.bits}, {"signed", !bw.is_unsigned}, {"symmetric", bw.symmetric}};
    if (gru_tensor_is_parameter(tensor)) entry["granularity"] = bw.per_channel ? "per_channel" : "per_tensor";
    if (bw.multiplier_scale != default_multiplier) entry["scale"] = scale_kind_name(bw.multiplier_scale);
    if (!bw.range_method.empty()) entry["range_method"] = bw.range_method;
    tensors[gru_tensor_name(tensor)] = entry;
  }
  root["tensors"] = tensors;
  json activations = json::object();
  for (int g = 0; g < 3; ++g) {
    const GateActivationChoice& choice = config.activations[static_cast<size_t>(g)];
    json entry = {{"impl", choice.impl == ActivationImpl::Table ? "table" : "pwl"}};
    if (choice.impl == ActivationImpl::Pwl && choice.segments > 0) entry["segments"] = choice.segments;
    activations[gate_kind_name(static_cast<GateKind>(g))] = entry;
  }
  root["activations"] = activations;
  return root;
}

}  // namespace qgru
