// Artifact form of the activation data: scalars in a JSON object, arrays as named integer tensors.
// Reading validates everything evaluate_activation() relies on, so a hand-edited or corrupted artifact is
// refused with a message naming the file, the key or tensor, and what was expected.
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgru/base/error.h"
#include "qgru/runtime/activation_tables.h"

namespace qgru {
namespace {

nlohmann::json quant_to_json(const TensorQuant& quant) {
  return nlohmann::json{{"bits", quant.bits},
                        {"unsigned", quant.is_unsigned},
                        {"symmetric", quant.symmetric},
                        {"shift", quant.shift},
                        {"zp", quant.zp}};
}

const nlohmann::json& require_key(const nlohmann::json& object, const std::string& key, const std::string& where) {
  if (!object.is_object()) throw Error(where + ": expected a JSON object");
  const auto found = object.find(key);
  if (found == object.end()) throw Error(where + ": missing key \"" + key + "\"");
  return *found;
}

int64_t require_integer(const nlohmann::json& object, const std::string& key, int64_t lo, int64_t hi,
                        const std::string& where) {
  const nlohmann::json& value = require_key(object, key, where);
  if (!value.is_number_integer()) throw Error(where + ": \"" + key + "\" must be an integer");
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    throw Error(where + ": \"" + key + "\" is out of range");
  }
  const int64_t number = value.get<int64_t>();
  if (number < lo || number > hi) {
    throw Error(where + ": \"" + key + "\" = " + std::to_string(number) + " is outside " + std::to_string(lo) +
                ".." + std::to_string(hi));
  }
  return number;
}

bool require_bool(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const nlohmann::json& value = require_key(object, key, where);
  if (!value.is_boolean()) throw Error(where + ": \"" + key + "\" must be true or false");
  return value.get<bool>();
}

std::string require_string(const nlohmann::json& object, const std::string& key, const std::string& where) {
  const nlohmann::json& value = require_key(object, key, where);
  if (!value.is_string()) throw Error(where + ": \"" + key + "\" must be a string");
  return value.get<std::string>();
}

TensorQuant quant_from_json(const nlohmann::json& object, const std::string& where) {
  TensorQuant quant;
  quant.bits = static_cast<int>(require_integer(object, "bits", 2, 16, where));
  quant.is_unsigned = require_bool(object, "unsigned", where);
  quant.symmetric = require_bool(object, "symmetric", where);
  quant.shift = static_cast<int>(require_integer(object, "shift", kMinShift, kMaxShift, where));
  quant.zp = static_cast<int32_t>(require_integer(object, "zp", quant.qmin(), quant.qmax(), where));
  if (quant.symmetric && quant.zp != 0) {
    throw Error(where + ": symmetric quantization with zp = " + std::to_string(quant.zp) + " (expected 0)");
  }
  return quant;
}

// A rank-1 integer tensor of `size` values, each inside [lo, hi].
std::vector<int64_t> require_vector(const std::map<std::string, Tensor>& tensors, const std::string& name,
                                    int64_t size, int64_t lo, int64_t hi, const std::string& source) {
  const auto found = tensors.find(name);
  if (found == tensors.end()) throw Error(source + ": missing tensor \"" + name + "\"");
  const Tensor& tensor = found->second;
  const std::string where = source + ": tensor \"" + name + "\"";
  if (tensor.rank() != 1 || tensor.numel() != size) {
    throw Error(where + " has shape " + shape_string(tensor.shape) + ", expected [" + std::to_string(size) + "]");
  }
  if (tensor.bytes.size() != static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype)) {
    throw Error(where + " holds " + std::to_string(tensor.bytes.size()) + " bytes, expected " +
                std::to_string(static_cast<size_t>(tensor.numel()) * dtype_size(tensor.dtype)));
  }
  std::vector<int64_t> values = tensor_to_i64(tensor, where);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < lo || values[i] > hi) {
      throw Error(where + ": element " + std::to_string(i) + " = " + std::to_string(values[i]) + " is outside " +
                  std::to_string(lo) + ".." + std::to_string(hi));
    }
  }
  return values;
}

std::vector<int32_t> to_int32(const std::vector<int64_t>& values) {
  std::vector<int32_t> out(values.size());
  for (size_t i = 0; i < values.size(); ++i) out[i] = static_cast<int32_t>(values[i]);  // range checked
  return out;
}

}  // namespace

void activation_to_artifact(const ActivationTables& tables, const std::string& prefix, nlohmann::json& json_out,
                            std::map<std::string, Tensor>& tensors_out) {
  json_out = nlohmann::json::object();
  json_out["function"] = activation_function_name(tables.function);
  json_out["impl"] = activation_impl_name(tables.impl);
  json_out["segments"] = tables.impl == ActivationImpl::Pwl ? static_cast<int64_t>(tables.pwl_threshold.size()) : 0;
  json_out["input"] = quant_to_json(tables.input);
  json_out["output"] = quant_to_json(tables.output);
  if (tables.impl == ActivationImpl::Table) {
    tensors_out[prefix + ".table"] =
        Tensor::from_vector<int32_t>({static_cast<int64_t>(tables.table.size())}, tables.table);
    return;
  }
  const std::vector<int64_t> shape{static_cast<int64_t>(tables.pwl_threshold.size())};
  tensors_out[prefix + ".pwl_threshold"] = Tensor::from_vector<int32_t>(shape, tables.pwl_threshold);
  tensors_out[prefix + ".pwl_q_b"] = Tensor::from_vector<int32_t>(shape, tables.pwl_q_b);
  tensors_out[prefix + ".pwl_term_c"] = Tensor::from_vector<int64_t>(shape, tables.pwl_term_c);
  tensors_out[prefix + ".pwl_shift"] = Tensor::from_vector<int32_t>(shape, tables.pwl_shift);
}

ActivationTables activation_from_artifact(const nlohmann::json& json, const std::map<std::string, Tensor>& tensors,
                                          const std::string& prefix, const std::string& source) {
  const std::string where = source + ": activation \"" + prefix + "\"";
  ActivationTables tables;
  tables.function = parse_activation_function(require_string(json, "function", where), where);
  tables.impl = parse_activation_impl(require_string(json, "impl", where), where);
  tables.input = quant_from_json(require_key(json, "input", where), where + " input");
  tables.output = quant_from_json(require_key(json, "output", where), where + " output");
  const int64_t input_codes = int64_t{tables.input.qmax()} - tables.input.qmin() + 1;

  if (tables.impl == ActivationImpl::Table) {
    if (tables.input.bits > kActivationTableMaxInputBits) {
      throw Error(where + ": a table needs an input of at most " + std::to_string(kActivationTableMaxInputBits) +
                  " bits, got " + std::to_string(tables.input.bits));
    }
    require_integer(json, "segments", 0, 0, where);
    tables.table = to_int32(require_vector(tensors, prefix + ".table", input_codes, tables.output.qmin(),
                                           tables.output.qmax(), source));
    return tables;
  }

  if (tables.input.bits > kActivationPwlMaxInputBits) {
    throw Error(where + ": pwl needs an input of at most " + std::to_string(kActivationPwlMaxInputBits) +
                " bits, got " + std::to_string(tables.input.bits));
  }
  const int64_t segments = require_integer(json, "segments", 1, input_codes, where);
  tables.segments = static_cast<int>(segments);
  tables.pwl_threshold = to_int32(require_vector(tensors, prefix + ".pwl_threshold", segments, tables.input.qmin(),
                                                 tables.input.qmax(), source));
  if (tables.pwl_threshold[0] != tables.input.qmin()) {
    throw Error(source + ": tensor \"" + prefix + ".pwl_threshold\": element 0 = " +
                std::to_string(tables.pwl_threshold[0]) + ", expected the input's smallest code " +
                std::to_string(tables.input.qmin()));
  }
  for (size_t i = 1; i < tables.pwl_threshold.size(); ++i) {
    if (tables.pwl_threshold[i] <= tables.pwl_threshold[i - 1]) {
      throw Error(source + ": tensor \"" + prefix + ".pwl_threshold\": element " + std::to_string(i) + " = " +
                  std::to_string(tables.pwl_threshold[i]) + " does not exceed element " + std::to_string(i - 1) +
                  " = " + std::to_string(tables.pwl_threshold[i - 1]) + " (thresholds must strictly increase)");
    }
  }
  tables.pwl_q_b = to_int32(require_vector(tensors, prefix + ".pwl_q_b", segments, std::numeric_limits<int32_t>::min(),
                                           std::numeric_limits<int32_t>::max(), source));
  tables.pwl_term_c =
      require_vector(tensors, prefix + ".pwl_term_c", segments, -kActivationPwlMaxTermC, kActivationPwlMaxTermC, source);
  tables.pwl_shift =
      to_int32(require_vector(tensors, prefix + ".pwl_shift", segments, 0, kActivationPwlMaxShift, source));
  return tables;
}

}  // namespace qgru
