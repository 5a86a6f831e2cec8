#include "qgru/verify/verify_report.h"

#include <cmath>
#include <cstdio>
#include <sstream>

namespace qgru {
namespace {

nlohmann::json finite_or_text(double value) {
  if (std::isfinite(value)) return value;
  if (std::isnan(value)) return "nan";
  return value > 0 ? "inf" : "-inf";
}

nlohmann::json metrics_json(const ErrorMetrics& metrics) {
  return {{"count", metrics.count},
          {"max_abs_error", finite_or_text(metrics.max_abs_error)},
          {"mean_abs_error", finite_or_text(metrics.mean_abs_error())},
          {"nmse", finite_or_text(metrics.nmse())},
          {"sqnr_db", finite_or_text(metrics.sqnr_db())},
          {"cosine", finite_or_text(metrics.cosine())}};
}

nlohmann::json per_step_sqnr(const std::vector<ErrorMetrics>& per_step) {
  nlohmann::json values = nlohmann::json::array();
  for (const ErrorMetrics& metrics : per_step) values.push_back(finite_or_text(metrics.sqnr_db()));
  return values;
}

// Every figure of metrics_json per time step, one array per figure (index t).
nlohmann::json per_step_metrics(const std::vector<ErrorMetrics>& per_step) {
  nlohmann::json columns = {{"count", nlohmann::json::array()},          {"max_abs_error", nlohmann::json::array()},
                            {"mean_abs_error", nlohmann::json::array()}, {"nmse", nlohmann::json::array()},
                            {"sqnr_db", nlohmann::json::array()},        {"cosine", nlohmann::json::array()}};
  for (const ErrorMetrics& metrics : per_step) {
    const nlohmann::json step = metrics_json(metrics);
    for (auto& [name, values] : columns.items()) values.push_back(step.at(name));
  }
  return columns;
}

std::string format_row(const std::string& name, const ErrorMetrics& metrics) {
  char line[256];
  std::snprintf(line, sizeof line, "%-36s %12.6f %12.6f %12.3e %9.2f %9.6f\n", name.c_str(), metrics.max_abs_error,
                metrics.mean_abs_error(), metrics.nmse(), metrics.sqnr_db(), metrics.cosine());
  return line;
}

}  // namespace

nlohmann::json verify_report_json(const GruVerifyReport& report) {
  nlohmann::json json;
  json["T"] = report.T;
  json["N"] = report.N;
  json["output"] = metrics_json(report.output);
  json["output"]["per_step_sqnr_db"] = per_step_sqnr(report.output_per_step);
  json["output"]["per_step"] = per_step_metrics(report.output_per_step);
  json["h_n"] = metrics_json(report.h_n);
  json["tensors"] = nlohmann::json::array();
  for (const TensorComparison& comparison : report.tensors) {
    nlohmann::json entry = metrics_json(comparison.overall);
    entry["layer"] = comparison.layer;
    entry["direction"] = comparison.direction;
    entry["tensor"] = gru_tensor_name(comparison.tensor);
    entry["per_step_sqnr_db"] = per_step_sqnr(comparison.per_step);
    entry["per_step"] = per_step_metrics(comparison.per_step);
    json["tensors"].push_back(std::move(entry));
  }
  return json;
}

std::string verify_report_table(const GruVerifyReport& report) {
  std::ostringstream table;
  char header[256];
  std::snprintf(header, sizeof header, "%-36s %12s %12s %12s %9s %9s\n", "tensor", "max_abs", "mean_abs", "nmse",
                "sqnr_db", "cosine");
  table << header;
  for (const TensorComparison& comparison : report.tensors) {
    const std::string name = "l" + std::to_string(comparison.layer) + (comparison.direction ? ".reverse." : ".forward.") +
                             gru_tensor_name(comparison.tensor);
    table << format_row(name, comparison.overall);
  }
  table << format_row("output", report.output);
  table << format_row("h_n", report.h_n);
  return table.str();
}

}  // namespace qgru
