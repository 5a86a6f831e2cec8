#pragma once
// Writing the quantized-model artifact (the format is described in qgru/runtime/artifact.h, which also
// reads it).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgru/base/atomic_file.h"
#include "qgru/runtime/artifact.h"

namespace qgru {

// The naming rule of the writer: NAME.qgru.json goes with NAME.qgru.safetensors, always, so that the tensor
// file can never be a file the user meant as an input (with "x.json" -> "x.safetensors", -o gru.json beside
// the float gru.safetensors replaced the model). The output policy (qgru/base/output_policy.h) refuses the
// rest: an input that is itself named NAME.qgru.safetensors. Throws qgru::UsageError for a name that does not
// end in ".qgru.json", saying which name to use instead.
std::string artifact_tensor_path(const std::string& json_path);

// The artifact's two files in memory: the JSON text (naming its tensor file `tensor_file_name`) and the
// tensor file's bytes, exactly what stage_artifact writes.
struct ArtifactBytes {
  std::string json;
  std::vector<uint8_t> tensors;
};
ArtifactBytes serialize_artifact(const QuantizedGru& model, const std::string& tensor_file_name,
                                 const nlohmann::json& provenance_extra = nlohmann::json::object());

// Stage both files of the artifact in `group` (the caller may add its other outputs, then commit_all: all
// appear together, under the folders' lock, or none). provenance_extra: further keys of the JSON's
// "provenance" object (e.g. "range_search"); readers ignore them.
void stage_artifact(AtomicFileGroup& group, const std::string& json_path, const QuantizedGru& model,
                    const nlohmann::json& provenance_extra = nlohmann::json::object());

// The artifact's JSON less what belongs to the files (schema, tensor file, provenance, config): "shapes",
// "gemm_operands_fit_int8", "overflow_proof" and "cells" (each cell's accumulator types, every tensor's bits,
// shift, zero point and range, the derived shifts and the activations' form, without their arrays). The same
// keys and values as the artifact's, made by the same code; `qgru quantize --json` prints it.
nlohmann::json artifact_parameters_json(const QuantizedGru& model);

// stage_artifact and commit: both files or neither. Throws qgru::Error naming the file on failure.
void write_artifact(const std::string& json_path, const QuantizedGru& model,
                    const nlohmann::json& provenance_extra = nlohmann::json::object());

}  // namespace qgru
