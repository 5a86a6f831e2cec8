#include "qgru/calib/range_selection.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "qgru/base/error.h"
#include "qgru/calib/pow2_choice.h"
#include "qgru/calib/range_methods.h"

namespace qgru {

namespace {

constexpr const char* kPow2Suffix = "+pow2";
constexpr const char* kMethodList = "minmax, ema, kl, percentile[:P], mse, bounds (each optionally +pow2)";

std::string format_number(double value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

}  // namespace

std::string RangeMethod::text() const {
  std::string result = name;
  if (name == "percentile") result += ":" + format_number(percentile);
  if (pow2) result += kPow2Suffix;
  return result;
}

RangeMethod parse_range_method(const std::string& method) {
  RangeMethod parsed;
  std::string rest = method;
  const std::string suffix = kPow2Suffix;
  if (rest.size() >= suffix.size() && rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0) {
    parsed.pow2 = true;
    rest.resize(rest.size() - suffix.size());
  }
  const size_t colon = rest.find(':');
  std::string name = rest.substr(0, colon);
  if (name == "percentile" && colon != std::string::npos) {
    const std::string number = rest.substr(colon + 1);
    char* end = nullptr;
    parsed.percentile = std::strtod(number.c_str(), &end);
    if (number.empty() || end != number.c_str() + number.size() || !(parsed.percentile > 50 && parsed.percentile <= 100)) {
      // P% of the values are kept below the upper bound and above the lower one: at 50 or below the lower bound
      // would reach the upper (an empty or inverted range).
      throw Error("method '" + method + "': percentile '" + number + "' is not a number in (50, 100]");
    }
  } else if (colon != std::string::npos) {
    throw Error("method '" + method + "' is not one of " + kMethodList);
  }
  if (name != "minmax" && name != "ema" && name != "kl" && name != "percentile" && name != "mse" && name != "bounds") {
    throw Error("method '" + method + "' is not one of " + kMethodList);
  }
  parsed.name = name;
  return parsed;
}

RangeChoice select_range(const CalibrationStats& stats, int layer, int direction, GruTensor tensor,
                         const std::string& method, const TensorQuant& spec) {
  const RangeMethod parsed = parse_range_method(method.empty() ? stats.method : method);
  const TensorStats& tensor_stats = stats.at(layer, direction, tensor);
  const std::string where = std::string("layer ") + std::to_string(layer) + " direction " +
                            std::to_string(direction) + " " + gru_tensor_name(tensor);
  if (tensor_stats.count == 0) {
    throw Error("calibration statistics (" + stats.model_path + ") hold no observations of " + where);
  }
  RangeChoice choice;
  choice.method = parsed.text();
  MethodRange range;
  Pow2Objective objective = Pow2Objective::Mse;
  if (parsed.name == "minmax") {
    range = {tensor_stats.min, tensor_stats.max, "minmax"};
  } else if (parsed.name == "ema") {
    range = {tensor_stats.ema.min, tensor_stats.ema.max,
             "ema over " + std::to_string(tensor_stats.ema.steps) + " steps (order-dependent)"};
  } else if (parsed.name == "bounds") {
    if (tensor == GruTensor::update_gate_output || tensor == GruTensor::reset_gate_output) {
      range = {0.0, 1.0, "bounds: sigmoid output"};
    } else if (tensor == GruTensor::new_gate_output || tensor == GruTensor::h) {
      range = {-1.0, 1.0, "bounds: tanh output / convex mix of tanh outputs"};
    } else {
      range = {tensor_stats.min, tensor_stats.max, "bounds: none known, minmax"};
    }
  } else if (parsed.name == "kl") {
    range = kl_range(tensor_stats, spec, stats.include_zeros);
    objective = Pow2Objective::Kl;
  } else if (parsed.name == "percentile") {
    range = percentile_range(tensor_stats, spec, parsed.percentile, stats.include_zeros);
    objective = Pow2Objective::ClippedMass;
  } else {
    range = mse_range(tensor_stats, spec);
  }
  choice.min = range.min;
  choice.max = range.max;
  choice.detail = range.detail;
  if (parsed.pow2) {
    const Pow2Choice pow2 = choose_pow2_range(tensor_stats, range.min, range.max, spec, objective,
                                              parsed.percentile, stats.include_zeros);
    choice.min = pow2.min;
    choice.max = pow2.max;
    choice.detail += "; " + pow2.detail;
  }
  return choice;
}

RangeQuantChoice select_range_quant(const CalibrationStats& stats, int layer, int direction, GruTensor tensor,
                                    const std::string& method, const TensorQuant& spec, const std::string& source) {
  try {
    RangeQuantChoice choice;
    choice.range = select_range(stats, layer, direction, tensor, method, spec);
    choice.quant = quant_from_range(choice.range.min, choice.range.max, spec.bits, spec.is_unsigned, spec.symmetric);
    return choice;
  } catch (const Error& e) {
    const TensorStats& observed = stats.at(layer, direction, tensor);
    throw Error(source + ": layer " + std::to_string(layer) + " direction " + std::to_string(direction) + " tensor " +
                gru_tensor_name(tensor) + " (observed [" + format_number(observed.min) + ", " +
                format_number(observed.max) + "]): " + e.what());
  }
}

RangeQuantChoice select_layer_x_range_quant(const CalibrationStats& stats, int layer, const std::string& method,
                                           const TensorQuant& spec, const std::string& source) {
  RangeQuantChoice shared = select_range_quant(stats, layer, 0, GruTensor::x, method, spec, source);
  if (stats.num_directions == 1) return shared;
  std::string detail = "union of the directions' ranges: [" + format_number(shared.range.min) + ", " +
                       format_number(shared.range.max) + "]";
  for (int direction = 1; direction < stats.num_directions; ++direction) {
    const RangeChoice other = select_range_quant(stats, layer, direction, GruTensor::x, method, spec, source).range;
    detail += ", [" + format_number(other.min) + ", " + format_number(other.max) + "]";
    shared.range.min = std::min(shared.range.min, other.min);
    shared.range.max = std::max(shared.range.max, other.max);
  }
  shared.range.detail = detail;
  shared.quant = quant_from_range(shared.range.min, shared.range.max, spec.bits, spec.is_unsigned, spec.symmetric);
  return shared;
}

}  // namespace qgru
