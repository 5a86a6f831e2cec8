// The float-equivalent of an artifact: each weight is its code times its channel's scale, a float32 that
// requantizes to the same code and lies within half a step of the float weight it was made from; the cell
// variant of an artifact the export does not know is refused by name.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "qgru/base/error.h"
#include "qgru/export/dequantized_gru.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/quant_executor.h"
#include "quant_test_support.h"

namespace {

using qgru::GruTensor;

// Every element of one parameter tensor of one cell: requantized with its channel's quantization it is the
// artifact's code again (the dequantized value is on the code's grid point, not merely near it), and it is
// within half a step of the float weight quantize started from.
void check_tensor(const qgru::GruCellQuantParams& p, GruTensor tensor, const std::vector<int32_t>& codes,
                  const std::vector<float>& dequantized, const std::vector<float>& original, size_t columns) {
  REQUIRE(dequantized.size() == codes.size());
  REQUIRE(original.size() == codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    const qgru::TensorQuant q = p.channel_quant(tensor, static_cast<int>(i / columns));
    // code · 2^-shift in long double: 64 significand bits hold a 16-bit code exactly.
    const long double expected = std::ldexp(static_cast<long double>(codes[i]), -q.shift);
    INFO(qgru::gru_tensor_name(tensor), " cell (", p.layer, ", ", p.direction, ") element ", i, " code ", codes[i]);
    CHECK(static_cast<long double>(dequantized[i]) == expected);
    CHECK(q.quantize(dequantized[i]) == codes[i]);
    // Saturated codes aside (symmetric: |code| = 2^(bits-1) - 1 at the edge), the float weight rounds to it.
    if (codes[i] != q.qmax() && codes[i] != q.qmin()) {
      CHECK(std::fabs(static_cast<double>(original[i]) - dequantized[i]) <= 0.5 * q.scale());
    }
  }
}

}  // namespace

TEST_CASE("dequantized weights are the artifact's codes on their channel's grid, for every cell") {
  for (const char* preset : {"int8", "int16"}) {
    const qgru::BitwidthConfig config = qgru::load_bitwidth_config(preset);
    // Two bidirectional layers: layer 1's C is 2H; H = 33 fills no SIMD block.
    const qgru::test::CalibratedCase c = qgru::test::calibrated_case(5, 33, 2, 2, 4, 3, config, 11);
    const qgru::FloatGruModel fe = qgru::dequantized_float_gru(c.quantized);
    REQUIRE(fe.cells.size() == 4);
    CHECK(fe.linear_before_reset);
    CHECK(fe.input_size == 5);
    CHECK(fe.hidden_size == 33);
    CHECK(fe.num_layers == 2);
    CHECK(fe.num_directions == 2);
    for (size_t k = 0; k < fe.cells.size(); ++k) {
      const qgru::GruCellQuantParams& p = c.quantized.cells[k];
      const qgru::GruCellWeights& w = fe.cells[k];
      const qgru::GruCellWeights& original = c.model.cells[k];
      CHECK(w.input_size == p.input_size);
      check_tensor(p, GruTensor::W, p.q_W, w.W, original.W, static_cast<size_t>(p.input_size));
      check_tensor(p, GruTensor::R, p.q_R, w.R, original.R, static_cast<size_t>(p.hidden_size));
      check_tensor(p, GruTensor::bw, p.q_bw, w.bw, original.bw, 1);
      check_tensor(p, GruTensor::br, p.q_br, w.br, original.br, 1);
    }
  }
}

TEST_CASE("the float-equivalent tracks the integer executor closer at 16 bits than at 8") {
  // Not an exactness property: the float-equivalent leaves the activations float, so it differs from the
  // integer executor by the activation quantization, which 16 bits shrink. Both figures are asserted above a
  // floor that a wrong weight layout (a swapped gate, a transposed R) falls far below.
  double sqnr_by_preset[2] = {0.0, 0.0};
  int k = 0;
  for (const char* preset : {"int8", "int16"}) {
    const qgru::test::CalibratedCase c = qgru::test::calibrated_case(6, 32, 1, 2, 12, 8, qgru::load_bitwidth_config(preset), 5);
    const qgru::FloatGruModel fe = qgru::dequantized_float_gru(c.quantized);
    const qgru::FloatGruResult fe_result = qgru::run_float_gru(fe, c.x.data(), c.T, c.N, nullptr);
    const qgru::QuantGruResult integer = qgru::run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
    sqnr_by_preset[k++] = qgru::test::sqnr_db(integer.output, fe_result.output);
    MESSAGE(std::string(preset), ": float-equivalent vs integer executor output SQNR ", sqnr_by_preset[k - 1], " dB");
  }
  CHECK(sqnr_by_preset[0] > 20.0);
  CHECK(sqnr_by_preset[1] > 60.0);
  CHECK(sqnr_by_preset[1] > sqnr_by_preset[0] + 20.0);
}

TEST_CASE("an artifact of a cell variant the export does not know is refused, naming the variant") {
  const std::string v1 = R"({"schema": "qgru.artifact", "version": 1, "shapes": {"input_size": 2}})";
  CHECK_NOTHROW(qgru::require_exportable_cell_variant(v1, "m.qgru.json"));
  CHECK_NOTHROW(qgru::require_exportable_cell_variant("not json", "m.qgru.json"));  // the reader's to refuse
  auto message = [](const std::string& json) {
    try {
      qgru::require_exportable_cell_variant(json, "m.qgru.json");
    } catch (const qgru::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string named = message(R"({"schema": "qgru.artifact", "version": 2, "cell": "linear_before_reset_0"})");
  CHECK(named.find("m.qgru.json") == 0);
  CHECK(named.find("\"linear_before_reset_0\"") != std::string::npos);
  const std::string in_shapes = message(R"({"version": 1, "shapes": {"linear_before_reset": 0}})");
  CHECK(in_shapes.find("linear_before_reset = 0") != std::string::npos);
  const std::string newer = message(R"({"schema": "qgru.artifact", "version": 3})");
  CHECK(newer.find("artifact version 3") != std::string::npos);
  const std::string multiplier = message(R"({"schema": "qgru.artifact", "version": 3, "scales": "multiplier", "linear_before_reset": true})");
  CHECK(multiplier.find("multiplier-scale artifact") != std::string::npos);
  // Version 2 names the cell where the format puts it: known (read_artifact checks it against the version).
  CHECK_NOTHROW(qgru::require_exportable_cell_variant(R"({"schema": "qgru.artifact", "version": 2, "linear_before_reset": false})",
                                                      "m.qgru.json"));
  const std::string not_boolean = message(R"({"schema": "qgru.artifact", "version": 2, "linear_before_reset": "no"})");
  CHECK(not_boolean.find("linear_before_reset = \"no\"") != std::string::npos);
}

TEST_CASE("the float-equivalent of a linear_before_reset = 0 artifact is that cell, and tracks its integer executor") {
  const qgru::test::CalibratedCase c = qgru::test::calibrated_case(6, 32, 2, 1, 12, 8, qgru::load_bitwidth_config("int8"), 9, {},
                                                                   /*linear_before_reset=*/false);
  const qgru::FloatGruModel fe = qgru::dequantized_float_gru(c.quantized);
  CHECK_FALSE(fe.linear_before_reset);
  const qgru::QuantGruResult integer = qgru::run_quantized_gru(c.quantized, c.x.data(), c.T, c.N, nullptr);
  const double right = qgru::test::sqnr_db(integer.output, qgru::run_float_gru(fe, c.x.data(), c.T, c.N, nullptr).output);
  qgru::FloatGruModel other = fe;
  other.linear_before_reset = true;
  const double wrong = qgru::test::sqnr_db(integer.output, qgru::run_float_gru(other, c.x.data(), c.T, c.N, nullptr).output);
  MESSAGE("float-equivalent vs integer executor: " << right << " dB as its own cell, " << wrong << " dB as the other one");
  CHECK(right > 20.0);
  CHECK(right > wrong + 6.0);
}
