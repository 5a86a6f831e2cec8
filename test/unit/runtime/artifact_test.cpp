// The artifact: read(write(m)) runs to identical codes (both cell variants: version 1 for the
// linear_before_reset = 1 cell as before, version 2 naming the linear_before_reset = 0 cell); tampering, future
// versions, a variant key that disagrees with the version, wrong shapes and inconsistent derived shifts are
// refused with a message naming what is wrong.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "qgru/base/atomic_file.h"
#include "qgru/base/sha256.h"
#include "qgru/io/safetensors.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/artifact_write.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Scratch {
  fs::path dir;
  explicit Scratch(const std::string& name) {
    dir = fs::temp_directory_path() / ("qgru_artifact_test_" + name + "_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
};

std::string read_error(const std::string& path) {
  try {
    read_artifact(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void write_json(const std::string& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(2);
}

TEST_CASE("read(write(m)) runs to identical codes (every preset, 2 layers, bidirectional)") {
  for (const char* preset : {"int8", "int16-activations", "int16"}) {
    CAPTURE(preset);
    Scratch scratch(std::string("roundtrip_") + preset);
    const int directions = std::string(preset) == "int8" ? 2 : 1;  // 16-bit pwl tables take ~0.1 s each
    test::CalibratedCase c = test::calibrated_case(5, 7, 2, directions, 6, 2, load_bitwidth_config(preset), 31u);
    c.quantized.provenance.model_path = "model.safetensors";
    c.quantized.provenance.model_sha256 = std::string(64, 'a');
    const std::string path = scratch.path("model.qgru.json");
    write_artifact(path, c.quantized);
    CHECK(fs::exists(scratch.path("model.qgru.safetensors")));
    const QuantizedGru back = read_artifact(path);
    CHECK(back.provenance.model_sha256 == std::string(64, 'a'));
    CHECK(back.num_layers == 2);
    CHECK(back.num_directions == directions);
    const QuantGruResult a = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
    const QuantGruResult b = run_quantized_gru(back, c.x.data(), c.T, c.N, nullptr);
    CHECK(a.output_codes == b.output_codes);
    CHECK(a.h_n_codes == b.h_n_codes);
    for (size_t i = 0; i < c.quantized.cells.size(); ++i) {
      CHECK(back.cells[i].q_W == c.quantized.cells[i].q_W);
      CHECK(back.cells[i].gemm_x_int32 == c.quantized.cells[i].gemm_x_int32);
    }
    // Weight dtype follows the width.
    const SafetensorsFile tensors = read_safetensors(scratch.path("model.qgru.safetensors"));
    CHECK(tensors.tensors.at("layer1.dir0.W").dtype == (std::string(preset) == "int16" ? DType::I16 : DType::I8));
    CHECK(tensors.tensors.at("layer0.dir0.bw").dtype == DType::I32);
    CHECK(tensors.tensors.at("layer0.dir0.W_sum").dtype == DType::I64);
    const json j = json::parse(read_file_text(path));
    CHECK(j["gemm_operands_fit_int8"].get<bool>() == (std::string(preset) == "int8"));
    CHECK(j["cells"][0]["derived"].contains("shift_reset_mul_hh_to_new_gate_input"));
    CHECK(j["version"] == 1);  // the linear_before_reset = 1 cell: what every earlier qgru reads
    CHECK_FALSE(j.contains("linear_before_reset"));
  }
}

TEST_CASE("a linear_before_reset = 0 artifact reads back as the other cell (version 1 would lose the variant)") {
  for (const char* preset : {"int8", "int16-activations"}) {
    CAPTURE(preset);
    Scratch scratch(std::string("lbr0_") + preset);
    test::CalibratedCase c = test::calibrated_case(5, 7, 2, 2, 6, 2, load_bitwidth_config(preset), 37u, {}, false);
    const std::string path = scratch.path("model.qgru.json");
    write_artifact(path, c.quantized);
    const json j = json::parse(read_file_text(path));
    CHECK(j["version"] == 2);
    CHECK(j["linear_before_reset"] == false);
    const json& derived = j["cells"][3]["derived"];
    CHECK(derived.contains("shift_reset_mul_h_to_h"));
    CHECK(derived.contains("shift_weight_hh_linear_to_new_gate_input"));
    CHECK_FALSE(derived.contains("shift_reset_mul_hh_to_new_gate_input"));
    const QuantizedGru back = read_artifact(path);
    CHECK_FALSE(back.linear_before_reset());
    for (const GruCellQuantParams& p : back.cells) CHECK_FALSE(p.linear_before_reset);
    const QuantGruResult a = run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
    const QuantGruResult b = run_quantized_gru(back, c.x.data(), c.T, c.N, nullptr);
    CHECK(a.output_codes == b.output_codes);
    CHECK(a.h_n_codes == b.h_n_codes);
    // The same parameters run as the other cell give other codes: the variant is not decoration.
    QuantizedGru other = back;
    for (GruCellQuantParams& p : other.cells) {
      p.linear_before_reset = true;
      compute_derived_shifts(p);
    }
    CHECK(run_quantized_gru(other, c.x.data(), c.T, c.N, nullptr).output_codes != a.output_codes);

    // A version 2 artifact must say which cell; version 1 cannot hold this one.
    json edited = j;
    edited.erase("linear_before_reset");
    write_json(path, edited);
    CHECK(read_error(path).find("linear_before_reset: missing") != std::string::npos);
    edited = j;
    edited["version"] = 1;
    write_json(path, edited);
    CHECK(read_error(path).find("a version 1 artifact holds the linear_before_reset = 1 cell only") != std::string::npos);
    edited = j;
    edited["cells"][1]["derived"]["shift_reset_mul_h_to_h"] = 3;
    write_json(path, edited);
    CHECK(read_error(path).find("cells[0,1].derived.shift_reset_mul_h_to_h") != std::string::npos);
  }
}

struct WrittenArtifact {
  Scratch scratch{"tamper"};
  std::string json_path = scratch.path("m.qgru.json");
  std::string tensor_path = scratch.path("m.qgru.safetensors");
  WrittenArtifact() {
    test::CalibratedCase c = test::calibrated_case(3, 4, 1, 2, 4, 2, load_bitwidth_config("int8"), 41u);
    write_artifact(json_path, c.quantized);
  }
  json load() const { return json::parse(read_file_text(json_path)); }
  // Rewrite the tensor file and record its new sha256 in the JSON, so that only `edit` is wrong.
  void edit_tensors(const std::function<void(SafetensorsFile&)>& edit) const {
    SafetensorsFile file = read_safetensors(tensor_path);
    edit(file);
    const std::vector<uint8_t> bytes = serialize_safetensors(file);
    write_file_atomic(tensor_path, bytes.data(), bytes.size());
    json j = load();
    j["tensor_file_sha256"] = sha256_hex(bytes.data(), bytes.size());
    write_json(json_path, j);
  }
};

TEST_CASE("a modified tensor file is refused by its sha256") {
  WrittenArtifact a;
  std::vector<uint8_t> bytes = read_file_bytes(a.tensor_path);
  bytes[bytes.size() - 3] ^= 0x01;
  write_file_atomic(a.tensor_path, bytes.data(), bytes.size());
  const std::string message = read_error(a.json_path);
  CHECK(message.find("tensor_file_sha256") != std::string::npos);
  CHECK(message.find("m.qgru.json") != std::string::npos);
}

TEST_CASE("a future schema version is refused; so is another schema") {
  WrittenArtifact a;
  json j = a.load();
  j["version"] = 4;
  write_json(a.json_path, j);
  CHECK(read_error(a.json_path).find("version: 4 is newer") != std::string::npos);
  j["version"] = 1;
  j["schema"] = "qgru.bitwidth_config";
  write_json(a.json_path, j);
  CHECK(read_error(a.json_path).find("schema") != std::string::npos);
}

TEST_CASE("a wrong shape, dtype or code is refused naming the tensor") {
  WrittenArtifact a;
  SUBCASE("shape") {
    a.edit_tensors([](SafetensorsFile& f) {
      f.tensors["layer0.dir1.R"] = Tensor::from_vector<int8_t>({12, 3}, std::vector<int8_t>(36, 1));
    });
    const std::string message = read_error(a.json_path);
    CHECK(message.find("tensor layer0.dir1.R: shape [12, 3], expected [12, 4]") != std::string::npos);
  }
  SUBCASE("dtype") {
    a.edit_tensors([](SafetensorsFile& f) {
      f.tensors["layer0.dir0.bw"] = Tensor::from_vector<int64_t>({12}, std::vector<int64_t>(12, 0));
    });
    CHECK(read_error(a.json_path).find("tensor layer0.dir0.bw: dtype I64, expected I32") != std::string::npos);
  }
  SUBCASE("missing") {
    a.edit_tensors([](SafetensorsFile& f) { f.tensors.erase("layer0.dir0.W_sum"); });
    CHECK(read_error(a.json_path).find("layer0.dir0.W_sum: missing") != std::string::npos);
  }
  SUBCASE("row sums that do not match the codes") {
    a.edit_tensors([](SafetensorsFile& f) { f.tensors["layer0.dir0.W"].data<int8_t>()[0] ^= 1; });
    CHECK(read_error(a.json_path).find("W_sum") != std::string::npos);
  }
}

TEST_CASE("an inconsistent derived shift or zero point is refused naming the key") {
  WrittenArtifact a;
  json j = a.load();
  SUBCASE("derived scalar") {
    j["cells"][1]["derived"]["shift_new_gate_output_to_h"] = j["cells"][1]["derived"]["shift_new_gate_output_to_h"].get<int>() + 1;
    write_json(a.json_path, j);
    CHECK(read_error(a.json_path).find("cells[0,1].derived.shift_new_gate_output_to_h") != std::string::npos);
  }
  SUBCASE("zero point outside the code range") {
    j["cells"][0]["tensors"]["h"]["zp"] = 300;
    write_json(a.json_path, j);
    CHECK(read_error(a.json_path).find("cells[0,0].tensors.h.zp: 300 outside [-128, 127]") != std::string::npos);
  }
  SUBCASE("a symmetric tensor with a zero point") {
    j["cells"][0]["tensors"]["new_gate_output"]["zp"] = 3;
    write_json(a.json_path, j);
    CHECK(read_error(a.json_path).find("new_gate_output.zp") != std::string::npos);
  }
}

}  // namespace
}  // namespace qgru
