// The bit-width config: presets (embedded == configs/*.json, int8 == the table of docs/FIXED_POINT.md §2) and strict parsing.
#include <doctest/doctest.h>

#include <functional>

#include <nlohmann/json.hpp>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/quant/bitwidth_presets.h"

namespace qgru {
namespace {

using nlohmann::json;

TEST_CASE("embedded presets are byte-for-byte the files in configs/") {
  for (const std::string& name : bitwidth_preset_names()) {
    CAPTURE(name);
    const std::string file = read_file_text(std::string(QGRU_SOURCE_DIR) + "/configs/" + name + ".json");
    CHECK(file == bitwidth_preset_text(name));
    const BitwidthConfig config = load_bitwidth_config(name);
    CHECK(config.name == name);
  }
}

TEST_CASE("the int8 preset is the table of docs/FIXED_POINT.md §2") {
  const BitwidthConfig c = load_bitwidth_config("int8");
  for (int i = 0; i < kGruTensorCount; ++i) {
    const auto tensor = static_cast<GruTensor>(i);
    CAPTURE(gru_tensor_name(tensor));
    CHECK(c.of(tensor).bits == 8);
    const bool sigmoid_output = tensor == GruTensor::update_gate_output || tensor == GruTensor::reset_gate_output;
    CHECK(c.of(tensor).is_unsigned == sigmoid_output);
    const bool symmetric = gru_tensor_is_parameter(tensor) || tensor == GruTensor::new_gate_output;
    CHECK(c.of(tensor).symmetric == symmetric);
    if (gru_tensor_is_parameter(tensor)) CHECK(c.of(tensor).per_channel);
  }
  for (GateKind g : {GateKind::Update, GateKind::Reset, GateKind::New}) CHECK(c.activation(g).impl == ActivationImpl::Table);
  // int8 clips to the per-step EMA range; the 16-bit presets, where clipping costs more than resolution,
  // keep the whole range on the finest covering power-of-two grid.
  CHECK(c.range_method_of(GruTensor::x) == "ema");
  CHECK(c.range_method_of(GruTensor::weight_ih_linear) == "ema");
  CHECK(load_bitwidth_config("int16").range_method_of(GruTensor::h) == "minmax+pow2");
}

TEST_CASE("int16-activations: every activation 16 bits, weights 8, pwl gates") {
  const BitwidthConfig c = load_bitwidth_config("int16-activations");
  CHECK(c.of(GruTensor::W).bits == 8);
  CHECK(c.of(GruTensor::R).bits == 8);
  for (GruTensor t : kObservedGruTensors) CHECK(c.of(t).bits == 16);
  for (GateKind g : {GateKind::Update, GateKind::Reset, GateKind::New}) CHECK(c.activation(g).impl == ActivationImpl::Pwl);
}

TEST_CASE("to_json and parse round trip") {
  for (const std::string& name : bitwidth_preset_names()) {
    const BitwidthConfig a = load_bitwidth_config(name);
    const BitwidthConfig b = parse_bitwidth_config(bitwidth_config_to_json(a), "round trip");
    CHECK(bitwidth_config_to_json(a) == bitwidth_config_to_json(b));
  }
}

// Take the int8 preset, apply `edit`, and expect an error naming the source and `key`.
void expect_refused(const std::function<void(json&)>& edit, const std::string& key) {
  json root = json::parse(bitwidth_preset_text("int8"));
  edit(root);
  CAPTURE(key);
  std::string message;
  try {
    parse_bitwidth_config(root, "my.json");
  } catch (const Error& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.find("my.json") != std::string::npos);
  CHECK(message.find("'" + key + "'") != std::string::npos);
}

TEST_CASE("malformed configs are refused naming the file and the key") {
  expect_refused([](json& j) { j["colour"] = "blue"; }, "colour");
  expect_refused([](json& j) { j["tensors"]["h"]["bitz"] = 8; }, "tensors.h.bitz");
  expect_refused([](json& j) { j["tensors"]["h"]["bits"] = 17; }, "tensors.h.bits");
  expect_refused([](json& j) { j["tensors"]["h"]["bits"] = 1; }, "tensors.h.bits");
  expect_refused([](json& j) { j["tensors"]["h"]["bits"] = 8.5; }, "tensors.h.bits");
  expect_refused([](json& j) { j["tensors"].erase("new_gate_input"); }, "tensors.new_gate_input");
  expect_refused([](json& j) { j["tensors"]["hidden"] = j["tensors"]["h"]; }, "tensors.hidden");
  expect_refused([](json& j) { j["tensors"]["W"]["symmetric"] = false; }, "tensors.W.symmetric");
  expect_refused([](json& j) { j["tensors"]["bw"]["granularity"] = "per_row"; }, "tensors.bw.granularity");
  expect_refused([](json& j) { j["tensors"]["x"]["granularity"] = "per_channel"; }, "tensors.x.granularity");
  expect_refused([](json& j) { j["tensors"]["x"]["signed"] = "yes"; }, "tensors.x.signed");
  expect_refused([](json& j) { j["tensors"]["update_gate_input"]["bits"] = 13; }, "activations.update_gate.impl");
  expect_refused([](json& j) { j["activations"]["new_gate"]["impl"] = "spline"; }, "activations.new_gate.impl");
  expect_refused([](json& j) { j["activations"]["new_gate"]["segments"] = 8; }, "activations.new_gate.segments");
  expect_refused([](json& j) { j["version"] = 2; }, "version");
  expect_refused([](json& j) { j["schema"] = "qgru.artifact"; }, "schema");
  expect_refused([](json& j) { j["gemm_accumulator"] = "int16"; }, "gemm_accumulator");
  expect_refused([](json& j) { j.erase("activations"); }, "activations");
  expect_refused([](json& j) { j["scales"] = "float"; }, "scales");
  expect_refused([](json& j) { j["tensors"]["h"]["scale"] = 0.5; }, "tensors.h.scale");
}

TEST_CASE("the scale kind (global \"scales\", per tensor \"scale\") is lost or altered by parse and to_json") {
  json root = json::parse(bitwidth_preset_text("int8"));
  CHECK_FALSE(parse_bitwidth_config(root, "int8").multiplier_scales());
  CHECK_FALSE(bitwidth_config_to_json(parse_bitwidth_config(root, "int8")).contains("scales"));  // unchanged JSON
  root["scales"] = "multiplier";
  root["tensors"]["R"]["scale"] = "power_of_two";
  const BitwidthConfig a = parse_bitwidth_config(root, "mixed");
  CHECK(a.multiplier_scales());
  CHECK(a.of(GruTensor::h).multiplier_scale);
  CHECK_FALSE(a.of(GruTensor::R).multiplier_scale);
  const json written = bitwidth_config_to_json(a);
  CHECK(written["scales"] == "multiplier");
  CHECK(written["tensors"]["R"]["scale"] == "power_of_two");
  CHECK_FALSE(written["tensors"]["h"].contains("scale"));
  const BitwidthConfig b = parse_bitwidth_config(written, "round trip");
  for (int i = 0; i < kGruTensorCount; ++i) CHECK(b.tensors[static_cast<size_t>(i)].multiplier_scale == a.tensors[static_cast<size_t>(i)].multiplier_scale);
  // one multiplier tensor in a power-of-two config
  json one = json::parse(bitwidth_preset_text("int8"));
  one["tensors"]["x"]["scale"] = "multiplier";
  const BitwidthConfig c = parse_bitwidth_config(one, "one");
  CHECK(c.multiplier_scales());
  CHECK(bitwidth_config_to_json(c)["scales"] == "power_of_two");
  CHECK(bitwidth_config_to_json(c)["tensors"]["x"]["scale"] == "multiplier");
}

TEST_CASE("an unknown preset name that is not a file is refused") {
  CHECK_THROWS_WITH_AS(load_bitwidth_config("int4"), doctest::Contains("neither a preset"), Error);
}

}  // namespace
}  // namespace qgru
