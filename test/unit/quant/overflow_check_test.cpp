// The overflow proof: presets accepted, int32 accumulators refused when they could overflow, a huge left
// shift refused naming the intermediate, and the int8-GEMM flag.
#include <doctest/doctest.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "qgru/runtime/overflow_check.h"
#include "qgru/quant/bitwidth_presets.h"
#include "quant_test_support.h"

namespace qgru {
namespace {

QuantizedGru quantize_with_unit_ranges(const FloatGruModel& model, const BitwidthConfig& config) {
  const RangeProvider unit = [](int, int, GruTensor tensor, const std::string&, const TensorQuant&) {
    if (tensor == GruTensor::update_gate_output || tensor == GruTensor::reset_gate_output) return std::pair<double, double>{0.0, 1.0};
    return std::pair<double, double>{-1.0, 1.0};
  };
  return quantize_gru(model, config, unit);
}

std::string refusal(const std::function<void()>& run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST_CASE("the presets are proven for a 2-layer model with C = H = 256") {
  const FloatGruModel model = test::random_float_gru(256, 256, 2, 1, 1u);
  for (const std::string& name : bitwidth_preset_names()) {
    CAPTURE(name);
    const QuantizedGru q = quantize_with_unit_ranges(model, load_bitwidth_config(name));
    const OverflowProof proof = prove_no_overflow(q);
    CHECK(proof.ok());
    CHECK(proof.checks.size() > 40);  // about 30 per cell
    // int8: the int8 GEMM with int32 accumulation on every GEMM.
    for (const GruCellQuantParams& p : q.cells) {
      CHECK(p.gemm_x_int32 == (name == "int8"));
      CHECK(p.gemm_h_int32 == (name == "int8"));
    }
    CHECK(gemm_operands_fit_int8(q) == (name == "int8"));
  }
}

TEST_CASE("a 16-bit config asking for int32 GEMM accumulators is refused, naming the accumulator") {
  nlohmann::json j = nlohmann::json::parse(bitwidth_preset_text("int16"));
  j["gemm_accumulator"] = "int32";
  const BitwidthConfig config = parse_bitwidth_config(j, "int16-int32acc.json");
  const FloatGruModel model = test::random_float_gru(16, 8, 1, 1, 2u);
  // 16 * 2^15 * 2^15 = 2^34 > 2^31 - 1
  const std::string message = refusal([&] { quantize_with_unit_ranges(model, config); });
  CAPTURE(message);
  CHECK(message.find("overflow") != std::string::npos);
  CHECK(message.find("gemm_x accumulator") != std::string::npos);
  CHECK(message.find("layer 0 direction 0") != std::string::npos);
  CHECK(message.find("int32") != std::string::npos);
  // The same config with int64 accumulators is proven.
  j["gemm_accumulator"] = "int64";
  CHECK_NOTHROW(quantize_with_unit_ranges(model, parse_bitwidth_config(j, "int16-int64acc.json")));
}

TEST_CASE("int8 GEMM accumulation in int32 is refused once C * 2^7 * 2^7 exceeds int32") {
  const BitwidthConfig config = load_bitwidth_config("int8");
  // 131072 * 128 * 128 = 2^31 > INT32_MAX; one below is fine.
  const std::string message = refusal([&] { quantize_with_unit_ranges(test::random_float_gru(131072, 1, 1, 1, 3u), config); });
  CHECK(message.find("gemm_x accumulator") != std::string::npos);
  CHECK_NOTHROW(quantize_with_unit_ranges(test::random_float_gru(131071, 1, 1, 1, 3u), config));
}

TEST_CASE("a left shift that could overflow int64 is refused, naming the intermediate") {
  // int8: code differences < 2^8, products of two < 2^16.
  QuantizedGru q = quantize_with_unit_ranges(test::random_float_gru(4, 3, 1, 1, 4u), load_bitwidth_config("int8"));
  REQUIRE(prove_no_overflow(q).ok());
  SUBCASE("gate input") {
    q.cells[0].shift_weight_ih_linear_to_update_gate_input = -56;  // 2^8 * 2^56 > 2^62
    CHECK(prove_no_overflow(q).first_failure().find("update_gate_input before saturation") != std::string::npos);
  }
  SUBCASE("r x hh rescale") {
    q.cells[0].shift_reset_mul_hh_to_new_gate_input = -50;  // 2^16 * 2^50 > 2^62
    CHECK(prove_no_overflow(q).first_failure().find("new_gate_input before saturation") != std::string::npos);
  }
  SUBCASE("a shift outside rshift_round's range") {
    q.cells[0].shift_update_gate_output = 63;
    CHECK(prove_no_overflow(q).first_failure().find("shift_update_gate_output") != std::string::npos);
  }
  SUBCASE("bias at the GEMM scale") {
    q.cells[0].shift_bw_to_gemm_x[2] = -56;  // 2^7 * 2^56 > 2^62
    CHECK(prove_no_overflow(q).first_failure().find("q_bw at the gemm_x scale") != std::string::npos);
  }
}

TEST_CASE("the accumulator bound is reached by extreme codes and holds (int8, C = 64)") {
  // W all at -128 (the most negative code the bound allows) and x at -128: Σ = 64 * 2^14 = 2^20 exactly.
  QuantizedGru q = quantize_with_unit_ranges(test::random_float_gru(64, 2, 1, 1, 5u), load_bitwidth_config("int8"));
  const OverflowProof proof = prove_no_overflow(q);
  bool found = false;
  for (const OverflowCheck& c : proof.checks) {
    if (c.intermediate.rfind("gemm_x accumulator", 0) == 0) {
      CHECK(c.log2_bound == doctest::Approx(20.0));
      CHECK(gemm_accumulator_bound(q.cells[0], true) == 1048576.0);
      CHECK(gemm_accumulator_bound(q.cells[0], false) == 2 * 128.0 * 128.0);  // H = 2
      CHECK(c.type == "int32");
      found = true;
    }
  }
  CHECK(found);
  // The log summary lists the tightest value checks first.
  const std::string tightest = proof.tightest(2);
  CHECK(std::count(tightest.begin(), tightest.end(), '\n') == 2);
  CHECK(tightest.find("bits spare") != std::string::npos);
}

}  // namespace
}  // namespace qgru
