#pragma once
// safetensors: an 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}},
// then the data buffer. Validated as the format's own implementation does (see read_safetensors()).
#include <map>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__", kept as read
};

// Throws qgru::Error naming `path`, the tensor and what was expected, for any malformed input.
SafetensorsFile read_safetensors(const std::string& path);
SafetensorsFile parse_safetensors(const std::vector<uint8_t>& bytes, const std::string& source_name);

// Serialize (tensors in name order, offsets contiguous, header padded with spaces to a multiple of 8).
std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file);
// Written atomically (temporary file + rename).
void write_safetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace qgru
