#include "qgru/quant/range_method_precedence.h"

#include <utility>
#include <vector>

namespace qgru {

std::string resolved_range_method(const BitwidthConfig& config, const std::string& override_method,
                                  const std::string& stats_method, GruTensor tensor) {
  if (!override_method.empty()) return override_method;
  const std::string& own = config.range_method_of(tensor);
  return own.empty() ? stats_method : own;
}

std::string range_method_precedence_note(const BitwidthConfig& config, const std::string& override_method,
                                         const std::string& stats_method) {
  // Methods in order of first use, each with its tensors.
  std::vector<std::pair<std::string, std::vector<std::string>>> uses;
  bool all_from_stats = true;
  for (GruTensor tensor : kObservedGruTensors) {
    const std::string method = resolved_range_method(config, override_method, stats_method, tensor);
    if (!override_method.empty() || !config.range_method_of(tensor).empty()) {
      if (method != stats_method) all_from_stats = false;
    }
    auto it = uses.begin();
    while (it != uses.end() && it->first != method) ++it;
    if (it == uses.end()) {
      uses.push_back({method, {}});
      it = uses.end() - 1;
    }
    it->second.push_back(gru_tensor_name(tensor));
  }
  if (all_from_stats) return "";
  std::string line = "range methods: ";
  for (size_t i = 0; i < uses.size(); ++i) {
    if (i > 0) line += "; ";
    line += uses[i].first + " for ";
    if (uses.size() == 1) {
      line += "every observed tensor";
    } else {
      for (size_t k = 0; k < uses[i].second.size(); ++k) line += (k ? ", " : "") + uses[i].second[k];
    }
  }
  line += override_method.empty() ? " (config '" + config.name + "')" : " (--range-method)";
  line += ", overriding the statistics' '" + stats_method + "' (calibrate --method)";
  return line;
}

}  // namespace qgru
