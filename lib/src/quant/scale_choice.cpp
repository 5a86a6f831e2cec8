#include "qgru/quant/scale_choice.h"

#include <map>
#include <vector>

#include "qgru/base/error.h"

namespace qgru {

ScaleChoice parse_scale_choice(const std::string& text, const std::string& what) {
  if (text == "pow2" || text == "power_of_two") return ScaleChoice::PowerOfTwo;
  if (text == "multiplier") return ScaleChoice::Multiplier;
  throw UsageError(what + " '" + text + "': expected pow2 or multiplier");
}

std::string multiplier_range_method(int bits) { return bits <= 8 ? "percentile:99.9" : "minmax"; }

std::string apply_scale_choice(BitwidthConfig& config, ScaleChoice choice, bool config_is_preset) {
  const bool multiplier = choice == ScaleChoice::Multiplier;
  for (TensorBitwidth& tensor : config.tensors) tensor.multiplier_scale = multiplier;
  if (!multiplier) return "";
  // The tensors each new method went to, in data-flow order, for the log line.
  std::map<std::string, std::vector<std::string>> changed;
  for (GruTensor tensor : kObservedGruTensors) {
    const bool named = !config_is_preset && !config.range_method_of(tensor).empty();
    if (named) continue;
    TensorBitwidth& bw = config.of(tensor);
    const std::string method = multiplier_range_method(bw.bits);
    if (config.range_method_of(tensor) == method) continue;
    bw.range_method = method;
    changed[method].push_back(gru_tensor_name(tensor));
  }
  if (changed.empty()) return "";
  std::string line = "--scales multiplier: range methods that fit exact scales where none was named: ";
  bool first = true;
  for (const auto& [method, tensors] : changed) {
    line += (first ? "" : "; ") + method + " for ";
    first = false;
    for (size_t i = 0; i < tensors.size(); ++i) line += (i ? ", " : "") + tensors[i];
  }
  return line + " (--range-method or a config file's range_method overrides it)";
}

}  // namespace qgru
