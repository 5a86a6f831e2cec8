#pragma once
// Writing the quantized-model artifact (the format is described in qgru/runtime/artifact.h, which also
// reads it).
#include <string>

#include "qgru/runtime/artifact.h"

namespace qgru {

// Write both files atomically (both or neither). Throws qgru::Error naming the file on failure.
void write_artifact(const std::string& json_path, const QuantizedGru& model);

}  // namespace qgru
