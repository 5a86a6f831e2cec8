// Reading a float GRU from a file: the kind is recognised by its first bytes (model_file_kind.h), then
// the safetensors reader (kept apart from float_gru_from_tensors so that code building models from tensors in
// memory does not need the reader).
#include "qgru/import/load_float_gru.h"

#include "qgru/import/model_file_kind.h"
#include "qgru/import/onnx_gru.h"
#include "qgru/io/safetensors.h"
#include "qgru/model/float_gru.h"

namespace qgru {

FloatGruModel load_float_gru(const FloatModelSource& source) {
  const ModelFileKind kind = sniff_model_file(source.path);
  if (kind == ModelFileKind::Safetensors || kind == ModelFileKind::Unknown) {  // Unknown: the reader says why
    if (!source.node.empty()) {
      throw Error(source.path + ": --node " + source.node + " picks a GRU node of an ONNX model; this is a "
                  "safetensors file (use --prefix to pick a GRU of a full state dict)");
    }
    const SafetensorsFile file = read_safetensors(source.path);
    return float_gru_from_tensors(file.tensors, source.layout, source.path, source.prefix);
  }
  if (kind == ModelFileKind::Onnx) {
    if (!source.prefix.empty()) {
      throw Error(source.path + ": --prefix " + source.prefix + " picks a GRU of a safetensors state dict; this is an "
                  "ONNX model (use --node to pick a GRU stack)");
    }
    return load_onnx_gru(source.path, source.node);
  }
  throw Error(model_file_refusal(source.path, kind));
}

FloatGruModel load_float_gru(const std::string& path, WeightLayout layout) {
  FloatModelSource source;
  source.path = path;
  source.layout = layout;
  return load_float_gru(source);
}

void add_model_input(std::vector<CommandFile>& inputs, const std::string& flag, const std::string& model_path) {
  inputs.push_back({flag, model_path});
  for (const std::string& file : onnx_external_data_files(model_path)) inputs.push_back({flag + " (its external data)", file});
}

}  // namespace qgru
