#pragma once
// The verify report in two forms: JSON for machines, an aligned text table for people.
#include <nlohmann/json.hpp>
#include <string>

#include "qgru/verify/gru_verify.h"

namespace qgru {

// {"output": {...metrics, "per_step_sqnr_db": [...], "per_step": {...}}, "h_n": {...}, "tensors": [{"layer",
//  "direction", "tensor", metrics..., "per_step_sqnr_db": [...], "per_step": {...}}]}. metrics are count,
// max_abs_error, mean_abs_error, nmse, sqnr_db, cosine; "per_step" holds each of them as an array over the
// time steps (index t), "per_step_sqnr_db" repeats its sqnr_db. Non-finite figures are written as strings
// ("inf", "-inf") so that the JSON stays valid.
nlohmann::json verify_report_json(const GruVerifyReport& report);

// One row per compared tensor plus the output and h_n rows: max abs, mean abs, NMSE, SQNR (dB), cosine.
std::string verify_report_table(const GruVerifyReport& report);

}  // namespace qgru
