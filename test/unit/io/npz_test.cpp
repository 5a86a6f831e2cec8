#include <doctest/doctest.h>

#include <cstring>
#include <random>

#include "io_test_util.h"
#include "qgru/io/npy.h"
#include "qgru/io/zip.h"

using io_test::check_error;
using qgru::DType;
using qgru::Tensor;

namespace {

std::string fixture(const std::string& name) { return (io_test::data_dir() / name).string(); }

void put16(std::vector<uint8_t>& out, uint32_t value) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
void put32(std::vector<uint8_t>& out, uint32_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
void put64(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
uint32_t get32(const std::vector<uint8_t>& bytes, size_t at) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) value |= uint32_t{bytes[at + i]} << (8 * i);
  return value;
}

// CRC-32 bit by bit, straight from the definition (reflected polynomial 0xEDB88320).
uint32_t reference_crc32(const uint8_t* data, size_t size) {
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i) {
    crc ^= data[i];
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A one-member archive written entirely in ZIP64 form, as large-file writers do: saturated 32-bit fields,
// ZIP64 extra fields in both headers, a ZIP64 end record and locator, and an archive comment.
std::vector<uint8_t> make_zip64_archive(const std::string& name, const std::vector<uint8_t>& data) {
  const uint32_t crc = reference_crc32(data.data(), data.size());
  std::vector<uint8_t> out;
  put32(out, 0x04034b50);
  put16(out, 45); put16(out, 0); put16(out, 0); put16(out, 0); put16(out, 0x21);
  put32(out, crc); put32(out, 0xFFFFFFFFu); put32(out, 0xFFFFFFFFu);
  put16(out, static_cast<uint32_t>(name.size())); put16(out, 20);
  out.insert(out.end(), name.begin(), name.end());
  put16(out, 1); put16(out, 16); put64(out, data.size()); put64(out, data.size());
  out.insert(out.end(), data.begin(), data.end());
  const uint64_t directory_offset = out.size();
  put32(out, 0x02014b50);
  put16(out, 45); put16(out, 45); put16(out, 0); put16(out, 0); put16(out, 0); put16(out, 0x21);
  put32(out, crc); put32(out, 0xFFFFFFFFu); put32(out, 0xFFFFFFFFu);
  put16(out, static_cast<uint32_t>(name.size())); put16(out, 28); put16(out, 0); put16(out, 0); put16(out, 0);
  put32(out, 0); put32(out, 0xFFFFFFFFu);
  out.insert(out.end(), name.begin(), name.end());
  put16(out, 1); put16(out, 24); put64(out, data.size()); put64(out, data.size()); put64(out, 0);
  const uint64_t directory_size = out.size() - directory_offset;
  const uint64_t zip64_end_offset = out.size();
  put32(out, 0x06064b50); put64(out, 44); put16(out, 45); put16(out, 45); put32(out, 0); put32(out, 0);
  put64(out, 1); put64(out, 1); put64(out, directory_size); put64(out, directory_offset);
  put32(out, 0x07064b50); put32(out, 0); put64(out, zip64_end_offset); put32(out, 1);
  const std::string comment = "written by a ZIP64 writer";
  put32(out, 0x06054b50); put16(out, 0); put16(out, 0); put16(out, 0xFFFF); put16(out, 0xFFFF);
  put32(out, 0xFFFFFFFFu); put32(out, 0xFFFFFFFFu); put16(out, static_cast<uint32_t>(comment.size()));
  out.insert(out.end(), comment.begin(), comment.end());
  return out;
}

// An archive of arbitrary members written with qgru's own zip writer.
std::vector<uint8_t> make_archive(const std::vector<std::pair<std::string, std::string>>& members, bool force_zip64 = false) {
  std::vector<uint8_t> out;
  qgru::StoredZipWriter zip(
      [&out](const void* data, size_t size) {
        const auto* bytes = static_cast<const uint8_t*>(data);
        out.insert(out.end(), bytes, bytes + size);
      },
      "memory", force_zip64);
  for (const auto& [name, content] : members) zip.add(name, {{content.data(), content.size()}});
  zip.finish();
  return out;
}

std::string npy_text(const Tensor& tensor) {
  const std::vector<uint8_t> bytes = qgru::serialize_npy(tensor);
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

TEST_CASE("crc32 matches the check value and a bitwise reference, fed in any pieces") {
  CHECK(qgru::crc32_update(0, "123456789", 9) == 0xCBF43926u);
  CHECK(qgru::crc32_update(0, "", 0) == 0u);
  std::vector<uint8_t> bytes(1000);
  std::mt19937 random(5);
  for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(random());
  const uint32_t whole = reference_crc32(bytes.data(), bytes.size());
  CHECK(qgru::crc32_update(0, bytes.data(), bytes.size()) == whole);
  for (size_t split : {0u, 1u, 333u, 999u, 1000u}) {
    const uint32_t first = qgru::crc32_update(0, bytes.data(), split);
    CHECK(qgru::crc32_update(first, bytes.data() + split, bytes.size() - split) == whole);
  }
}

TEST_CASE("npz written by np.savez reads back with every array's values") {
  const auto arrays = qgru::read_npz(fixture("arrays.npz"));
  CHECK(arrays.size() == 6);
  for (const char* key : {"weights", "codes", "bytes", "counts", "precise", "empty"}) {
    io_test::check_matches_fixture(arrays.at(key), std::string("arrays.npz:") + key);
    io_test::check_matches_fixture(qgru::read_array(fixture("arrays.npz") + ":" + key), std::string("arrays.npz:") + key);
  }
  io_test::check_matches_fixture(qgru::read_array(fixture("single.npz")), "single.npz");
  const auto parsed = qgru::parse_npz(io_test::file_bytes(fixture("arrays.npz")), "memory.npz");
  REQUIRE(parsed.size() == 6);
  for (const auto& [key, tensor] : parsed) io_test::check_matches_fixture(tensor, "arrays.npz:" + key);
}

TEST_CASE("npz round trip keeps every dtype bit for bit and replaces the target whole") {
  io_test::Scratch scratch("npz_roundtrip");
  const std::string path = scratch.path("arrays.npz");
  std::map<std::string, Tensor> arrays;
  uint32_t seed = 40;
  for (DType dtype : io_test::all_dtypes()) {
    if (dtype == DType::BF16) continue;  // NumPy has no bfloat16
    arrays[std::string("x_") + qgru::dtype_name(dtype)] = io_test::random_tensor(dtype, {3, 2}, seed++);
  }
  arrays["scalar"] = io_test::random_tensor(DType::F32, {}, seed++);
  arrays["empty"] = io_test::random_tensor(DType::I32, {0}, seed++);
  arrays["naïve"] = io_test::random_tensor(DType::U8, {3}, seed++);  // a UTF-8 member name
  qgru::write_npz(path, {{"old", io_test::random_tensor(DType::F64, {100}, 1)}});
  qgru::write_npz(path, arrays);
  CHECK(scratch.file_count() == 1);
  const auto back = qgru::read_npz(path);
  REQUIRE(back.size() == arrays.size());
  for (const auto& [key, tensor] : arrays) {
    const std::string& array_key = key;  // INFO needs a variable: C++17 lambdas cannot capture a binding (clang)
    INFO("array " << array_key);
    CHECK(back.at(key).dtype == tensor.dtype);
    CHECK(back.at(key).shape == tensor.shape);
    CHECK(back.at(key).bytes == tensor.bytes);
    CHECK(qgru::read_array(path + ":" + key).bytes == tensor.bytes);
  }
  qgru::write_npz(path, {});
  CHECK(qgru::read_npz(path).empty());
}

TEST_CASE("npz writer refuses bfloat16 and empty names before creating the file") {
  io_test::Scratch scratch("npz_refuse");
  const std::string path = scratch.path("out.npz");
  check_error([&] { qgru::write_npz(path, {{"w", io_test::random_tensor(DType::BF16, {2}, 1)}}); },
              {path, "array 'w'", "bfloat16"});
  check_error([&] { qgru::write_npz(path, {{"", io_test::random_tensor(DType::F32, {2}, 1)}}); }, {path, "empty"});
  CHECK(scratch.file_count() == 0);
}

TEST_CASE("npz compressed with np.savez_compressed is refused with advice to use np.savez") {
  for (auto read : {+[] { qgru::read_npz(fixture("compressed.npz")); }, +[] { qgru::read_array(fixture("compressed.npz")); }}) {
    check_error(read, {fixture("compressed.npz"), "member 'x.npy'", "deflate", "savez_compressed", "np.savez"});
  }
}

TEST_CASE("npz in ZIP64 form (saturated fields, extra records, comment) reads back") {
  io_test::Scratch scratch("npz_zip64");
  const Tensor tensor = io_test::random_tensor(DType::I16, {4, 5}, 9);
  const std::string text = npy_text(tensor);
  const std::string path = scratch.path("big.npz");
  io_test::put_file(path, make_zip64_archive("w.npy", std::vector<uint8_t>(text.begin(), text.end())));
  const auto arrays = qgru::read_npz(path);
  REQUIRE(arrays.count("w") == 1);
  CHECK(arrays.at("w").shape == tensor.shape);
  CHECK(arrays.at("w").bytes == tensor.bytes);
}

TEST_CASE("zip writer in ZIP64 form writes the ZIP64 records and reads back member for member") {
  const Tensor first = io_test::random_tensor(DType::F32, {3, 3}, 21);
  const Tensor second = io_test::random_tensor(DType::I64, {2}, 22);
  const std::vector<uint8_t> archive = make_archive({{"a.npy", npy_text(first)}, {"b.npy", npy_text(second)}}, true);
  // The ZIP64 end record sits 56 + 20 bytes before the classic 22-byte end record, which is saturated.
  REQUIRE(archive.size() > 98);
  CHECK(get32(archive, archive.size() - 22 - 20 - 56) == 0x06064b50u);
  CHECK(get32(archive, archive.size() - 22 - 20) == 0x07064b50u);
  CHECK(get32(archive, archive.size() - 22 + 16) == 0xFFFFFFFFu);
  CHECK(get32(archive, 18) == 0xFFFFFFFFu);  // the first local header's stored size is in its extra field
  const auto arrays = qgru::parse_npz(archive, "zip64.npz");
  REQUIRE(arrays.size() == 2);
  CHECK(arrays.at("a").bytes == first.bytes);
  CHECK(arrays.at("b").bytes == second.bytes);
  // Without forcing, a small archive is classic: no ZIP64 records, equal content.
  const std::vector<uint8_t> classic = make_archive({{"a.npy", npy_text(first)}, {"b.npy", npy_text(second)}});
  CHECK(classic.size() < archive.size());
  CHECK(get32(classic, classic.size() - 22 - 20) != 0x07064b50u);
  CHECK(qgru::parse_npz(classic, "classic.npz").at("b").bytes == second.bytes);
}

TEST_CASE("npz refuses a corrupt member (CRC-32), a truncated archive and a .npy posing as .npz") {
  io_test::Scratch scratch("npz_corrupt");
  const std::vector<uint8_t> good = io_test::file_bytes(fixture("single.npz"));
  const size_t directory_offset = get32(good, good.size() - 22 + 16);
  std::vector<uint8_t> flipped = good;
  flipped[directory_offset - 1] ^= 0x01;  // last data byte of the only member
  const std::string path = scratch.path("bad.npz");
  io_test::put_file(path, flipped);
  check_error([&] { qgru::read_npz(path); }, {path, "array 'only'", "CRC-32", "corrupt"});

  io_test::put_file(path, std::vector<uint8_t>(good.begin(), good.end() - 10));
  check_error([&] { qgru::read_npz(path); }, {path, "end-of-central-directory", "truncated"});
  io_test::put_file(path, std::vector<uint8_t>(good.begin() + 100, good.end()));
  check_error([&] { qgru::read_npz(path); }, {path, "central directory"});
  io_test::put_file(path, {});
  check_error([&] { qgru::read_npz(path); }, {path, "got a file of 0 bytes"});
  io_test::put_file(path, io_test::file_bytes(fixture("v1_f32.npy")));
  check_error([&] { qgru::read_npz(path); }, {path, "got a .npy file"});
}

TEST_CASE("npz refuses members that are not .npy, duplicates, encrypted members and bad member arrays") {
  io_test::Scratch scratch("npz_members");
  const std::string path = scratch.path("bad.npz");
  const std::string good = npy_text(io_test::random_tensor(DType::F32, {2}, 1));
  io_test::put_file(path, make_archive({{"a.npy", good}, {"readme.txt", "hello"}}));
  check_error([&] { qgru::read_npz(path); }, {path, "member 'readme.txt'", ".npy members only"});
  io_test::put_file(path, make_archive({{"a.npy", good}, {"a.npy", good}}));
  check_error([&] { qgru::read_npz(path); }, {path, "member 'a.npy'", "twice"});
  io_test::put_file(path, make_archive({{"a.npy", good.substr(0, good.size() - 1)}}));
  check_error([&] { qgru::read_npz(path); }, {path, "array 'a'", "truncated"});
  std::vector<uint8_t> encrypted = make_archive({{"a.npy", good}});
  const size_t directory_offset = get32(encrypted, encrypted.size() - 22 + 16);
  encrypted[directory_offset + 8] |= 0x01;  // general-purpose flag bit 0 in the central directory
  io_test::put_file(path, encrypted);
  check_error([&] { qgru::read_npz(path); }, {path, "member 'a.npy'", "encrypted"});
}

TEST_CASE("read_array picks the array by extension, by key, or by content") {
  io_test::Scratch scratch("read_array");
  check_error([] { qgru::read_array(fixture("arrays.npz")); }, {fixture("arrays.npz"), "exactly one array", "got 6", "'weights'"});
  check_error([] { qgru::read_array(fixture("arrays.npz") + ":missing"); }, {fixture("arrays.npz"), "named 'missing'", "'codes'"});
  check_error([] { qgru::read_array(fixture("arrays.npz") + ":"); }, {"array name after ':'"});
  const std::string npy_copy = scratch.path("data.bin");
  io_test::put_file(npy_copy, io_test::file_bytes(fixture("v1_f32.npy")));
  io_test::check_matches_fixture(qgru::read_array(npy_copy), "v1_f32.npy");
  const std::string npz_copy = scratch.path("data2.bin");
  io_test::put_file(npz_copy, io_test::file_bytes(fixture("single.npz")));
  io_test::check_matches_fixture(qgru::read_array(npz_copy), "single.npz");
  const std::string text = scratch.path("notes.txt");
  io_test::put_file(text, io_test::as_bytes("just text"));
  check_error([&] { qgru::read_array(text); }, {text, "expected a .npy or .npz file"});
  check_error([&] { qgru::read_array(scratch.path("none.npy")); }, {scratch.path("none.npy"), "cannot open"});
}
