#pragma once
// safetensors: an 8-byte little-endian header length N, N bytes of JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ..., "__metadata__": {str: str}},
// then the data buffer. Validated as the format's own implementation does (see read_safetensors()).
#include <map>
#include <memory>
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

// What a tensor is without its bytes.
struct TensorLayout {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};
// The names, dtypes and shapes of a file's tensors, from its header alone (checked as read_safetensors checks
// it; no tensor data is read).
std::map<std::string, TensorLayout> read_safetensors_layout(const std::string& path);

// A .safetensors file written one tensor at a time, so that its writer holds one tensor, not the file: the
// layout of every tensor first (the header is written from it), then each tensor's bytes in name order. The
// bytes are those write_safetensors writes for the same tensors and metadata; the file appears at `path`
// (atomically) on commit(), and not at all if the writer is destroyed before. Errors name `path` and the
// tensor: a tensor out of order or unknown, a dtype or shape other than its layout's, commit() before the last.
class SafetensorsWriter {
 public:
  SafetensorsWriter(const std::string& path, std::map<std::string, TensorLayout> layout,
                    const std::map<std::string, std::string>& metadata);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // The name write() expects next ("" when every tensor is written).
  std::string next_name() const;
  void write(const std::string& name, const Tensor& tensor);
  void commit();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace qgru
