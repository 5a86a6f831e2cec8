// The bit-width presets, embedded so that `qgru quantize --config int8` needs no source tree. The texts are
// configs/<name>.json, copied in by CMake at configure time (a change to a file reconfigures).
#include <map>

#include "qgru/base/error.h"
#include "qgru/quant/bitwidth_config.h"

namespace qgru {

namespace {

const std::map<std::string, std::string>& presets() {
  // Generated at configure time from configs/<name>.json (lib/CMakeLists.txt): the files are the only source.
  static const std::map<std::string, std::string> texts = {
#include "qgru/bitwidth_presets_data.inc"
  };
  return texts;
}

}  // namespace

std::vector<std::string> bitwidth_preset_names() { return {"int8", "int16-activations", "int16"}; }

const std::string& bitwidth_preset_text(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) throw Error("no bit-width preset named '" + name + "' (presets: int8, int16-activations, int16)");
  return it->second;
}

}  // namespace qgru
