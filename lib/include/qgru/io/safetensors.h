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

// Throws qgru::Error naming `path`, the tensor and what was expected, for any malformed input. Checked, as
// the format's reference implementation does: the file holds the 8-byte length; N <= 100,000,000 and
// N <= file size - 8; the header is UTF-8 JSON, an object starting with '{' (trailing spaces allowed), with
// no key repeated; each entry has dtype (F64 F32 F16 BF16 I64 I32 I16 I8 U8; others refused by name),
// shape (non-negative integers) and data_offsets [begin, end] with begin <= end <= data size; end - begin
// == dtype size x product(shape), computed with overflow checks before anything is allocated; sorted by
// offset, the entries tile the data buffer from 0 to its end with no gap and no overlap; "__metadata__", if
// present, maps strings to strings. The file reader reads each tensor straight into its own buffer.
SafetensorsFile read_safetensors(const std::string& path);
SafetensorsFile parse_safetensors(const std::vector<uint8_t>& bytes, const std::string& source_name);

// Serialize (tensors in name order, offsets contiguous, header padded with spaces to a multiple of 8).
std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file);
// Written atomically (temporary file + rename).
void write_safetensors(const std::string& path, const SafetensorsFile& file);

}  // namespace qgru
