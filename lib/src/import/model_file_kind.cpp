// Recognising model files by their first bytes (qgru/import/model_file_kind.h).
#include "qgru/import/model_file_kind.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/base/input_file.h"

namespace qgru {
namespace {

bool starts_with(const std::vector<uint8_t>& bytes, const char* magic, size_t size, size_t at = 0) {
  return bytes.size() >= at + size && std::memcmp(bytes.data() + at, magic, size) == 0;
}

// The file name of the zip's first local header ("PK\3\4", name length at offset 26, name at 30).
std::string first_zip_member(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 30) return "";
  const size_t length = static_cast<size_t>(bytes[26]) | (static_cast<size_t>(bytes[27]) << 8);
  if (bytes.size() < 30 + length) return std::string(bytes.begin() + 30, bytes.end());
  return std::string(bytes.begin() + 30, bytes.begin() + 30 + static_cast<std::ptrdiff_t>(length));
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// An ONNX ModelProto starts with field 1 (ir_version, varint: tag 0x08) holding a small version, followed by
// another ModelProto field: producer_name (0x12), producer_version (0x1a), domain (0x22), model_version
// (0x28), doc_string (0x32), graph (0x3a), opset_import (0x42) or metadata_props (0x72).
bool looks_like_onnx(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 3 || bytes[0] != 0x08 || bytes[1] == 0 || bytes[1] > 0x20) return false;
  const uint8_t next = bytes[2];
  return next == 0x12 || next == 0x1a || next == 0x22 || next == 0x28 || next == 0x32 || next == 0x3a || next == 0x42 ||
         next == 0x72;
}

// safetensors: a little-endian u64 header length (a JSON object must fit in the file, so it is small for any
// file whose first bytes are read here only in that it is below 100 MB, as the reader requires) then '{'.
bool looks_like_safetensors(const std::vector<uint8_t>& bytes) {
  if (bytes.size() < 10 || bytes[8] != '{') return false;
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | bytes[static_cast<size_t>(i)];
  return length >= 2 && length <= 100000000;
}

// Whether a JSON document holds the artifact schema's name anywhere: the writer sorts its keys, so "schema"
// comes after "cells" and may lie far past the first bytes. Read in chunks (overlapping by the needle's length)
// up to kArtifactScanLimit; a float model is never JSON, so the answer only chooses between two refusals or the
// artifact reader.
constexpr uint64_t kArtifactScanLimit = uint64_t{256} << 20;

bool json_names_artifact_schema(const InputFile& file) {
  const std::string needle = "\"qgru.artifact\"";
  std::string window;
  std::vector<char> chunk(uint64_t{1} << 16);
  for (uint64_t offset = 0; offset < kArtifactScanLimit;) {
    const uint64_t got = file.read_some(offset, chunk.data(), chunk.size());
    if (got == 0) return false;
    window.append(chunk.data(), static_cast<size_t>(got));
    if (window.find(needle) != std::string::npos) return true;
    window.erase(0, window.size() - std::min(window.size(), needle.size() - 1));
    offset += got;
  }
  return false;
}

}  // namespace

ModelFileKind sniff_model_file(const std::string& path) {
  std::vector<uint8_t> bytes(512);
  std::unique_ptr<InputFile> file;
  try {
    file = std::make_unique<InputFile>(path);  // a regular file only: a FIFO would block the read
    bytes.resize(static_cast<size_t>(file->read_some(0, bytes.data(), bytes.size())));
  } catch (const Error&) {
    struct stat info {};
    if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) throw;  // "PATH: is a FIFO, expected a regular file"
    throw Error(path + ": cannot open the model file");
  }

  if (looks_like_safetensors(bytes)) return ModelFileKind::Safetensors;
  if (starts_with(bytes, "PK\x03\x04", 4)) {
    const std::string member = first_zip_member(bytes);
    if (ends_with(member, "data.pkl") || member.find("/data.pkl") != std::string::npos ||
        member.find("archive/") == 0) {
      return ModelFileKind::PyTorchZip;
    }
    if (member == "metadata.json" || member == "config.json" || member == "model.weights.h5") {
      return ModelFileKind::KerasArchive;
    }
    if (ends_with(member, ".npy")) return ModelFileKind::NumpyArchive;
    return ModelFileKind::Zip;
  }
  if (starts_with(bytes, "\x93NUMPY", 6)) return ModelFileKind::NumpyArray;
  if (starts_with(bytes, "\x89HDF\r\n\x1a\n", 8)) return ModelFileKind::Hdf5;
  if (starts_with(bytes, "TFL3", 4, 4)) return ModelFileKind::TfLite;
  if (bytes.size() >= 2 && bytes[0] == 0x80 && bytes[1] >= 2 && bytes[1] <= 5) return ModelFileKind::Pickle;
  if (looks_like_onnx(bytes)) return ModelFileKind::Onnx;
  size_t first = 0;
  while (first < bytes.size() && (bytes[first] == ' ' || bytes[first] == '\n' || bytes[first] == '\r' || bytes[first] == '\t')) {
    ++first;
  }
  if (first < bytes.size() && bytes[first] == '{') {
    return json_names_artifact_schema(*file) ? ModelFileKind::QgruArtifact : ModelFileKind::Json;
  }
  return ModelFileKind::Unknown;
}

const char* model_file_kind_name(ModelFileKind kind) {
  switch (kind) {
    case ModelFileKind::Safetensors: return "a safetensors file";
    case ModelFileKind::Onnx: return "an ONNX model";
    case ModelFileKind::PyTorchZip: return "a PyTorch checkpoint (torch.save zip archive)";
    case ModelFileKind::KerasArchive: return "a Keras model archive (.keras)";
    case ModelFileKind::NumpyArchive: return "a NumPy .npz archive";
    case ModelFileKind::Zip: return "a zip archive";
    case ModelFileKind::Pickle: return "a Python pickle (torch.save's legacy format or another pickled object)";
    case ModelFileKind::NumpyArray: return "a NumPy .npy array";
    case ModelFileKind::Hdf5: return "an HDF5 file (Keras .h5 weights or similar)";
    case ModelFileKind::TfLite: return "a TensorFlow Lite model";
    case ModelFileKind::QgruArtifact: return "a quantized qgru artifact";
    case ModelFileKind::Json: return "a JSON document";
    case ModelFileKind::Unknown: return "not a format qgru recognises";
  }
  return "?";
}

std::string model_file_refusal(const std::string& path, ModelFileKind kind) {
  const std::string is = path + ": this is " + model_file_kind_name(kind) + "; ";
  const std::string torch_hint =
      "save the GRU's weights with safetensors (safetensors.torch.save_file(gru.state_dict(), 'gru.safetensors')) "
      "or export the model to ONNX (torch.onnx.export), and give that file";
  const std::string keras_hint =
      "export the model to ONNX (tf2onnx.convert.from_keras, or python -m tf2onnx.convert) and give the .onnx file";
  switch (kind) {
    case ModelFileKind::PyTorchZip:
    case ModelFileKind::Pickle:
      return is + "qgru does not unpickle files (loading a pickle can run code); " + torch_hint;
    case ModelFileKind::KerasArchive:
    case ModelFileKind::Hdf5:
    case ModelFileKind::TfLite:
      return is + "qgru reads float GRUs from safetensors state dicts and ONNX models: " + keras_hint;
    case ModelFileKind::NumpyArchive:
    case ModelFileKind::NumpyArray:
      return is + "arrays are data (--data, --input, --h0, --lengths), not a model: give the GRU's weights as "
                  "safetensors (PyTorch nn.GRU or haste names) or an ONNX model";
    case ModelFileKind::QgruArtifact:
      return is + "this option needs the float model the artifact was quantized from (.safetensors or .onnx); "
                  "an artifact is run with 'qgru run --model model.qgru.json'";
    case ModelFileKind::Zip:
    case ModelFileKind::Json:
    case ModelFileKind::Unknown:
      return is + "qgru reads float GRUs from safetensors state dicts and ONNX models";
    case ModelFileKind::Safetensors:
    case ModelFileKind::Onnx:
      break;
  }
  return is + "read it with its own reader";
}

}  // namespace qgru
