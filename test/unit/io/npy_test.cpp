#include <doctest/doctest.h>

#include <cstring>

#include "io_test_util.h"
#include "qgru/io/npy.h"

using io_test::as_bytes;
using io_test::check_error;
using qgru::DType;
using qgru::Tensor;

namespace {

std::string fixture(const std::string& name) { return (io_test::data_dir() / name).string(); }

// An .npy of the given version with `dict` as its header text (used as is) and `data_size` data bytes.
std::vector<uint8_t> make_npy(int major, const std::string& dict, size_t data_size) {
  std::string text = "\x93NUMPY";
  text += static_cast<char>(major);
  text += '\0';
  const size_t length = dict.size();
  for (int i = 0; i < (major == 1 ? 2 : 4); ++i) text += static_cast<char>(static_cast<uint8_t>(length >> (8 * i)));
  text += dict;
  text.append(data_size, '\x5a');
  return as_bytes(text);
}

// The in-memory parser and the file reader must both refuse `bytes`, naming the source and every part.
void check_rejected(const std::vector<uint8_t>& bytes, const std::vector<std::string>& parts) {
  std::vector<std::string> memory_parts = parts;
  memory_parts.push_back("bad.npy: ");
  check_error([&] { qgru::parse_npy(bytes, "bad.npy"); }, memory_parts);
  io_test::Scratch scratch("npy_reject");
  const std::string path = scratch.path("bad.npy");
  io_test::put_file(path, bytes);
  std::vector<std::string> file_parts = parts;
  file_parts.push_back(path + ": ");
  check_error([&] { qgru::read_npy(path); }, file_parts);
}

}  // namespace

TEST_CASE("npy written by NumPy (format 1.0, 2.0, 3.0, fp16 edge values, 0-d) reads back exactly") {
  for (const char* name : {"v1_f32.npy", "v2_i16.npy", "v3_i64.npy", "f16.npy", "scalar_f64.npy"}) {
    io_test::check_matches_fixture(qgru::read_npy(fixture(name)), name);
    io_test::check_matches_fixture(qgru::parse_npy(io_test::file_bytes(fixture(name)), name), name);
    io_test::check_matches_fixture(qgru::read_array(fixture(name)), name);
  }
}

TEST_CASE("npy round trip keeps every dtype NumPy has bit for bit, in every rank") {
  io_test::Scratch scratch("npy_roundtrip");
  uint32_t seed = 10;
  for (DType dtype : io_test::all_dtypes()) {
    if (dtype == DType::BF16) continue;  // NumPy has no bfloat16: refused, tested below
    for (const std::vector<int64_t>& shape : std::vector<std::vector<int64_t>>{{}, {7}, {2, 3}, {2, 1, 3}, {0, 4}}) {
      const Tensor tensor = io_test::random_tensor(dtype, shape, seed++);
      const std::string path = scratch.path("a.npy");
      qgru::write_npy(path, tensor);
      const std::vector<uint8_t> bytes = io_test::file_bytes(path);
      CHECK(bytes == qgru::serialize_npy(tensor));
      for (const Tensor& back : {qgru::read_npy(path), qgru::parse_npy(bytes, "memory")}) {
        INFO(qgru::dtype_name(dtype) << " " << qgru::shape_string(shape));
        CHECK(back.dtype == dtype);
        CHECK(back.shape == shape);
        CHECK(back.bytes == tensor.bytes);
      }
    }
  }
  CHECK(scratch.file_count() == 1);
}

TEST_CASE("npy writer emits NumPy's own header: version 1.0, dict text, 64-byte aligned data") {
  const Tensor tensor = io_test::random_tensor(DType::F32, {2, 3}, 1);
  const std::vector<uint8_t> bytes = qgru::serialize_npy(tensor);
  REQUIRE(bytes.size() > 10);
  CHECK(std::memcmp(bytes.data(), "\x93NUMPY\x01\x00", 8) == 0);
  const size_t header_length = bytes[8] | (bytes[9] << 8);
  CHECK((10 + header_length) % 64 == 0);
  const std::string header(bytes.begin() + 10, bytes.begin() + 10 + static_cast<long>(header_length));
  CHECK(header.rfind("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 0) == 0);
  CHECK(header.back() == '\n');
  CHECK(bytes.size() == 10 + header_length + 24);
  // The same header NumPy 1.24 writes for this array (v1_f32.npy is a float32 [2, 3]).
  const std::vector<uint8_t> numpy_file = io_test::file_bytes(fixture("v1_f32.npy"));
  CHECK(std::equal(bytes.begin(), bytes.begin() + 10 + static_cast<long>(header_length), numpy_file.begin()));
  const std::string one_d(reinterpret_cast<const char*>(qgru::serialize_npy(io_test::random_tensor(DType::U8, {5}, 2)).data()), 70);
  CHECK(one_d.find("{'descr': '|u1', 'fortran_order': False, 'shape': (5,), }") != std::string::npos);
  const std::string zero_d(reinterpret_cast<const char*>(qgru::serialize_npy(io_test::random_tensor(DType::I8, {}, 2)).data()), 70);
  CHECK(zero_d.find("'shape': (), }") != std::string::npos);
}

TEST_CASE("npy writer refuses bfloat16 and leaves the existing target untouched") {
  io_test::Scratch scratch("npy_bf16");
  const std::string path = scratch.path("out.npy");
  const Tensor before = io_test::random_tensor(DType::F32, {3}, 3);
  qgru::write_npy(path, before);
  check_error([&] { qgru::write_npy(path, io_test::random_tensor(DType::BF16, {3}, 4)); }, {path, "BF16", "bfloat16"});
  CHECK(qgru::read_npy(path).bytes == before.bytes);
  CHECK(scratch.file_count() == 1);
}

TEST_CASE("npy writer replaces the target whole and leaves no temporary file") {
  io_test::Scratch scratch("npy_replace");
  const std::string path = scratch.path("out.npy");
  qgru::write_npy(path, io_test::random_tensor(DType::F64, {500}, 5));
  const Tensor small = io_test::random_tensor(DType::I16, {2}, 6);
  qgru::write_npy(path, small);
  CHECK(io_test::file_bytes(path) == qgru::serialize_npy(small));
  CHECK(scratch.file_count() == 1);
}

TEST_CASE("npy refuses NumPy files in layouts qgru cannot take: Fortran order, big-endian, bool, uint16") {
  check_error([] { qgru::read_npy(fixture("fortran.npy")); }, {fixture("fortran.npy"), "Fortran-order", "fortran_order False"});
  check_error([] { qgru::read_npy(fixture("bigendian.npy")); }, {fixture("bigendian.npy"), "big-endian '>f4'", "little-endian"});
  check_error([] { qgru::read_npy(fixture("bool.npy")); }, {fixture("bool.npy"), "bool '|b1'", "uint8"});
  check_error([] { qgru::read_npy(fixture("uint16.npy")); }, {fixture("uint16.npy"), "got '<u2'", "<f8, <f4"});
}

TEST_CASE("npy refuses an empty file, bad magic, unsupported versions and short preambles") {
  check_rejected({}, {"empty file"});
  check_rejected(as_bytes("\x93NUM"), {"got a file of 4 bytes"});
  check_rejected(as_bytes("\x93NUMPX\x01\x00\x10\x00{}"), {"magic \\x93NUMPY", "\\x93\\x4e\\x55\\x4d\\x50\\x58"});
  check_rejected(as_bytes("PK\x03\x04 not an npy file"), {"magic \\x93NUMPY"});
  auto v4 = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4);
  v4[6] = 4;
  check_rejected(v4, {"version 1.0, 2.0 or 3.0, got 4.0"});
  v4[6] = 2;
  v4[7] = 1;
  check_rejected(v4, {"got 2.1"});
  check_rejected(as_bytes(std::string("\x93NUMPY\x02\x00\x01\x00", 10)), {"expected 12 bytes of .npy preamble"});
}

TEST_CASE("npy refuses a truncated file, trailing bytes and a header longer than the file") {
  const std::vector<uint8_t> good = io_test::file_bytes(fixture("v1_f32.npy"));
  check_rejected(std::vector<uint8_t>(good.begin(), good.end() - 1), {"shape [2, 3] of dtype F32", "expected 24 data bytes, got 23", "truncated"});
  check_rejected(std::vector<uint8_t>(good.begin(), good.begin() + 128), {"expected 24 data bytes, got 0"});
  check_rejected(std::vector<uint8_t>(good.begin(), good.begin() + 40), {"header length 118 is longer than the file"});
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  check_rejected(longer, {"expected 24 data bytes, got 25", "trailing"});
}

TEST_CASE("npy refuses an absurd shape from the byte count, before allocating") {
  check_rejected(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000, 1000000, 1000000), }", 8),
                 {"expected 4000000000000000000 data bytes, got 8"});
  check_rejected(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 2), }", 8),
                 {"overflow"});
  check_rejected(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 8),
                 {"fit in 64 bits"});
}

TEST_CASE("npy refuses a shape whose zero extent hides an int64 overflow of the others, as NumPy does") {
  // 2^32 * (2^32 - 1) fits in uint64_t but not in int64; the zero makes the data empty. Accepted, numel()
  // would overflow int64 later.
  check_rejected(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967295, 0), }", 0),
                 {"shape [4294967296, 4294967295, 0]", "non-zero extents", "overflow"});
  check_rejected(make_npy(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (0, 9223372036854775807, 2), }", 0),
                 {"overflow"});
  // A zero extent beside extents whose product fits is an ordinary empty array.
  const Tensor empty =
      qgru::parse_npy(make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 0), }", 0), "x");
  CHECK(empty.numel() == 0);
  CHECK(empty.bytes.empty());
}

TEST_CASE("npy header dict is parsed strictly") {
  const std::string tail = " 'fortran_order': False, 'shape': (2,), }";
  // Accepted variants: double quotes, no trailing comma, Python 2 long suffix, version 2.0 and 3.0 framing.
  CHECK(qgru::parse_npy(make_npy(1, "{\"descr\": \"<i2\", \"fortran_order\": False, \"shape\": (2,)}\n", 4), "x").shape ==
        std::vector<int64_t>{2});
  CHECK(qgru::parse_npy(make_npy(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (2L,), }", 4), "x").numel() == 2);
  CHECK(qgru::parse_npy(make_npy(2, "{'descr': '<i2'," + tail, 4), "x").dtype == DType::I16);
  CHECK(qgru::parse_npy(make_npy(3, "{'shape': (2,), 'descr': '<i2', 'fortran_order': False}", 4), "x").dtype == DType::I16);
  // Refused.
  check_rejected(make_npy(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (2), }", 4), {"header", "(n,)"});
  check_rejected(make_npy(1, "{'descr': '<i2', 'fortran_order': False}", 4), {"header", "'shape', got none"});
  check_rejected(make_npy(1, "{'descr': '<i2', 'descr': '<i2'," + tail, 4), {"'descr' once"});
  check_rejected(make_npy(1, "{'descr': '<i2', 'extra': 1," + tail, 4), {"only the keys", "'extra'"});
  check_rejected(make_npy(1, "{'descr': '<i2'," + tail + " junk", 4), {"end after '}'"});
  check_rejected(make_npy(1, "{'descr': '<i2', 'fortran_order': 0, 'shape': (2,), }", 4), {"True or False"});
  check_rejected(make_npy(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (-2,), }", 4), {"non-negative integer"});
  check_rejected(make_npy(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (02,), }", 4), {"leading zero"});
  check_rejected(make_npy(1, "{'descr': [('a', '<i2')]," + tail, 4), {"structured dtype"});
  check_rejected(make_npy(1, "['descr']", 4), {"expected '{'"});
  check_rejected(make_npy(1, "{'descr': '<i2', 'fortran_order': False, 'shape': (2,", 4), {"header"});
  check_rejected(make_npy(1, "{'descr': '>i2'," + tail, 4), {"big-endian '>i2'"});
  check_rejected(make_npy(1, "{'descr': '<i2', 'fortran_order': True, 'shape': (2,), }", 4), {"Fortran-order"});
}
