#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "io_test_util.h"
#include "qgru/io/safetensors.h"

using io_test::as_bytes;
using io_test::check_error;
using qgru::DType;
using qgru::SafetensorsFile;
using qgru::Tensor;

namespace {

// A safetensors file from a header text (used as is, no padding) and a data buffer of `data_size` bytes.
std::vector<uint8_t> make_file(const std::string& header, size_t data_size) {
  std::string text;
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) text += static_cast<char>(static_cast<uint8_t>(length >> (8 * i)));
  text += header;
  for (size_t i = 0; i < data_size; ++i) text += static_cast<char>(static_cast<uint8_t>(i));
  return as_bytes(text);
}

// Both the in-memory parser and the file reader must refuse `bytes`, naming the source and every part.
void check_rejected(const std::vector<uint8_t>& bytes, const std::vector<std::string>& parts) {
  std::vector<std::string> memory_parts = parts;
  memory_parts.push_back("bad.safetensors: ");
  check_error([&] { qgru::parse_safetensors(bytes, "bad.safetensors"); }, memory_parts);
  io_test::Scratch scratch("st_reject");
  const std::string path = scratch.path("bad.safetensors");
  io_test::put_file(path, bytes);
  std::vector<std::string> file_parts = parts;
  file_parts.push_back(path + ": ");
  check_error([&] { qgru::read_safetensors(path); }, file_parts);
}

std::string entry(const std::string& dtype, const std::string& shape, uint64_t begin, uint64_t end) {
  return "{\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": [" + std::to_string(begin) + ", " +
         std::to_string(end) + "]}";
}

}  // namespace

TEST_CASE("safetensors round trip keeps every dtype bit for bit, and the metadata") {
  SafetensorsFile file;
  uint32_t seed = 1;
  for (DType dtype : io_test::all_dtypes()) {
    file.tensors[std::string("t_") + qgru::dtype_name(dtype)] = io_test::random_tensor(dtype, {3, 5}, seed++);
  }
  file.tensors["scalar"] = io_test::random_tensor(DType::F32, {}, seed++);
  file.tensors["empty"] = io_test::random_tensor(DType::I8, {0, 7}, seed++);
  file.tensors["odd"] = io_test::random_tensor(DType::U8, {1, 3, 1}, seed++);  // 3 bytes: later tensors unaligned
  file.metadata = {{"format", "pt"}, {"qgru", "é ünïcode"}};

  io_test::Scratch scratch("st_roundtrip");
  const std::string path = scratch.path("model.safetensors");
  qgru::write_safetensors(path, file);
  const std::vector<uint8_t> bytes = io_test::file_bytes(path);
  CHECK(bytes == qgru::serialize_safetensors(file));

  for (const SafetensorsFile& back : {qgru::read_safetensors(path), qgru::parse_safetensors(bytes, "memory")}) {
    CHECK(back.metadata == file.metadata);
    REQUIRE(back.tensors.size() == file.tensors.size());
    for (const auto& [name, tensor] : file.tensors) {
      const std::string& tensor_name = name;  // INFO needs a variable: C++17 lambdas cannot capture a binding (clang)
      INFO("tensor " << tensor_name);
      const Tensor& got = back.tensors.at(name);
      CHECK(got.dtype == tensor.dtype);
      CHECK(got.shape == tensor.shape);
      CHECK(got.bytes == tensor.bytes);
    }
  }
}

TEST_CASE("safetensors writer lays out the file as the format says: padded header, name order, contiguous") {
  SafetensorsFile file;
  file.tensors["b"] = io_test::random_tensor(DType::F32, {2}, 7);
  file.tensors["a"] = io_test::random_tensor(DType::I16, {3}, 8);
  file.tensors["c"] = io_test::random_tensor(DType::U8, {1}, 9);
  const std::vector<uint8_t> bytes = qgru::serialize_safetensors(file);
  uint64_t header_length = 0;
  for (int i = 0; i < 8; ++i) header_length |= uint64_t{bytes[i]} << (8 * i);
  CHECK(header_length % 8 == 0);
  REQUIRE(bytes.size() == 8 + header_length + 6 + 8 + 1);
  const std::string header(bytes.begin() + 8, bytes.begin() + 8 + static_cast<long>(header_length));
  const auto json = nlohmann::json::parse(header);
  CHECK_FALSE(json.contains("__metadata__"));  // omitted when empty
  CHECK(json.at("a").at("data_offsets") == nlohmann::json::array({0, 6}));
  CHECK(json.at("b").at("data_offsets") == nlohmann::json::array({6, 14}));
  CHECK(json.at("c").at("data_offsets") == nlohmann::json::array({14, 15}));
  CHECK(json.at("a").at("dtype") == "I16");
  CHECK(json.at("b").at("shape") == nlohmann::json::array({2}));
  const auto* data = bytes.data() + 8 + header_length;
  CHECK(std::equal(data, data + 6, file.tensors["a"].bytes.begin()));
  CHECK(std::equal(data + 6, data + 14, file.tensors["b"].bytes.begin()));
}

TEST_CASE("safetensors written by hand outside qgru reads back with the values it was made from") {
  const SafetensorsFile file = qgru::read_safetensors((io_test::data_dir() / "hand_made.safetensors").string());
  REQUIRE(file.tensors.size() == 3);
  for (const char* name : {"layer.weight", "layer.codes", "layer.bf16"}) {
    io_test::check_matches_fixture(file.tensors.at(name), std::string("hand_made.safetensors:") + name);
  }
  CHECK(nlohmann::json(file.metadata) == io_test::expected_fixtures().at("hand_made.safetensors:__metadata__"));
}

TEST_CASE("safetensors header padded with trailing spaces and an empty header object are accepted") {
  const auto padded = make_file("{\"a\": " + entry("F32", "[1]", 0, 4) + "}       ", 4);
  CHECK(qgru::parse_safetensors(padded, "padded").tensors.at("a").shape == std::vector<int64_t>{1});
  CHECK(qgru::parse_safetensors(make_file("{}", 0), "empty").tensors.empty());
  // Zero-size tensors may share an offset.
  const auto zeros = make_file("{\"a\": " + entry("F32", "[0]", 0, 0) + ", \"b\": " + entry("I8", "[2, 0]", 0, 0) + "}", 0);
  CHECK(qgru::parse_safetensors(zeros, "zeros").tensors.size() == 2);
}

TEST_CASE("safetensors refuses an empty or truncated file and a header longer than the file") {
  check_rejected({}, {"at least 8 bytes", "got a file of 0 bytes"});
  check_rejected({1, 0, 0}, {"at least 8 bytes", "got a file of 3 bytes"});
  auto whole = make_file("{\"a\": " + entry("F32", "[4]", 0, 16) + "}", 16);
  check_rejected(std::vector<uint8_t>(whole.begin(), whole.end() - 1), {"tensor 'a'", "within the data buffer of 15 bytes"});
  check_rejected(std::vector<uint8_t>(whole.begin(), whole.begin() + 20), {"header length", "longer than the file"});
  auto huge = make_file("{}", 0);
  huge[2] = 0x10;  // 0x100002 bytes: above the file, below the limit
  check_rejected(huge, {"header length 1048578", "longer than the file"});
  huge[3] = 0x10;  // 0x10100002 bytes: above the 100 MB limit
  check_rejected(huge, {"at most 100000000 bytes, got 269484034"});
}

TEST_CASE("safetensors refuses invalid JSON, a non-object header and invalid UTF-8") {
  check_rejected(make_file("{\"a\": ", 0), {"header: not valid JSON"});
  check_rejected(make_file("[1, 2]", 0), {"header: expected a JSON object"});
  check_rejected(make_file("{\"a\": 1} x", 0), {"header: not valid JSON"});
  check_rejected(make_file(std::string("{\"\xff\xfe\": ") + entry("F32", "[0]", 0, 0) + "}", 0), {"header: not valid JSON"});
  check_rejected(make_file("{\"a\": [1]}", 0), {"tensor 'a'", "expected an object with dtype, shape and data_offsets"});
  // Nesting deep enough to exhaust the stack of a recursive JSON library is refused before parsing.
  check_rejected(make_file("{\"a\": " + std::string(1000000, '[') + std::string(1000000, ']') + "}", 0), {"header: not valid JSON", "nested more than 128"});
  check_rejected(make_file("{\"a\": \"" + std::string(1000, '[') + "\"}", 0), {"tensor 'a'", "expected an object"});
  check_rejected(make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [0]}}", 0), {"tensor 'a'", "'data_offsets' field"});
}

TEST_CASE("safetensors refuses offsets out of range, reversed, overlapping, with gaps or leaving bytes over") {
  check_rejected(make_file("{\"a\": " + entry("F32", "[25]", 0, 100) + "}", 8), {"tensor 'a'", "within the data buffer of 8 bytes"});
  check_rejected(make_file("{\"a\": " + entry("F32", "[1]", 8, 4) + "}", 8), {"tensor 'a'", "begin <= end"});
  check_rejected(make_file("{\"a\": " + entry("F32", "[2]", 0, 8) + ", \"b\": " + entry("F32", "[2]", 4, 12) + "}", 12),
                 {"tensor 'b'", "expected to begin at 8", "overlap with tensor 'a'"});
  check_rejected(make_file("{\"a\": " + entry("F32", "[1]", 0, 4) + ", \"b\": " + entry("F32", "[1]", 8, 12) + "}", 12),
                 {"tensor 'b'", "expected to begin at 4", "gap of 4 bytes"});
  check_rejected(make_file("{\"a\": " + entry("F32", "[1]", 4, 8) + "}", 8), {"tensor 'a'", "begin at 0", "gap of 4 bytes"});
  check_rejected(make_file("{\"a\": " + entry("F32", "[1]", 0, 4) + "}", 8), {"cover all 8 bytes", "4 bytes after the last tensor"});
  check_rejected(make_file("{\"a\": " + entry("F32", "[1]", 0, 4) + ", \"b\": " + entry("F32", "[1]", 0, 4) + "}", 4),
                 {"tensor 'b'", "overlap with tensor 'a'"});
  check_rejected(make_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, -4]}}", 4), {"tensor 'a'", "data_offsets: expected non-negative integers"});
}

TEST_CASE("safetensors refuses a shape whose byte count differs from the offsets, absurd or negative shapes") {
  check_rejected(make_file("{\"a\": " + entry("F32", "[3]", 0, 8) + "}", 8),
                 {"tensor 'a'", "shape [3] of dtype F32", "span 12 bytes, got 8"});
  check_rejected(make_file("{\"w\": " + entry("BF16", "[2, 3]", 0, 6) + "}", 6), {"tensor 'w'", "span 12 bytes, got 6"});
  // Terabytes: refused from the offsets without allocating.
  check_rejected(make_file("{\"big\": " + entry("F32", "[1000000, 1000000, 1000000]", 0, 8) + "}", 8),
                 {"tensor 'big'", "span 4000000000000000000 bytes, got 8"});
  check_rejected(make_file("{\"big\": " + entry("F32", "[4294967296, 4294967296, 16]", 0, 8) + "}", 8),
                 {"tensor 'big'", "overflow"});
  check_rejected(make_file("{\"big\": " + entry("F64", "[4294967296, 1073741824]", 0, 8) + "}", 8),
                 {"tensor 'big'", "byte count that fits in 64 bits"});
  // A zero extent must not hide an int64 overflow of the others (2^32 * (2^32 - 1) fits in uint64_t only).
  check_rejected(make_file("{\"z\": " + entry("F32", "[4294967296, 4294967295, 0]", 0, 0) + "}", 0),
                 {"tensor 'z'", "overflow"});
  CHECK(qgru::parse_safetensors(make_file("{\"z\": " + entry("U8", "[4611686018427387904, 0]", 0, 0) + "}", 0), "x")
            .tensors.at("z")
            .numel() == 0);
  check_rejected(make_file("{\"a\": " + entry("F32", "[-1]", 0, 0) + "}", 0), {"tensor 'a'", "shape: expected non-negative integers"});
  check_rejected(make_file("{\"a\": " + entry("F32", "[1.5]", 0, 0) + "}", 0), {"tensor 'a'", "shape: expected non-negative integers"});
  check_rejected(make_file("{\"a\": " + entry("F32", "3", 0, 0) + "}", 0), {"tensor 'a'", "shape: expected an array"});
}

TEST_CASE("safetensors messages stay one line when a tensor name holds control characters") {
  check_rejected(make_file("{\"line\\none\": " + entry("BOOL", "[1]", 0, 1) + "}", 1), {"tensor 'line\\x0aone'", "BOOL"});
}

TEST_CASE("safetensors refuses dtypes qgru does not handle, naming the tensor and the dtype") {
  for (const char* dtype : {"BOOL", "F8_E4M3", "F8_E5M2", "U16", "U32", "U64", "C64", "f32", ""}) {
    check_rejected(make_file("{\"x\": " + entry(dtype, "[1]", 0, 1) + "}", 1),
                   {"tensor 'x'", std::string("dtype ") + dtype + " is not supported", "F64, F32, F16, BF16"});
  }
  check_rejected(make_file("{\"x\": {\"dtype\": 4, \"shape\": [], \"data_offsets\": [0, 4]}}", 4),
                 {"tensor 'x'", "dtype: expected a string"});
}

TEST_CASE("safetensors refuses duplicate tensor names and a malformed __metadata__") {
  check_rejected(make_file("{\"a\": " + entry("F32", "[1]", 0, 4) + ", \"a\": " + entry("F32", "[1]", 4, 8) + "}", 8),
                 {"header: not valid JSON", "key 'a' appears twice in one object at the top level"});
  check_rejected(make_file("{\"a\": {\"dtype\": \"F32\", \"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 4),
                 {"key 'dtype' appears twice in one object inside 'a'"});
  check_rejected(make_file("{\"__metadata__\": {}, \"__metadata__\": {}}", 0), {"header:", "'__metadata__' appears twice"});
  check_rejected(make_file("{\"__metadata__\": {\"k\": 1}}", 0), {"__metadata__", "key 'k'", "string value"});
  check_rejected(make_file("{\"__metadata__\": [\"k\"]}", 0), {"__metadata__", "object of string values"});
}

TEST_CASE("safetensors writer refuses inconsistent tensors and leaves no file behind") {
  io_test::Scratch scratch("st_write_reject");
  const std::string path = scratch.path("out.safetensors");
  SafetensorsFile file;
  Tensor broken = io_test::random_tensor(DType::F32, {2, 2}, 3);
  broken.bytes.pop_back();
  file.tensors["broken"] = broken;
  check_error([&] { qgru::write_safetensors(path, file); }, {path, "tensor 'broken'", "expects 16 bytes, got 15"});
  file.tensors.clear();
  file.tensors["__metadata__"] = io_test::random_tensor(DType::F32, {1}, 3);
  check_error([&] { qgru::write_safetensors(path, file); }, {path, "tensor '__metadata__'", "reserved"});
  CHECK(scratch.file_count() == 0);
}

TEST_CASE("safetensors writer replaces the target whole and leaves no temporary file") {
  io_test::Scratch scratch("st_replace");
  const std::string path = scratch.path("out.safetensors");
  SafetensorsFile large;
  large.tensors["a"] = io_test::random_tensor(DType::F64, {1000}, 4);
  qgru::write_safetensors(path, large);
  SafetensorsFile small;
  small.tensors["b"] = io_test::random_tensor(DType::I8, {3}, 5);
  qgru::write_safetensors(path, small);
  CHECK(io_test::file_bytes(path) == qgru::serialize_safetensors(small));
  CHECK(scratch.file_count() == 1);
  const SafetensorsFile back = qgru::read_safetensors(path);
  CHECK(back.tensors.size() == 1);
  CHECK(back.tensors.at("b").bytes == small.tensors.at("b").bytes);
}

TEST_CASE("safetensors reader says when it is given a NumPy file instead") {
  check_error([] { qgru::read_safetensors((io_test::data_dir() / "v1_f32.npy").string()); }, {"v1_f32.npy", "got a .npy file"});
  check_error([] { qgru::read_safetensors((io_test::data_dir() / "single.npz").string()); }, {"single.npz", "got a ZIP archive"});
}

TEST_CASE("safetensors reader names a missing file and a directory") {
  io_test::Scratch scratch("st_missing");
  check_error([&] { qgru::read_safetensors(scratch.path("none.safetensors")); }, {scratch.path("none.safetensors"), "cannot open"});
  check_error([&] { qgru::read_safetensors(scratch.dir.string()); }, {scratch.dir.string(), "directory"});
}
