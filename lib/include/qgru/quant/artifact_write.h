#pragma once
// Writing the quantized-model artifact (the format is described in qgru/runtime/artifact.h, which also
// reads it).
#include <string>

#include <nlohmann/json.hpp>

#include "qgru/runtime/artifact.h"

namespace qgru {

// Write both files atomically (both or neither). Throws qgru::Error naming the file on failure.
// provenance_extra: further keys of the JSON's "provenance" object (e.g. "range_search"); readers ignore them.
void write_artifact(const std::string& json_path, const QuantizedGru& model,
                    const nlohmann::json& provenance_extra = nlohmann::json::object());

}  // namespace qgru
