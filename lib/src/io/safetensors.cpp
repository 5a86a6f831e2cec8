// safetensors reading (validated as the reference implementation validates) and writing.
#include "qgru/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <limits>
#include <set>

#include <nlohmann/json.hpp>

#include "byte_order.h"
#include "file_reader.h"
#include "qgru/base/message_text.h"
#include "qgru/io/strict_json.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"

namespace qgru {
namespace {

using nlohmann::json;
using io_detail::checked_mul;

// The reference implementation's bound on the header length.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadataKey = "__metadata__";
constexpr const char* kSupportedDtypes = "F64, F32, F16, BF16, I64, I32, I16, I8, U8";

struct Entry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets into the data buffer (after the 8 + N header bytes)
  uint64_t end = 0;
};

struct Layout {
  std::vector<Entry> entries;  // in data-offset order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N
};

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw Error(source + ": " + printable(what));
}
[[noreturn]] void fail_tensor(const std::string& source, const std::string& name, const std::string& what) {
  throw Error(source + ": tensor '" + printable(name) + "': " + printable(what));
}

// A short, one-line rendering of a JSON value for messages.
std::string brief(const json& value) {
  std::string text = value.dump(-1, ' ', true, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return std::string(value.type_name()) + " " + text;
}

// Reads the 8-byte header length and checks it against the limit and the file size.
uint64_t check_header_length(const uint8_t* prefix, uint64_t file_size, const std::string& source) {
  if (file_size < 8) {
    fail(source, "expected at least 8 bytes (the little-endian header length), got a file of " +
                     std::to_string(file_size) + " bytes");
  }
  const uint64_t header_bytes = io_detail::load_le64(prefix);
  if (std::memcmp(prefix, "\x93NUMPY", 6) == 0) fail(source, "expected a safetensors file, got a .npy file");
  if (std::memcmp(prefix, "PK\x03\x04", 4) == 0) fail(source, "expected a safetensors file, got a ZIP archive (.npz?)");
  if (header_bytes > kMaxHeaderBytes) {
    fail(source, "expected a header length of at most " + std::to_string(kMaxHeaderBytes) + " bytes, got " +
                     std::to_string(header_bytes));
  }
  if (header_bytes > file_size - 8) {
    fail(source, "header length " + std::to_string(header_bytes) + " is longer than the file, expected at most " +
                     std::to_string(file_size - 8) + " bytes after the length field");
  }
  return header_bytes;
}

std::map<std::string, std::string> parse_metadata(const json& value, const std::string& source) {
  if (!value.is_object()) fail(source, "__metadata__: expected an object of string values, got " + brief(value));
  std::map<std::string, std::string> metadata;
  for (const auto& [key, item] : value.items()) {
    if (!item.is_string()) {
      fail(source, "__metadata__: key '" + key + "': expected a string value, got " + brief(item));
    }
    metadata[key] = item.get<std::string>();
  }
  return metadata;
}

uint64_t json_unsigned(const json& value, const std::string& source, const std::string& name, const char* field) {
  if (!value.is_number_unsigned()) {
    fail_tensor(source, name, std::string(field) + ": expected non-negative integers, got " + brief(value));
  }
  return value.get<uint64_t>();
}

Entry parse_entry(const std::string& name, const json& value, uint64_t data_size, const std::string& source) {
  Entry entry;
  entry.name = name;
  if (!value.is_object()) {
    fail_tensor(source, name, "expected an object with dtype, shape and data_offsets, got " + brief(value));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) fail_tensor(source, name, std::string("expected a '") + field + "' field, got none");
  }
  const json& dtype = value.at("dtype");
  if (!dtype.is_string()) fail_tensor(source, name, "dtype: expected a string, got " + brief(dtype));
  if (!dtype_from_name(dtype.get<std::string>(), entry.dtype)) {
    fail_tensor(source, name, "dtype " + dtype.get<std::string>() + " is not supported, expected one of " +
                                  kSupportedDtypes);
  }

  const json& shape = value.at("shape");
  if (!shape.is_array()) fail_tensor(source, name, "shape: expected an array of non-negative integers, got " + brief(shape));
  // numel exactly (shape_numel_checked: the product of the non-zero extents must fit in int64, so a zero
  // extent cannot hide an overflow of the others), then the byte count in uint64_t with checked
  // multiplication: an overflowing product is refused, as the reference implementation does, before
  // anything is allocated.
  for (const json& extent_json : shape) {
    const uint64_t extent = json_unsigned(extent_json, source, name, "shape");
    if (extent > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail_tensor(source, name, "shape " + shape.dump() + ": expected a product of extents that fits in 64 bits, got an overflow");
    }
    entry.shape.push_back(static_cast<int64_t>(extent));
  }
  int64_t numel = 0;
  if (!shape_numel_checked(entry.shape, numel)) {
    fail_tensor(source, name, "shape " + shape.dump() + ": expected a product of extents that fits in 64 bits, got an overflow");
  }
  uint64_t byte_count = 0;
  if (!checked_mul(static_cast<uint64_t>(numel), dtype_size(entry.dtype), byte_count)) {
    fail_tensor(source, name, "shape " + shape.dump() + " of dtype " + dtype_name(entry.dtype) +
                                  ": expected a byte count that fits in 64 bits, got an overflow");
  }

  const json& offsets = value.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2) {
    fail_tensor(source, name, "data_offsets: expected [begin, end], got " + brief(offsets));
  }
  entry.begin = json_unsigned(offsets[0], source, name, "data_offsets");
  entry.end = json_unsigned(offsets[1], source, name, "data_offsets");
  if (entry.begin > entry.end) {
    fail_tensor(source, name, "data_offsets: expected begin <= end, got [" + std::to_string(entry.begin) + ", " +
                                  std::to_string(entry.end) + "]");
  }
  if (entry.end > data_size) {
    fail_tensor(source, name, "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                                  "]: expected to lie within the data buffer of " + std::to_string(data_size) +
                                  " bytes, got an end beyond it");
  }
  if (entry.end - entry.begin != byte_count) {
    fail_tensor(source, name, "shape " + shape_string(entry.shape) + " of dtype " + dtype_name(entry.dtype) +
                                  ": expected data_offsets to span " + std::to_string(byte_count) + " bytes, got " +
                                  std::to_string(entry.end - entry.begin));
  }
  return entry;
}

// Validates the header (N bytes of JSON at `header_text`) against a data buffer of `data_size` bytes.
Layout parse_layout(const uint8_t* header_text, uint64_t header_bytes, uint64_t data_size, const std::string& source) {
  if (header_bytes == 0 || header_text[0] != '{') {
    fail(source, "header: expected a JSON object starting with '{', got " +
                     (header_bytes == 0 ? std::string("an empty header") : "byte " + std::to_string(header_text[0])));
  }
  const char* begin = reinterpret_cast<const char*>(header_text);
  const json header = parse_strict_json(begin, begin + header_bytes, source + ": header");
  if (!header.is_object()) fail(source, "header: expected a JSON object, got " + brief(header));

  Layout layout;
  layout.data_start = 8 + header_bytes;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      layout.metadata = parse_metadata(value, source);
    } else {
      layout.entries.push_back(parse_entry(name, value, data_size, source));
    }
  }
  // The buffer must be exactly the concatenation of the tensors: sorted by offset, each begins where the
  // previous ends, and the last ends at the end of the buffer.
  std::sort(layout.entries.begin(), layout.entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected_begin = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : layout.entries) {
    if (entry.begin < expected_begin) {
      fail_tensor(source, entry.name, "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                                          "]: expected to begin at " + std::to_string(expected_begin) +
                                          ", got an overlap with tensor '" + previous->name + "'");
    }
    if (entry.begin > expected_begin) {
      fail_tensor(source, entry.name, "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                                          "]: expected to begin at " + std::to_string(expected_begin) + ", got a gap of " +
                                          std::to_string(entry.begin - expected_begin) + " bytes");
    }
    expected_begin = entry.end;
    previous = &entry;
  }
  if (expected_begin != data_size) {
    fail(source, "data buffer: expected the tensors to cover all " + std::to_string(data_size) + " bytes, got " +
                     std::to_string(data_size - expected_begin) + " bytes after the last tensor");
  }
  return layout;
}

void check_tensor_for_writing(const std::string& name, const Tensor& tensor, const std::string& target) {
  if (name == kMetadataKey) fail_tensor(target, name, "expected a tensor name, got the reserved key");
  for (int64_t extent : tensor.shape) {
    if (extent < 0) {
      fail_tensor(target, name, "expected non-negative extents, got shape " + shape_string(tensor.shape));
    }
  }
  const uint64_t expected = static_cast<uint64_t>(tensor.numel()) * dtype_size(tensor.dtype);
  if (tensor.bytes.size() != expected) {
    fail_tensor(target, name, "shape " + shape_string(tensor.shape) + " of dtype " + dtype_name(tensor.dtype) +
                                  " expects " + std::to_string(expected) + " bytes, got " +
                                  std::to_string(tensor.bytes.size()));
  }
}

// Bytes of a tensor of this layout, or fail naming it (negative extents, a size past 2^64).
uint64_t layout_bytes(const std::string& name, const TensorLayout& layout, const std::string& target) {
  if (name == kMetadataKey) fail_tensor(target, name, "expected a tensor name, got the reserved key");
  uint64_t bytes = dtype_size(layout.dtype);
  for (int64_t extent : layout.shape) {
    if (extent < 0) fail_tensor(target, name, "expected non-negative extents, got shape " + shape_string(layout.shape));
    if (!checked_mul(bytes, static_cast<uint64_t>(extent), bytes)) {
      fail_tensor(target, name, "shape " + shape_string(layout.shape) + " holds more than 2^64 bytes");
    }
  }
  return bytes;
}

// The 8-byte length and the JSON header of tensors of `layout` in name order, padded with spaces so that the
// data starts at a multiple of 8. `target` names the output in messages.
std::vector<uint8_t> serialize_layout_header(const std::map<std::string, TensorLayout>& layout,
                                             const std::map<std::string, std::string>& metadata,
                                             const std::string& target) {
  json header = json::object();
  uint64_t offset = 0;
  for (const auto& [name, entry] : layout) {  // std::map: name order
    const uint64_t end = offset + layout_bytes(name, entry, target);
    header[name] = {{"dtype", dtype_name(entry.dtype)}, {"shape", entry.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump(-1, ' ', false, json::error_handler_t::strict);
  } catch (const json::exception& e) {
    fail(target, std::string("expected UTF-8 tensor names and metadata, got ") + e.what());
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<uint8_t> out;
  out.reserve(8 + text.size());
  io_detail::append_le64(out, text.size());
  out.insert(out.end(), text.begin(), text.end());
  return out;
}

std::vector<uint8_t> serialize_header(const SafetensorsFile& file, const std::string& target) {
  std::map<std::string, TensorLayout> layout;
  for (const auto& [name, tensor] : file.tensors) {
    check_tensor_for_writing(name, tensor, target);
    layout[name] = {tensor.dtype, tensor.shape};
  }
  return serialize_layout_header(layout, file.metadata, target);
}

}  // namespace

SafetensorsFile parse_safetensors(const std::vector<uint8_t>& bytes, const std::string& source_name) {
  const uint64_t header_bytes = check_header_length(bytes.data(), bytes.size(), source_name);
  const uint64_t data_size = bytes.size() - 8 - header_bytes;
  const Layout layout = parse_layout(bytes.data() + 8, header_bytes, data_size, source_name);
  SafetensorsFile file;
  file.metadata = layout.metadata;
  for (const Entry& entry : layout.entries) {
    Tensor tensor;
    tensor.dtype = entry.dtype;
    tensor.shape = entry.shape;
    const auto* first = bytes.data() + layout.data_start + entry.begin;
    tensor.bytes.assign(first, first + (entry.end - entry.begin));
    file.tensors.emplace(entry.name, std::move(tensor));
  }
  return file;
}

namespace {
// The header of the file `reader` reads, checked (the length, then parse_layout).
Layout read_layout(io_detail::FileReader& reader, const std::string& path) {
  uint8_t prefix[8] = {};
  if (reader.size() >= 8) reader.read_at(0, prefix, 8, "header length");
  const uint64_t header_bytes = check_header_length(prefix, reader.size(), path);
  std::vector<uint8_t> header(header_bytes);
  reader.read_at(8, header.data(), header_bytes, "header");
  return parse_layout(header.data(), header_bytes, reader.size() - 8 - header_bytes, path);
}
}  // namespace

SafetensorsFile read_safetensors(const std::string& path) {
  io_detail::FileReader reader(path);
  const Layout layout = read_layout(reader, path);
  SafetensorsFile file;
  file.metadata = layout.metadata;
  for (const Entry& entry : layout.entries) {
    Tensor tensor;
    tensor.dtype = entry.dtype;
    tensor.shape = entry.shape;
    // Size validated against the file above, so this allocation is bounded by the file size.
    tensor.bytes.resize(entry.end - entry.begin);
    reader.read_at(layout.data_start + entry.begin, tensor.bytes.data(), tensor.bytes.size(), "tensor data");
    file.tensors.emplace(entry.name, std::move(tensor));
  }
  return file;
}

std::vector<uint8_t> serialize_safetensors(const SafetensorsFile& file) {
  std::vector<uint8_t> out = serialize_header(file, "safetensors output");
  for (const auto& [name, tensor] : file.tensors) out.insert(out.end(), tensor.bytes.begin(), tensor.bytes.end());
  return out;
}

void write_safetensors(const std::string& path, const SafetensorsFile& file) {
  const std::vector<uint8_t> header = serialize_header(file, path);
  AtomicFile out(path);
  out.write(header.data(), header.size());
  for (const auto& [name, tensor] : file.tensors) out.write(tensor.bytes.data(), tensor.bytes.size());
  out.commit();
}

std::map<std::string, TensorLayout> read_safetensors_layout(const std::string& path) {
  io_detail::FileReader reader(path);
  const Layout layout = read_layout(reader, path);
  std::map<std::string, TensorLayout> tensors;
  for (const Entry& entry : layout.entries) tensors[entry.name] = {entry.dtype, entry.shape};
  return tensors;
}

struct SafetensorsWriter::State {
  std::string path;
  std::map<std::string, TensorLayout> layout;
  std::map<std::string, TensorLayout>::const_iterator next;
  AtomicFile file;
  State(const std::string& target, std::map<std::string, TensorLayout> tensors)
      : path(target), layout(std::move(tensors)), next(layout.begin()), file(target) {}
};

SafetensorsWriter::SafetensorsWriter(const std::string& path, std::map<std::string, TensorLayout> layout,
                                     const std::map<std::string, std::string>& metadata) {
  const std::vector<uint8_t> header = serialize_layout_header(layout, metadata, path);  // checked before any file
  state_ = std::make_unique<State>(path, std::move(layout));
  state_->file.write(header.data(), header.size());
}

SafetensorsWriter::~SafetensorsWriter() = default;  // an uncommitted AtomicFile removes its temporary

std::string SafetensorsWriter::next_name() const {
  return state_->next == state_->layout.end() ? std::string() : state_->next->first;
}

void SafetensorsWriter::write(const std::string& name, const Tensor& tensor) {
  State& state = *state_;
  if (state.next == state.layout.end() || state.next->first != name) {
    const bool known = state.layout.count(name) != 0;
    fail_tensor(state.path, name,
                known ? "written out of order; expected '" + printable(next_name()) + "' next (tensors go in name order)"
                      : "not in the layout the file was started with");
  }
  const TensorLayout& expected = state.next->second;
  if (tensor.dtype != expected.dtype || tensor.shape != expected.shape) {
    fail_tensor(state.path, name, "expected " + std::string(dtype_name(expected.dtype)) + " " +
                                      shape_string(expected.shape) + " as laid out, got " + dtype_name(tensor.dtype) +
                                      " " + shape_string(tensor.shape));
  }
  check_tensor_for_writing(name, tensor, state.path);
  state.file.write(tensor.bytes.data(), tensor.bytes.size());
  ++state.next;
}

void SafetensorsWriter::commit() {
  if (state_->next != state_->layout.end()) {
    fail_tensor(state_->path, state_->next->first, "not written; every tensor of the layout must be written before commit");
  }
  state_->file.commit();
}

}  // namespace qgru
