#include "qgru/gptq/checkpoint.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/io/strict_json.h"
#include "qgru/half.h"
#include "qgru/gptq/quantizer.h"
#include "qgru/half.h"
#include "qgru/version.h"

namespace qgru::gptq {

namespace {

// The project has no public address yet: a URN naming the tool (GPTQModel writes its homepage here).
constexpr const char* kProducerUri = "urn:qgru";
// The GPTQModel release whose loader and v1 zero-point rule qgru's files were checked against.
constexpr const char* kGptqModelChecked = "gptqmodel:7.7.0";

bool v1_needs_gptqmodel_entry(CheckpointFormat format) { return format == CheckpointFormat::kGptq; }

}  // namespace

std::vector<std::string> meta_quantizers(CheckpointFormat format) {
  std::vector<std::string> quantizers = {std::string("qgru:") + QGRU_VERSION_STRING};
  if (v1_needs_gptqmodel_entry(format)) quantizers.push_back(kGptqModelChecked);
  return quantizers;
}

std::string quantize_config_json(const QuantizeConfig& config) {
  if (config.desc_act && config.act_group_aware) {
    throw Error("gptq: desc_act and act_group_aware cannot both be set (GPTQModel refuses such a config)");
  }
  nlohmann::ordered_json json;
  json["bits"] = config.bits;
  json["group_size"] = config.group_size;
  json["desc_act"] = config.desc_act;
  json["sym"] = config.sym;
  json["static_groups"] = config.static_groups;
  json["damp_percent"] = config.damp_percent;
  // Each layer is quantized from the activations it is given: qgru does not re-capture a layer's inputs from the
  // layers quantized before it (what GPTQModel's true_sequential means); no reader uses the key when loading.
  json["true_sequential"] = false;
  json["lm_head"] = false;
  json["quant_method"] = "gptq";
  json["format"] = format_name(config.format);
  json["checkpoint_format"] = format_name(config.format);  // the older name; transformers reads either
  json["pack_dtype"] = "int32";
  nlohmann::ordered_json meta;
  meta["quantizer"] = meta_quantizers(config.format);
  meta["uri"] = kProducerUri;
  meta["damp_percent"] = config.damp_percent;
  meta["static_groups"] = config.static_groups;
  meta["true_sequential"] = false;
  meta["mse"] = 0.0;
  meta["act_group_aware"] = config.act_group_aware;
  json["meta"] = meta;
  return json.dump(2) + "\n";
}

QuantizeConfig parse_quantize_config(const std::string& text, const std::string& source) {
  const nlohmann::json json = parse_strict_json(text, source);
  if (!json.is_object()) throw Error(source + ": expected a JSON object");
  QuantizeConfig config;
  config.damp_percent = 0.01;  // AutoGPTQ's default, for files that do not say
  auto need = [&](const char* key) -> const nlohmann::json& {
    if (!json.contains(key)) throw Error(source + ": key '" + key + "' is missing");
    return json.at(key);
  };
  try {
    config.bits = need("bits").get<int>();
    config.group_size = need("group_size").get<int64_t>();
    if (json.contains("damp_percent")) config.damp_percent = json.at("damp_percent").get<double>();
    if (json.contains("desc_act")) config.desc_act = json.at("desc_act").get<bool>();
    if (json.contains("static_groups")) config.static_groups = json.at("static_groups").get<bool>();
    if (json.contains("sym")) config.sym = json.at("sym").get<bool>();
    if (json.contains("quant_method") && json.at("quant_method").get<std::string>() != "gptq") {
      throw Error(source + ": quant_method is '" + json.at("quant_method").get<std::string>() +
                  "', expected 'gptq'");
    }
    std::string format_seen;
    for (const char* key : {"checkpoint_format", "format"}) {
      if (!json.contains(key)) continue;
      const std::string name = json.at(key).get<std::string>();
      if (!format_seen.empty() && name != format_seen) {
        throw Error(source + ": format '" + name + "' and checkpoint_format '" + format_seen + "' disagree");
      }
      format_seen = name;
    }
    if (!format_seen.empty()) config.format = parse_format(format_seen);
    if (json.contains("meta") && json.at("meta").is_object()) {
      const nlohmann::json& meta = json.at("meta");
      if (meta.contains("act_group_aware") && !meta.at("act_group_aware").is_null()) {
        config.act_group_aware = meta.at("act_group_aware").get<bool>();
      }
      // qgru's earlier layout: meta.quantizer the plain string "qgru" (the clients write a list of
      // "name:version"); its v1 zero points were written field by field.
      if (meta.contains("quantizer") && meta.at("quantizer").is_string() &&
          meta.at("quantizer").get<std::string>() == "qgru") {
        config.v1_zero_rule = V1ZeroRule::kPerField;
      }
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": a key has the wrong type (" + std::string(e.what()) + ")");
  }
  try {
    check_bits(config.bits);
  } catch (const Error& e) {
    throw Error(source + ": " + e.what());  // name quantize_config.json, where the width came from
  }
  if (config.group_size != -1 && config.group_size <= 0) {
    throw Error(source + ": group_size " + std::to_string(config.group_size) + " is invalid, expected -1 or > 0");
  }
  if (config.desc_act && config.act_group_aware) {
    throw Error(source + ": desc_act and meta.act_group_aware are both true; a checkpoint has one column order");
  }
  return config;
}

std::string config_disagreement(const QuantizeConfig& existing, const QuantizeConfig& wanted) {
  std::string differences;
  auto differ = [&](const std::string& key, const std::string& here, const std::string& there) {
    if (here == there) return;
    differences += (differences.empty() ? "" : ", ") + key + " " + here + " here, " + there + " there";
  };
  auto flag = [](bool value) { return std::string(value ? "true" : "false"); };
  char damp_here[32], damp_there[32];
  std::snprintf(damp_here, sizeof damp_here, "%g", wanted.damp_percent);
  std::snprintf(damp_there, sizeof damp_there, "%g", existing.damp_percent);
  differ("bits", std::to_string(wanted.bits), std::to_string(existing.bits));
  differ("group_size", std::to_string(wanted.group_size), std::to_string(existing.group_size));
  differ("sym", flag(wanted.sym), flag(existing.sym));
  differ("desc_act", flag(wanted.desc_act), flag(existing.desc_act));
  differ("act_group_aware", flag(wanted.act_group_aware), flag(existing.act_group_aware));
  differ("static_groups", flag(wanted.static_groups), flag(existing.static_groups));
  differ("damp_percent", damp_here, damp_there);
  differ("format", format_name(wanted.format), format_name(existing.format));
  if (wanted.format == CheckpointFormat::kGptq || existing.format == CheckpointFormat::kGptq) {
    differ("v1 zero points", wanted.v1_zero_rule == V1ZeroRule::kClients ? "clients'" : "per-field",
           existing.v1_zero_rule == V1ZeroRule::kClients ? "clients'" : "per-field (qgru's earlier layout)");
  }
  return differences;
}

QuantizeConfig read_quantize_config(const std::string& path) { return parse_quantize_config(read_file_text(path), path); }

std::string quantize_config_path_beside(const std::string& tensor_path) {
  const size_t slash = tensor_path.find_last_of('/');
  return (slash == std::string::npos ? std::string() : tensor_path.substr(0, slash + 1)) + "quantize_config.json";
}

std::string layer_prefix(const std::string& weight_name) {
  const std::string suffix = ".weight";
  if (weight_name.size() > suffix.size() &&
      weight_name.compare(weight_name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return weight_name.substr(0, weight_name.size() - suffix.size());
  }
  return weight_name;
}

QuantizedLayer to_checkpoint_layer(const GptqResult& result, const std::string& what) {
  QuantizedLayer layer;
  layer.bits = result.bits;
  layer.N = result.N;
  layer.K = result.K;
  layer.G = result.G;
  layer.codes = result.codes;
  layer.zeros = result.zeros;
  layer.g_idx = result.g_idx;
  layer.scales.resize(result.scales.size());
  for (size_t i = 0; i < result.scales.size(); ++i) {
    const float scale = half_bits_to_float(float_to_half_bits(static_cast<float>(result.scales[i])));
    if (!(scale > 0.0f) || !std::isfinite(scale)) {
      throw Error(what + ": scale " + std::to_string(result.scales[i]) +
                  " is not representable as a positive finite fp16 (weights out of fp16 range?)");
    }
    layer.scales[i] = scale;
  }
  return layer;
}

std::vector<double> dequantize(const QuantizedLayer& layer) {
  return dequantize(layer.codes, std::vector<double>(layer.scales.begin(), layer.scales.end()),
                    std::vector<double>(layer.zeros.begin(), layer.zeros.end()), layer.g_idx, layer.N, layer.K);
}

V1FieldReaderMisreads add_layer(SafetensorsFile& file, const std::string& prefix, const QuantizedLayer& layer,
                                CheckpointFormat format) {
  file.tensors[prefix + ".qweight"] = Tensor::from_vector<int32_t>(
      {layer.K * layer.bits / 32, layer.N}, pack_qweight(layer.codes, layer.N, layer.K, layer.bits, prefix + ".qweight"));
  std::vector<int32_t> qzeros = pack_qzeros(layer.zeros, layer.G, layer.N, layer.bits, format, prefix + ".qzeros");
  V1FieldReaderMisreads misreads;
  if (format == CheckpointFormat::kGptq) {
    misreads = v1_field_reader_misreads(layer.zeros, qzeros, layer.G, layer.N, layer.bits);
  }
  file.tensors[prefix + ".qzeros"] =
      Tensor::from_vector<int32_t>({layer.G, layer.N * layer.bits / 32}, std::move(qzeros));
  Tensor scales;
  scales.dtype = DType::F16;
  scales.shape = {layer.G, layer.N};
  scales.bytes.resize(layer.scales.size() * 2);
  for (size_t i = 0; i < layer.scales.size(); ++i) {
    const uint16_t bits = float_to_half_bits(layer.scales[i]);
    std::memcpy(&scales.bytes[2 * i], &bits, 2);
  }
  file.tensors[prefix + ".scales"] = std::move(scales);
  file.tensors[prefix + ".g_idx"] = Tensor::from_vector<int32_t>({layer.K}, layer.g_idx);
  return misreads;
}

namespace {

const Tensor& find_tensor(const SafetensorsFile& file, const std::string& name, const std::string& source) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end()) throw Error(source + ": tensor '" + name + "' is missing");
  return it->second;
}

void expect(const Tensor& tensor, DType dtype, const std::vector<int64_t>& shape, const std::string& name,
            const std::string& source) {
  if (tensor.dtype != dtype || tensor.shape != shape) {
    throw Error(source + ": tensor '" + name + "' is " + dtype_name(tensor.dtype) + " " + shape_string(tensor.shape) +
                ", expected " + dtype_name(dtype) + " " + shape_string(shape));
  }
}

std::vector<int32_t> as_i32(const Tensor& tensor) {
  std::vector<int32_t> values(static_cast<size_t>(tensor.numel()));
  if (!values.empty()) std::memcpy(values.data(), tensor.bytes.data(), values.size() * 4);
  return values;
}

}  // namespace

QuantizedLayer read_layer(const SafetensorsFile& file, const std::string& prefix, int bits, CheckpointFormat format,
                          const std::string& source, V1ZeroRule rule) {
  check_bits(bits);
  const std::string qweight_name = prefix + ".qweight", qzeros_name = prefix + ".qzeros";
  const std::string scales_name = prefix + ".scales", g_idx_name = prefix + ".g_idx";
  const Tensor& qweight = find_tensor(file, qweight_name, source);
  // Extents > 0 (a zero extent would let the other one be any size with no bytes behind it).
  if (qweight.dtype != DType::I32 || qweight.rank() != 2 || qweight.shape[0] <= 0 || qweight.shape[1] <= 0) {
    throw Error(source + ": tensor '" + qweight_name + "' is " + dtype_name(qweight.dtype) + " " +
                shape_string(qweight.shape) + ", expected I32 [K*" + std::to_string(bits) + "/32, N]");
  }
  QuantizedLayer layer;
  layer.bits = bits;
  layer.K = qweight.shape[0] * 32 / bits;
  layer.N = qweight.shape[1];
  if ((qweight.shape[0] * 32) % bits != 0) {
    throw Error(source + ": tensor '" + qweight_name + "' has " + std::to_string(qweight.shape[0]) +
                " rows, not a whole number of " + std::to_string(bits) + "-bit input features");
  }
  const Tensor& scales = find_tensor(file, scales_name, source);
  if (scales.rank() != 2 || scales.shape[1] != layer.N || scales.shape[0] <= 0 ||
      (scales.dtype != DType::F16 && scales.dtype != DType::F32)) {
    throw Error(source + ": tensor '" + scales_name + "' is " + dtype_name(scales.dtype) + " " +
                shape_string(scales.shape) + ", expected F16 [G, " + std::to_string(layer.N) + "]");
  }
  layer.G = scales.shape[0];
  if ((layer.N * bits) % 32 != 0) {
    throw Error(source + ": tensor '" + qweight_name + "' has N = " + std::to_string(layer.N) +
                " outputs, whose " + std::to_string(bits) + "-bit zero points do not fill whole int32 words");
  }
  const Tensor& qzeros = find_tensor(file, qzeros_name, source);
  expect(qzeros, DType::I32, {layer.G, layer.N * bits / 32}, qzeros_name, source);
  const Tensor& g_idx = find_tensor(file, g_idx_name, source);
  expect(g_idx, DType::I32, {layer.K}, g_idx_name, source);

  layer.codes = unpack_qweight(as_i32(qweight), layer.N, layer.K, bits);
  const std::vector<int32_t> qzero_words = as_i32(qzeros);
  layer.zeros = unpack_qzeros(qzero_words, layer.G, layer.N, bits, format, rule);
  if (format == CheckpointFormat::kGptq && rule != V1ZeroRule::kClients) {
    const std::vector<int32_t> clients =
        unpack_qzeros(qzero_words, layer.G, layer.N, bits, format, V1ZeroRule::kClients);
    int64_t differ = 0;
    for (size_t i = 0; i < clients.size(); ++i) differ += clients[i] != layer.zeros[i];
    if (differ > 0) {
      log()->warn("{}: '{}': read with {} (quantize_config.json in qgru's earlier layout): {} zero point(s) read "
                  "as that writer meant them, which GPTQModel and transformers read differently; rewrite the "
                  "checkpoint with this qgru to make them agree",
                  source, qzeros_name, v1_zero_rule_name(rule), differ);
    }
  }
  layer.scales = tensor_to_f32(scales);
  layer.g_idx = as_i32(g_idx);
  for (size_t k = 0; k < layer.g_idx.size(); ++k) {
    if (layer.g_idx[k] < 0 || layer.g_idx[k] >= layer.G) {
      throw Error(source + ": tensor '" + g_idx_name + "'[" + std::to_string(k) + "] = " +
                  std::to_string(layer.g_idx[k]) + ", expected a group in [0, " + std::to_string(layer.G) + ")");
    }
  }
  return layer;
}

std::vector<std::string> list_layers(const SafetensorsFile& file) {
  std::vector<std::string> prefixes;
  const std::string suffix = ".qweight";
  for (const auto& [name, tensor] : file.tensors) {
    if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      prefixes.push_back(name.substr(0, name.size() - suffix.size()));
    }
  }
  return prefixes;
}

}  // namespace qgru::gptq
