#pragma once
// What a model file is, from its first bytes (never from its name): qgru reads float GRUs from safetensors
// state dicts and ONNX graphs; for anything else people commonly have (a torch.save checkpoint, a pickle, a
// NumPy array, an HDF5 or .keras file, a TensorFlow Lite flatbuffer, a qgru artifact) the refusal says what
// the file is and how to get a file qgru reads.
#include <string>

namespace qgru {

enum class ModelFileKind {
  Safetensors,    // 8-byte little-endian header length, then a JSON object
  Onnx,           // a protobuf ModelProto (ir_version first, as every ONNX writer emits it)
  PyTorchZip,     // torch.save's zip archive (<name>/data.pkl inside)
  KerasArchive,   // Keras 3 .keras: a zip with config.json / metadata.json / model.weights.h5
  NumpyArchive,   // a .npz: a zip of .npy members
  Zip,            // any other zip archive
  Pickle,         // a Python pickle (torch.save's legacy format, or any pickled object)
  NumpyArray,     // a .npy file
  Hdf5,           // HDF5 (Keras .h5 weights, among others)
  TfLite,         // a TensorFlow Lite flatbuffer ("TFL3")
  QgruArtifact,   // a quantized qgru artifact (.qgru.json)
  Json,           // another JSON document
  Unknown,
};

// Reads at most the first few hundred bytes of `path` (throws qgru::Error naming the file when it cannot
// be opened).
ModelFileKind sniff_model_file(const std::string& path);

// Words for the kind ("an ONNX model", "a PyTorch checkpoint (torch.save zip archive)", ...).
const char* model_file_kind_name(ModelFileKind kind);

// One line for a kind qgru does not read as float weights: "<path>: this is <kind>; <what to do>".
std::string model_file_refusal(const std::string& path, ModelFileKind kind);

}  // namespace qgru
