#pragma once
// The verify report in two forms: JSON for machines, an aligned text table for people.
#include <nlohmann/json.hpp>
#include <string>

#include "qgru/verify/gru_verify.h"

namespace qgru {

// {"output": {...metrics, "per_step_sqnr_db": [...]}, "h_n": {...}, "tensors": [{"layer", "direction",
//  "tensor", metrics..., "per_step_sqnr_db": [...]}]}; non-finite figures are written as strings
// ("inf", "-inf") so that the JSON stays valid.
nlohmann::json verify_report_json(const GruVerifyReport& report);

// One row per compared tensor plus the output and h_n rows: max abs, mean abs, NMSE, SQNR (dB), cosine.
std::string verify_report_table(const GruVerifyReport& report);

}  // namespace qgru
