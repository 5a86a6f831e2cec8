// The range search's result as JSON (the artifact's provenance, the calibration report) and as log lines.
#include <cmath>
#include <cstdio>

#include "qgru/runtime/bitwidth_config.h"
#include "qgru/search/range_search.h"

namespace qgru {
namespace {

nlohmann::json db_json(double db) {
  if (std::isfinite(db)) return std::round(db * 1e4) / 1e4;
  return db > 0 ? "inf" : "-inf";
}

}  // namespace

nlohmann::json range_search_json(const RangeSearchResult& result, const RangeSearchOptions& options) {
  nlohmann::json json;
  json["method"] = kRangeSearchMethodName;
  json["score"] = "output SQNR (dB) of the fast integer executor against the float model on the held-in sequences";
  json["options"] = {{"max_sequences", options.max_sequences},
                     {"max_evaluations", options.max_evaluations},
                     {"max_seconds", options.max_seconds},
                     {"min_gain_db", options.min_gain_db}};
  json["searched_tensors"] = result.searched;
  json["held_in_sequences"] = result.sequences;
  nlohmann::json starts = nlohmann::json::array();
  for (const auto& [method, db] : result.method_sqnr_db) starts.push_back({{"method", method}, {"sqnr_db", db_json(db)}});
  json["start_methods"] = starts;
  json["start_method"] = result.start_method;
  json["start_sqnr_db"] = db_json(result.start_sqnr_db);
  json["sqnr_db"] = db_json(result.sqnr_db);
  json["evaluations"] = result.evaluations;
  json["passes"] = result.passes;
  json["stopped_by"] = result.stopped_by;
  nlohmann::json history = nlohmann::json::array();
  for (const RangeSearchStep& step : result.history) {
    nlohmann::json entry = {{"evaluation", step.evaluation}, {"pass", step.pass}, {"candidate", step.candidate},
                            {"sqnr_db", db_json(step.sqnr_db)}};
    if (step.pass > 0) {
      entry["layer"] = step.layer;
      entry["direction"] = step.direction < 0 ? nlohmann::json("shared") : nlohmann::json(step.direction);
      entry["tensor"] = gru_tensor_name(step.tensor);
      entry["shift"] = step.shift;
      entry["zp"] = step.zp;
      entry["range"] = {step.min, step.max};
    }
    history.push_back(entry);
  }
  json["history"] = history;
  nlohmann::json widening = nlohmann::json::array();
  for (const WideningResult& w : result.widening) {
    nlohmann::json entry = {{"tensor", gru_tensor_name(w.tensor)}, {"bits", 16}, {"possible", w.possible}};
    if (w.possible) {
      entry["range_method"] = w.method;
      entry["sqnr_db"] = db_json(w.sqnr_db);
      entry["gain_db"] = db_json(w.gain_db);
    } else {
      entry["reason"] = w.reason;
    }
    widening.push_back(entry);
  }
  json["widening"] = widening;
  if (const WideningResult* best = result.best_widening()) json["suggestion"] = gru_tensor_name(best->tensor);
  return json;
}

std::string range_search_summary(const RangeSearchResult& result) {
  char line[512];
  std::snprintf(line, sizeof line,
                "range search: output SQNR %.2f dB on %d held-in sequences (start: %s, %.2f dB); %d evaluations, "
                "%d pass(es), %.1f s, stopped: %s, %zu change(s)",
                result.sqnr_db, result.sequences, result.start_method.c_str(), result.start_sqnr_db, result.evaluations,
                result.passes, result.seconds, result.stopped_by.c_str(),
                result.history.empty() ? size_t{0} : result.history.size() - 1);
  std::string text = line;
  if (const WideningResult* best = result.best_widening()) {
    std::snprintf(line, sizeof line,
                  "\nrange search: suggestion: %s at 16 bits gains %.2f dB (%.2f dB), the best single tensor to widen",
                  gru_tensor_name(best->tensor), best->gain_db, best->sqnr_db);
    text += line;
  }
  return text;
}

}  // namespace qgru
