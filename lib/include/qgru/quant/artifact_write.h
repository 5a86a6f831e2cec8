#pragma once
// Writing the quantized-model artifact (the format is described in qgru/runtime/artifact.h, which also
// reads it).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgru/runtime/artifact.h"

namespace qgru {

// The artifact's two files in memory: the JSON text (naming its tensor file `tensor_file_name`) and the
// tensor file's bytes, exactly what write_artifact writes.
struct ArtifactBytes {
  std::string json;
  std::vector<uint8_t> tensors;
};
ArtifactBytes serialize_artifact(const QuantizedGru& model, const std::string& tensor_file_name,
                                 const nlohmann::json& provenance_extra = nlohmann::json::object());

// Write both files atomically (both or neither). Throws qgru::Error naming the file on failure.
// provenance_extra: further keys of the JSON's "provenance" object (e.g. "range_search"); readers ignore them.
void write_artifact(const std::string& json_path, const QuantizedGru& model,
                    const nlohmann::json& provenance_extra = nlohmann::json::object());

}  // namespace qgru
