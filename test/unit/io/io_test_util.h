#pragma once
// Helpers for the io tests: scratch folders, error assertions, random tensors, and the fixtures'
// expected values (test/data/io/expected.json, written by scripts/make_io_fixtures.py).
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgru/base/error.h"
#include "qgru/base/tensor.h"

namespace io_test {

namespace fs = std::filesystem;

inline fs::path data_dir() { return fs::path(QGRU_TEST_DATA_DIR) / "io"; }

// A fresh, empty folder per test; removed by the destructor.
struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name) {
    dir = fs::temp_directory_path() / ("qgru_io_" + name + "_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string path(const std::string& file) const { return (dir / file).string(); }
  size_t file_count() const {
    size_t count = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++count;
    return count;
  }
};

inline std::vector<uint8_t> file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void put_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

inline std::vector<uint8_t> as_bytes(const std::string& text) { return std::vector<uint8_t>(text.begin(), text.end()); }

// Runs `action`, which must throw qgru::Error with a one-line message containing every one of `parts`.
template <class Action>
void check_error(Action&& action, const std::vector<std::string>& parts) {
  std::string message;
  try {
    action();
  } catch (const qgru::Error& error) {
    message = error.what();
  }
  INFO("message: " << message);
  REQUIRE_MESSAGE(!message.empty(), "expected a qgru::Error");
  CHECK(message.find('\n') == std::string::npos);
  for (const std::string& part : parts) {
    INFO("expected part: " << part);
    CHECK(message.find(part) != std::string::npos);
  }
}

// A tensor of `dtype` whose bytes are random: every bit pattern (NaN payloads, subnormals, -0) may occur,
// so a round trip that converts values instead of copying bits shows up.
inline qgru::Tensor random_tensor(qgru::DType dtype, std::vector<int64_t> shape, uint32_t seed) {
  qgru::Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.bytes.resize(static_cast<size_t>(tensor.numel()) * qgru::dtype_size(dtype));
  std::mt19937 random(seed);
  for (uint8_t& byte : tensor.bytes) byte = static_cast<uint8_t>(random() >> 24);
  return tensor;
}

inline const std::vector<qgru::DType>& all_dtypes() {
  static const std::vector<qgru::DType> dtypes = {qgru::DType::F64, qgru::DType::F32, qgru::DType::F16,
                                                  qgru::DType::BF16, qgru::DType::I64, qgru::DType::I32,
                                                  qgru::DType::I16, qgru::DType::I8,  qgru::DType::U8};
  return dtypes;
}

inline const nlohmann::json& expected_fixtures() {
  static const nlohmann::json expected = [] {
    std::ifstream in(data_dir() / "expected.json");
    return nlohmann::json::parse(in);
  }();
  return expected;
}

// Checks `tensor` against the fixture entry `key` of expected.json: dtype, shape and every value exactly
// (floats as exact decimals compared in double; fp16/bf16 as bit patterns).
inline void check_matches_fixture(const qgru::Tensor& tensor, const std::string& key) {
  INFO("fixture: " << key);
  const nlohmann::json& entry = expected_fixtures().at(key);
  CHECK(qgru::dtype_name(tensor.dtype) == entry.at("dtype").get<std::string>());
  CHECK(tensor.shape == entry.at("shape").get<std::vector<int64_t>>());
  REQUIRE(tensor.bytes.size() == static_cast<size_t>(tensor.numel()) * qgru::dtype_size(tensor.dtype));
  if (entry.contains("bits")) {
    const auto bits = entry.at("bits").get<std::vector<uint16_t>>();
    REQUIRE(bits.size() == static_cast<size_t>(tensor.numel()));
    for (size_t i = 0; i < bits.size(); ++i) {
      uint16_t got = 0;
      std::memcpy(&got, tensor.bytes.data() + 2 * i, 2);
      CHECK(got == bits[i]);
    }
    return;
  }
  const nlohmann::json& values = entry.at("values");
  REQUIRE(values.size() == static_cast<size_t>(tensor.numel()));
  if (tensor.dtype == qgru::DType::F64 || tensor.dtype == qgru::DType::F32) {
    const std::vector<double> got = qgru::tensor_to_f64(tensor);
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = values[i].get<double>();
      CHECK(std::memcmp(&got[i], &want, sizeof want) == 0);  // bitwise: keeps -0.0 apart from 0.0
    }
  } else {
    const std::vector<int64_t> got = qgru::tensor_to_i64(tensor, key);
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == values[i].get<int64_t>());
  }
}

}  // namespace io_test
