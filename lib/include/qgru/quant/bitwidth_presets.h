#pragma once
// The bit-width presets (configs/*.json, embedded in the library so that `--config int8` works without the
// source tree) and loading a config by preset name or path.
#include <string>
#include <vector>

#include "qgru/runtime/bitwidth_config.h"

namespace qgru {

// "int8", "int16-activations", "int16".
std::vector<std::string> bitwidth_preset_names();
// The embedded JSON text of a preset (identical to configs/<name>.json; a unit test checks it).
// Throws qgru::Error for an unknown name.
const std::string& bitwidth_preset_text(const std::string& name);
// A preset name or a path to a JSON file.
BitwidthConfig load_bitwidth_config(const std::string& name_or_path);
// The file a config argument names, or "" for a preset name (an input file to the output policy).
std::string bitwidth_config_file(const std::string& name_or_path);

}  // namespace qgru
