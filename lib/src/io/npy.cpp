// NumPy .npy: the header dict parser, the reader shared with .npz, and the writer.
#include "qgru/io/npy.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "byte_order.h"
#include "file_reader.h"
#include "qgru/base/message_text.h"
#include "npy_detail.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"

namespace qgru {
namespace io_detail {
namespace {

constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
// Headers of the plain dtypes qgru reads are under 200 bytes; a larger bound only admits abuse.
constexpr uint64_t kMaxHeaderBytes = 1 << 20;
constexpr const char* kSupportedDescrs = "<f8, <f4, <f2, <i8, <i4, <i2, |i1, |u1";

[[noreturn]] void fail(const std::string& source, const std::string& what) {
  throw Error(source + ": " + printable(what));
}

const char* descr_of(DType dtype) {
  switch (dtype) {
    case DType::F64: return "<f8";
    case DType::F32: return "<f4";
    case DType::F16: return "<f2";
    case DType::I64: return "<i8";
    case DType::I32: return "<i4";
    case DType::I16: return "<i2";
    case DType::I8: return "|i1";
    case DType::U8: return "|u1";
    case DType::BF16: return nullptr;  // NumPy has no bfloat16
  }
  return nullptr;
}

DType dtype_of_descr(const std::string& descr, const std::string& source) {
  static const std::pair<const char*, DType> kDescrs[] = {
      {"<f8", DType::F64}, {"<f4", DType::F32}, {"<f2", DType::F16}, {"<i8", DType::I64}, {"<i4", DType::I32},
      {"<i2", DType::I16}, {"|i1", DType::I8},  {"<i1", DType::I8},  {"|u1", DType::U8},  {"<u1", DType::U8}};
  for (const auto& [text, dtype] : kDescrs) {
    if (descr == text) return dtype;
  }
  if (descr.size() >= 2 && descr[0] == '>') {
    fail(source, "expected a little-endian dtype, got big-endian '" + descr +
                     "' (save arr.astype(arr.dtype.newbyteorder('<')))");
  }
  if (descr.size() >= 2 && descr[1] == 'b') {
    fail(source, "expected one of the dtypes " + std::string(kSupportedDescrs) + ", got bool '" + descr +
                     "' (save it as uint8)");
  }
  fail(source, "expected one of the dtypes " + std::string(kSupportedDescrs) + ", got '" + descr + "'");
}

// A strict parser for the one Python literal NumPy writes as the header:
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// Values are a string, True/False, or a tuple of non-negative decimal integers ("(3,)" for one extent).
class HeaderParser {
 public:
  HeaderParser(std::string text, std::string source) : text_(std::move(text)), source_(std::move(source)) {}

  void parse(DType& dtype, std::vector<int64_t>& shape) {
    bool have_descr = false, have_order = false, have_shape = false;
    bool fortran_order = false;
    std::string descr;
    skip_space();
    expect('{');
    skip_space();
    while (!at('}')) {
      const std::string key = parse_string("a key");
      skip_space();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (have_descr) fail_header("expected the key 'descr' once, got it twice");
        if (at('[')) fail_header("expected a plain dtype string as 'descr', got a structured dtype");
        descr = parse_string("a dtype string as 'descr'");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_order) fail_header("expected the key 'fortran_order' once, got it twice");
        fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        if (have_shape) fail_header("expected the key 'shape' once, got it twice");
        shape = parse_shape();
        have_shape = true;
      } else {
        fail_header("expected only the keys 'descr', 'fortran_order' and 'shape', got '" + key + "'");
      }
      skip_space();
      if (!consume(',')) break;
      skip_space();
    }
    expect('}');
    skip_space();
    if (pos_ != text_.size()) fail_header("expected the header to end after '}', got more text at byte " + std::to_string(pos_));
    if (!have_descr) fail_header("expected the key 'descr', got none");
    if (!have_order) fail_header("expected the key 'fortran_order', got none");
    if (!have_shape) fail_header("expected the key 'shape', got none");
    dtype = dtype_of_descr(descr, source_);
    if (fortran_order) {
      fail(source_, "expected C order (fortran_order False), got a Fortran-order array (save np.ascontiguousarray(arr))");
    }
  }

 private:
  [[noreturn]] void fail_header(const std::string& what) const { fail(source_, "header: " + what); }
  bool at(char c) const { return pos_ < text_.size() && text_[pos_] == c; }
  bool consume(char c) {
    if (!at(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c) {
    if (!consume(c)) {
      fail_header(std::string("expected '") + c + "' at byte " + std::to_string(pos_) + ", got " +
                  (pos_ < text_.size() ? "'" + std::string(1, text_[pos_]) + "'" : std::string("the end")));
    }
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) ++pos_;
  }
  std::string parse_string(const char* what) {
    if (!at('\'') && !at('"')) fail_header(std::string("expected ") + what + " at byte " + std::to_string(pos_));
    const char quote = text_[pos_++];
    std::string value;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      if (text_[pos_] == '\\' || text_[pos_] == '\n') fail_header("expected a plain string literal, got an escape or newline");
      value += text_[pos_++];
    }
    if (!consume(quote)) fail_header("expected a closing quote, got the end of the header");
    return value;
  }
  bool parse_bool() {
    for (const auto& [word, value] : {std::pair<const char*, bool>{"True", true}, {"False", false}}) {
      const size_t length = std::strlen(word);
      if (text_.compare(pos_, length, word) == 0) {
        pos_ += length;
        return value;
      }
    }
    fail_header("expected True or False as 'fortran_order' at byte " + std::to_string(pos_));
  }
  int64_t parse_extent() {
    const size_t start = pos_;
    uint64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      // value * 10 + digit in uint64_t; refused as soon as it passes INT64_MAX, so it cannot wrap.
      value = value * 10 + static_cast<uint64_t>(text_[pos_] - '0');
      if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail_header("expected shape extents that fit in 64 bits, got a larger one at byte " + std::to_string(start));
      }
      ++pos_;
    }
    if (pos_ == start) fail_header("expected a non-negative integer in 'shape' at byte " + std::to_string(start));
    if (pos_ - start > 1 && text_[start] == '0') fail_header("expected a decimal integer in 'shape', got a leading zero");
    consume('L');  // Python 2 long suffix, as NumPy itself accepts in old files
    return static_cast<int64_t>(value);
  }
  std::vector<int64_t> parse_shape() {
    std::vector<int64_t> shape;
    expect('(');
    skip_space();
    bool trailing_comma = false;
    while (!at(')')) {
      shape.push_back(parse_extent());
      skip_space();
      trailing_comma = consume(',');
      if (!trailing_comma) break;
      skip_space();
    }
    expect(')');
    if (shape.size() == 1 && !trailing_comma) fail_header("expected a tuple as 'shape', got a parenthesized integer (write (n,))");
    return shape;
  }

  std::string text_;
  std::string source_;
  size_t pos_ = 0;
};

std::string hex_bytes(const uint8_t* bytes, size_t count) {
  static const char kHex[] = "0123456789abcdef";
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    text += "\\x";
    text += kHex[bytes[i] >> 4];
    text += kHex[bytes[i] & 0xF];
  }
  return text;
}

}  // namespace

Tensor read_npy_bytes(const ReadAt& read_at, uint64_t total_size, const std::string& source) {
  if (total_size == 0) fail(source, "expected a .npy array, got an empty file");
  uint8_t preamble[12] = {};
  if (total_size < 10) {
    read_at(0, preamble, total_size);
    if (std::memcmp(preamble, kMagic, std::min<uint64_t>(total_size, 6)) != 0) {
      fail(source, "expected the .npy magic \\x93NUMPY, got " + hex_bytes(preamble, std::min<size_t>(total_size, 6)));
    }
    fail(source, "expected at least 10 bytes of .npy preamble, got a file of " + std::to_string(total_size) + " bytes");
  }
  read_at(0, preamble, 8);
  if (std::memcmp(preamble, kMagic, 6) != 0) fail(source, "expected the .npy magic \\x93NUMPY, got " + hex_bytes(preamble, 6));
  const int major = preamble[6], minor = preamble[7];
  if (!((major == 1 || major == 2 || major == 3) && minor == 0)) {
    fail(source, "expected .npy format version 1.0, 2.0 or 3.0, got " + std::to_string(major) + "." + std::to_string(minor));
  }
  // Version 1.0 stores the header length in 2 bytes, 2.0 and 3.0 (3.0: UTF-8 header) in 4.
  const uint64_t length_bytes = major == 1 ? 2 : 4;
  const uint64_t preamble_bytes = 8 + length_bytes;
  if (total_size < preamble_bytes) {
    fail(source, "expected " + std::to_string(preamble_bytes) + " bytes of .npy preamble, got a file of " +
                     std::to_string(total_size) + " bytes");
  }
  read_at(8, preamble + 8, length_bytes);
  const uint64_t header_bytes = major == 1 ? load_le16(preamble + 8) : load_le32(preamble + 8);
  if (header_bytes > kMaxHeaderBytes) {
    fail(source, "expected a header of at most " + std::to_string(kMaxHeaderBytes) + " bytes, got " + std::to_string(header_bytes));
  }
  if (header_bytes > total_size - preamble_bytes) {
    fail(source, "header length " + std::to_string(header_bytes) + " is longer than the file (truncated?), expected at most " +
                     std::to_string(total_size - preamble_bytes));
  }
  std::string header(header_bytes, '\0');
  read_at(preamble_bytes, header.data(), header_bytes);

  Tensor tensor;
  HeaderParser(header, source).parse(tensor.dtype, tensor.shape);

  // numel exactly (shape_numel_checked: the product of the non-zero extents must fit in int64, as NumPy asks,
  // so a zero extent cannot hide an overflow of the others), then the byte count in uint64_t with checked
  // multiplication, compared with the bytes present before anything is allocated.
  int64_t numel = 0;
  if (!shape_numel_checked(tensor.shape, numel)) {
    fail(source, "shape " + shape_string(tensor.shape) +
                     ": expected a product of the non-zero extents that fits in 64 bits (int64), got an overflow");
  }
  uint64_t data_bytes = 0;
  if (!checked_mul(static_cast<uint64_t>(numel), dtype_size(tensor.dtype), data_bytes)) {
    fail(source, "shape " + shape_string(tensor.shape) + ": expected a byte count that fits in 64 bits, got an overflow");
  }
  const uint64_t data_offset = preamble_bytes + header_bytes;
  const uint64_t present = total_size - data_offset;
  if (present != data_bytes) {
    fail(source, "shape " + shape_string(tensor.shape) + " of dtype " + dtype_name(tensor.dtype) + ": expected " +
                     std::to_string(data_bytes) + " data bytes, got " + std::to_string(present) +
                     (present < data_bytes ? " (truncated file)" : " (trailing bytes)"));
  }
  tensor.bytes.resize(data_bytes);
  read_at(data_offset, tensor.bytes.data(), data_bytes);
  return tensor;
}

std::vector<uint8_t> npy_header_bytes(const Tensor& tensor, const std::string& target) {
  const char* descr = descr_of(tensor.dtype);
  if (descr == nullptr) {
    fail(target, std::string("expected a dtype .npy can hold, got ") + dtype_name(tensor.dtype) +
                     " (NumPy has no bfloat16; convert to F32)");
  }
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape.size(); ++i) {
    if (tensor.shape[i] < 0) fail(target, "expected non-negative extents, got shape " + shape_string(tensor.shape));
    if (i) shape += ", ";
    shape += std::to_string(tensor.shape[i]);
  }
  shape += tensor.shape.size() == 1 ? ",)" : ")";
  const uint64_t expected = static_cast<uint64_t>(tensor.numel()) * dtype_size(tensor.dtype);
  if (tensor.bytes.size() != expected) {
    fail(target, "shape " + shape_string(tensor.shape) + " of dtype " + dtype_name(tensor.dtype) + " expects " +
                     std::to_string(expected) + " bytes, got " + std::to_string(tensor.bytes.size()));
  }
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  // NumPy pads with spaces and a final newline so that the data starts at a multiple of 64 bytes.
  const bool version1 = dict.size() + 1 + 10 + 63 <= 0xFFFF;
  const size_t preamble_bytes = version1 ? 10 : 12;
  dict.append((64 - (preamble_bytes + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + 6);
  out.push_back(version1 ? 1 : 2);
  out.push_back(0);
  if (version1) {
    append_le16(out, static_cast<uint16_t>(dict.size()));
  } else {
    append_le32(out, static_cast<uint32_t>(dict.size()));
  }
  out.insert(out.end(), dict.begin(), dict.end());
  return out;
}

}  // namespace io_detail

Tensor parse_npy(const std::vector<uint8_t>& bytes, const std::string& source_name) {
  return io_detail::read_npy_bytes(
      [&](uint64_t offset, void* out, uint64_t size) {
        if (size > 0) std::memcpy(out, bytes.data() + offset, size);  // ranges checked by the reader
      },
      bytes.size(), source_name);
}

Tensor read_npy(const std::string& path) {
  io_detail::FileReader reader(path);
  return io_detail::read_npy_bytes(
      [&](uint64_t offset, void* out, uint64_t size) { reader.read_at(offset, out, size, "array"); }, reader.size(),
      path);
}

std::vector<uint8_t> serialize_npy(const Tensor& tensor) {
  std::vector<uint8_t> out = io_detail::npy_header_bytes(tensor, "npy output");
  out.insert(out.end(), tensor.bytes.begin(), tensor.bytes.end());
  return out;
}

void write_npy(const std::string& path, const Tensor& tensor) {
  const std::vector<uint8_t> header = io_detail::npy_header_bytes(tensor, path);
  AtomicFile out(path);
  out.write(header.data(), header.size());
  out.write(tensor.bytes.data(), tensor.bytes.size());
  out.commit();
}

}  // namespace qgru
