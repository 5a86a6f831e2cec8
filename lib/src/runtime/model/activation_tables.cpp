#include "qgru/runtime/activation_tables.h"

#include "qgru/base/error.h"

namespace qgru {

ActivationView ActivationTables::view() const {
  ActivationView result{};
  result.impl = impl;
  result.q_in_min = input.qmin();
  result.q_in_max = input.qmax();
  result.q_out_min = output.qmin();
  result.q_out_max = output.qmax();
  result.table = table.empty() ? nullptr : table.data();
  result.num_segments = static_cast<int32_t>(pwl_threshold.size());
  result.pwl_threshold = pwl_threshold.empty() ? nullptr : pwl_threshold.data();
  result.pwl_q_b = pwl_q_b.empty() ? nullptr : pwl_q_b.data();
  result.pwl_term_c = pwl_term_c.empty() ? nullptr : pwl_term_c.data();
  result.pwl_shift = pwl_shift.empty() ? nullptr : pwl_shift.data();
  return result;
}

const char* activation_function_name(ActivationFunction function) {
  switch (function) {
    case ActivationFunction::Sigmoid: return "sigmoid";
    case ActivationFunction::Tanh: return "tanh";
  }
  return "?";
}

const char* activation_impl_name(ActivationImpl impl) {
  switch (impl) {
    case ActivationImpl::Table: return "table";
    case ActivationImpl::Pwl: return "pwl";
  }
  return "?";
}

ActivationFunction parse_activation_function(const std::string& name, const std::string& where) {
  if (name == "sigmoid") return ActivationFunction::Sigmoid;
  if (name == "tanh") return ActivationFunction::Tanh;
  throw Error(where + ": unknown activation function \"" + name + "\" (expected sigmoid or tanh)");
}

ActivationImpl parse_activation_impl(const std::string& name, const std::string& where) {
  if (name == "table") return ActivationImpl::Table;
  if (name == "pwl") return ActivationImpl::Pwl;
  throw Error(where + ": unknown activation implementation \"" + name + "\" (expected table or pwl)");
}

}  // namespace qgru
