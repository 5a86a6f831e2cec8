// The bit-width presets, embedded so that `qgru quantize --config int8` needs no source tree. The texts are
// configs/<name>.json, copied in by CMake at configure time (a change to a file reconfigures).
#include "qgru/quant/bitwidth_presets.h"

#include <filesystem>
#include <map>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/calib/range_selection.h"

namespace qgru {

namespace {

const std::map<std::string, std::string>& presets() {
  // Generated at configure time from configs/<name>.json (lib/CMakeLists.txt): the files are the only source.
  static const std::map<std::string, std::string> texts = {
#include "qgru/bitwidth_presets_data.inc"
  };
  return texts;
}

// The range methods a config names belong to the toolchain (qgru/calib/range_selection.h): the runtime's
// reader keeps them as text, so they are checked here, where quantize and calibrate load the config.
BitwidthConfig with_checked_range_methods(BitwidthConfig config, const std::string& source) {
  auto check = [&](const std::string& method, const std::string& key) {
    if (method.empty()) return;
    try {
      parse_range_method(method);
    } catch (const Error& e) {
      throw Error("bit-width config " + source + ": " + key + ": " + e.what());
    }
  };
  check(config.range_method, "range_method");
  for (int i = 0; i < kGruTensorCount; ++i) {
    const auto tensor = static_cast<GruTensor>(i);
    check(config.of(tensor).range_method, std::string("tensors.") + gru_tensor_name(tensor) + ".range_method");
  }
  return config;
}

}  // namespace

std::vector<std::string> bitwidth_preset_names() { return {"int8", "int16-activations", "int16"}; }

const std::string& bitwidth_preset_text(const std::string& name) {
  auto it = presets().find(name);
  if (it == presets().end()) throw Error("no bit-width preset named '" + name + "' (presets: int8, int16-activations, int16)");
  return it->second;
}

std::string bitwidth_config_file(const std::string& name_or_path) {
  for (const std::string& name : bitwidth_preset_names()) {
    if (name == name_or_path) return "";
  }
  return name_or_path;
}

BitwidthConfig load_bitwidth_config(const std::string& name_or_path) {
  if (bitwidth_config_file(name_or_path).empty()) {
    return parse_bitwidth_config_text(bitwidth_preset_text(name_or_path), "preset '" + name_or_path + "'");
  }
  if (!std::filesystem::exists(name_or_path)) {
    std::string names;
    for (const std::string& name : bitwidth_preset_names()) names += (names.empty() ? "" : ", ") + name;
    throw Error("bit-width config '" + name_or_path + "' is neither a preset (" + names + ") nor an existing file");
  }
  return with_checked_range_methods(parse_bitwidth_config_text(read_file_text(name_or_path), name_or_path), name_or_path);
}

}  // namespace qgru
