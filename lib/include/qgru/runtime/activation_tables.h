#pragma once
// The integer data of a gate activation as an artifact holds it and evaluate_activation()
// (qgru/fixed/activation.h) reads it: a table of output codes, or piecewise-linear segments
// (docs/FIXED_POINT.md §4), with its artifact form. How the data is fitted is the toolchain's business
// (qgru/quant/activation_generation.h).
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "qgru/base/tensor.h"
#include "qgru/fixed/activation.h"
#include "qgru/base/tensor_quant.h"

namespace qgru {

struct ActivationTables {
  ActivationFunction function = ActivationFunction::Sigmoid;
  ActivationImpl impl = ActivationImpl::Table;
  int segments = 0;  // Pwl: the number of segments (== pwl_threshold.size()); Table: 0
  TensorQuant input;
  TensorQuant output;
  std::vector<int32_t> table;          // Table: one output code per input code, q_in_min first
  std::vector<int32_t> pwl_threshold;  // Pwl: [segments] first input code of each segment
  std::vector<int32_t> pwl_q_b;        // Pwl: [segments] slope * 2^pwl_shift, output codes per input code
  std::vector<int32_t> pwl_shift;      // Pwl: [segments] 0..62
  std::vector<int64_t> pwl_term_c;     // Pwl: [segments] intercept at q_in = 0 * 2^pwl_shift, output codes

  // A view of these arrays (valid while this object lives and is not modified).
  ActivationView view() const;
};

const char* activation_function_name(ActivationFunction function);  // "sigmoid", "tanh"
const char* activation_impl_name(ActivationImpl impl);              // "table", "pwl"
// Parse the names above; an unknown name throws qgru::Error naming `where` and the choices.
ActivationFunction parse_activation_function(const std::string& name, const std::string& where);
ActivationImpl parse_activation_impl(const std::string& name, const std::string& where);

// Artifact form. `json_out` becomes this activation's object:
//   {"function": "sigmoid"|"tanh", "impl": "table"|"pwl", "segments": N,
//    "input": {"bits", "unsigned", "symmetric", "shift", "zp"}, "output": {...}}
// and the arrays go to integer tensors "<prefix>.table" (I32) or "<prefix>.pwl_threshold" (I32),
// "<prefix>.pwl_q_b" (I32), "<prefix>.pwl_term_c" (I64), "<prefix>.pwl_shift" (I32), all rank 1.
void activation_to_artifact(const ActivationTables& tables, const std::string& prefix, nlohmann::json& json_out,
                            std::map<std::string, Tensor>& tensors_out);
// Read the object and tensors written above, validating everything the evaluator relies on (types,
// widths, sizes, strictly increasing thresholds starting at q_in_min, shift and term ranges, table codes
// inside the output range). Errors name `source` (e.g. the artifact's file name), the key or tensor and
// what was expected.
ActivationTables activation_from_artifact(const nlohmann::json& json, const std::map<std::string, Tensor>& tensors,
                                          const std::string& prefix, const std::string& source);

}  // namespace qgru
