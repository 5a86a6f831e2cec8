// ONNX export: what qgru writes, read back by qgru's own importer (the weights bit for bit, the cell variant,
// the stack), checked by the ONNX project's C++ checker and strict shape inference (libonnx), and the graph's
// wiring for every option. Whether onnxruntime computes what qgru's float GRU computes on it is
// onnx_export_fixture_test.cpp's question (outputs made by onnxruntime, committed).
#include <doctest/doctest.h>

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <cstring>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/export/dequantized_gru.h"
#include "qgru/export/onnx_export.h"
#include "qgru/import/onnx_gru.h"
#include "qgru/quant/bitwidth_presets.h"
#include "quant_test_support.h"

namespace {

onnx::ModelProto parse(const std::string& bytes) {
  onnx::ModelProto model;
  REQUIRE(model.ParseFromString(bytes));
  return model;
}

std::vector<std::string> op_types(const onnx::ModelProto& model) {
  std::vector<std::string> ops;
  for (const onnx::NodeProto& n : model.graph().node()) ops.push_back(n.op_type());
  return ops;
}

int64_t int_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute()) {
    if (a.name() == name) return a.i();
  }
  FAIL("attribute " << name << " missing on " << node.name());
  return -1;
}

const onnx::TensorProto& initializer(const onnx::ModelProto& model, const std::string& name) {
  for (const onnx::TensorProto& t : model.graph().initializer()) {
    if (t.name() == name) return t;
  }
  FAIL("initializer " << name << " missing");
  return model.graph().initializer(0);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The importer's model of the exported bytes equals `expected`, weight for weight (bitwise).
void check_round_trip(const qgru::FloatGruModel& expected, const std::string& bytes) {
  const qgru::FloatGruModel back = qgru::onnx_gru_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                                             "exported.onnx", "", "");
  CHECK(back.input_size == expected.input_size);
  CHECK(back.hidden_size == expected.hidden_size);
  CHECK(back.num_layers == expected.num_layers);
  CHECK(back.num_directions == expected.num_directions);
  CHECK(back.linear_before_reset == expected.linear_before_reset);
  REQUIRE(back.cells.size() == expected.cells.size());
  for (size_t k = 0; k < back.cells.size(); ++k) {
    INFO("cell ", k);
    CHECK(same_bits(back.cells[k].W, expected.cells[k].W));
    CHECK(same_bits(back.cells[k].R, expected.cells[k].R));
    CHECK(same_bits(back.cells[k].bw, expected.cells[k].bw));
    CHECK(same_bits(back.cells[k].br, expected.cells[k].br));
  }
  // And so the float GRU runs the read-back model to the same bits.
  const int T = 3, N = 2;
  const std::vector<float> x = qgru::test::random_input(static_cast<size_t>(T) * N * expected.input_size, 17);
  const qgru::FloatGruResult a = qgru::run_float_gru(expected, x.data(), T, N, nullptr);
  const qgru::FloatGruResult b = qgru::run_float_gru(back, x.data(), T, N, nullptr);
  CHECK(same_bits(a.output, b.output));
  CHECK(same_bits(a.h_n, b.h_n));
}

// ONNX's own checker and strict shape inference (libonnx 1.12 knows opsets up to 17).
void check_with_onnx(const std::string& bytes) {
  onnx::ModelProto model = parse(bytes);
  if (model.opset_import(0).version() > 17) return;
  CHECK_NOTHROW(onnx::checker::check_model(model));
  CHECK_NOTHROW(onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                                   onnx::ShapeInferenceOptions(true, 1, false)));
}

}  // namespace

TEST_CASE("an exported artifact reads back through qgru's ONNX import as its dequantized weights, bit for bit") {
  const qgru::BitwidthConfig config = qgru::load_bitwidth_config("int8");
  struct Shape { int C, H, L, D; };
  for (const Shape s : {Shape{5, 7, 2, 2}, Shape{3, 33, 2, 1}, Shape{4, 1, 1, 1}, Shape{6, 9, 3, 2}}) {
    const qgru::test::CalibratedCase c = qgru::test::calibrated_case(s.C, s.H, s.L, s.D, 3, 2, config, 7);
    const qgru::FloatGruModel fe = qgru::dequantized_float_gru(c.quantized);
    for (int opset : {11, 13, 17, 22}) {
      for (bool extras : {false, true}) {
        INFO("C ", s.C, " H ", s.H, " L ", s.L, " D ", s.D, " opset ", opset, " batch-first/h0/lengths ", extras);
        qgru::OnnxExportOptions options;
        options.opset = opset;
        options.batch_first = options.h0_input = options.lengths_input = extras;
        const std::string bytes = qgru::onnx_gru_model_bytes(fe, options);
        check_round_trip(fe, bytes);
        check_with_onnx(bytes);
        CHECK(qgru::onnx_gru_model_bytes(fe, options) == bytes);  // deterministic
        const qgru::OnnxGraphGrus grus =
            qgru::inspect_onnx_gru_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "exported.onnx", "");
        CHECK(grus.stacks.size() == 1);  // one stack: the importer follows the chain
        CHECK(grus.nodes.size() == static_cast<size_t>(s.L));
      }
    }
  }
}

TEST_CASE("the graph is PyTorch's nn.GRU export: inputs, outputs, attributes and the reshaping between layers") {
  const qgru::FloatGruModel model = qgru::test::random_float_gru(5, 7, 2, 2, 3);
  qgru::OnnxExportOptions options;
  options.opset = 17;
  options.metadata = {{"k", "v"}};
  const onnx::ModelProto plain = parse(qgru::onnx_gru_model_bytes(model, options));
  CHECK(plain.ir_version() == 8);
  CHECK(plain.opset_import(0).version() == 17);
  CHECK(plain.producer_name() == "qgru");
  REQUIRE(plain.metadata_props_size() == 1);
  CHECK(plain.metadata_props(0).key() == "k");
  CHECK(op_types(plain) == std::vector<std::string>{"GRU", "Transpose", "Reshape", "GRU", "Transpose", "Reshape", "Concat"});
  REQUIRE(plain.graph().input_size() == 1);
  CHECK(plain.graph().input(0).name() == "x");
  const auto& x_shape = plain.graph().input(0).type().tensor_type().shape();
  CHECK(x_shape.dim(0).dim_param() == "T");
  CHECK(x_shape.dim(1).dim_param() == "N");
  CHECK(x_shape.dim(2).dim_value() == 5);
  REQUIRE(plain.graph().output_size() == 2);
  CHECK(plain.graph().output(0).name() == "y");
  CHECK(plain.graph().output(0).type().tensor_type().shape().dim(2).dim_value() == 14);
  CHECK(plain.graph().output(1).name() == "h_n");
  CHECK(plain.graph().output(1).type().tensor_type().shape().dim(0).dim_value() == 4);
  const onnx::NodeProto& gru1 = plain.graph().node(3);
  CHECK(gru1.input_size() == 4);  // X, W, R, B; no trailing empty inputs
  CHECK(int_attribute(gru1, "hidden_size") == 7);
  CHECK(int_attribute(gru1, "linear_before_reset") == 1);
  const onnx::TensorProto& W1 = initializer(plain, "layer1/W");
  CHECK(std::vector<int64_t>(W1.dims().begin(), W1.dims().end()) == std::vector<int64_t>{2, 21, 14});
  const onnx::TensorProto& B1 = initializer(plain, "layer1/B");
  CHECK(std::vector<int64_t>(B1.dims().begin(), B1.dims().end()) == std::vector<int64_t>{2, 42});
  // B = (bw, br) of direction 0, then of direction 1: the reverse direction's br_z starts at 3H + 6H.
  float value = 0.0f;
  std::memcpy(&value, B1.raw_data().data() + 4 * (6 * 7 + 3 * 7), 4);
  CHECK(value == model.cell(1, 1).br[0]);

  options.opset = 12;
  options.batch_first = options.h0_input = options.lengths_input = true;
  const qgru::FloatGruModel one_direction = qgru::test::random_float_gru(5, 7, 2, 1, 3);
  const onnx::ModelProto full = parse(qgru::onnx_gru_model_bytes(one_direction, options));
  CHECK(full.ir_version() == 7);
  CHECK(op_types(full) == std::vector<std::string>{"Transpose", "Slice", "GRU", "Squeeze", "Slice", "GRU", "Squeeze",
                                                   "Transpose", "Concat"});
  REQUIRE(full.graph().input_size() == 3);
  CHECK(full.graph().input(1).name() == "h0");
  CHECK(full.graph().input(2).name() == "sequence_lens");
  CHECK(full.graph().input(2).type().tensor_type().elem_type() == onnx::TensorProto::INT32);
  CHECK(full.graph().input(0).type().tensor_type().shape().dim(0).dim_param() == "N");  // batch-first
  const onnx::NodeProto& gru = full.graph().node(2);
  REQUIRE(gru.input_size() == 6);
  CHECK(gru.input(4) == "sequence_lens");
  CHECK(gru.input(5) == "layer0/initial_h");
  CHECK(full.graph().node(3).attribute(0).name() == "axes");  // Squeeze's axes attribute before opset 13
}

TEST_CASE("a linear_before_reset = 0 model exports linear_before_reset = 0 (ONNX's default, written explicitly)") {
  qgru::FloatGruModel model = qgru::test::random_float_gru(4, 6, 2, 1, 9);
  model.linear_before_reset = false;
  const std::string bytes = qgru::onnx_gru_model_bytes(model, {});
  const onnx::ModelProto proto = parse(bytes);
  for (const onnx::NodeProto& n : proto.graph().node()) {
    if (n.op_type() == "GRU") CHECK(int_attribute(n, "linear_before_reset") == 0);
  }
  check_round_trip(model, bytes);
}

TEST_CASE("quantize-dequantize of x: the artifact's scale and zero point, its code range, the container type") {
  const qgru::FloatGruModel model = qgru::test::random_float_gru(3, 4, 1, 1, 2);
  qgru::OnnxExportOptions options;
  qgru::TensorQuant x;  // int8 asymmetric: the container's own range, no Clip
  x.bits = 8;
  x.shift = 5;
  x.zp = -7;
  options.input_quant = x;
  onnx::ModelProto proto = parse(qgru::onnx_gru_model_bytes(model, options));
  CHECK(op_types(proto) == std::vector<std::string>{"QuantizeLinear", "DequantizeLinear", "GRU", "Squeeze"});
  const onnx::TensorProto& scale = initializer(proto, "x_scale");
  float scale_value = 0.0f;
  std::memcpy(&scale_value, scale.raw_data().data(), 4);
  CHECK(scale_value == 1.0f / 32.0f);
  CHECK(scale.dims_size() == 0);
  const onnx::TensorProto& zp = initializer(proto, "x_zero_point");
  CHECK(zp.data_type() == onnx::TensorProto::INT8);
  CHECK(static_cast<int8_t>(zp.raw_data()[0]) == -7);
  CHECK(proto.graph().node(2).input(0) == "x_dequantized");
  check_with_onnx(qgru::onnx_gru_model_bytes(model, options));

  // 6-bit unsigned: UINT8 codes, then a Clip at the 6-bit range [0, 63] dequantized.
  x.bits = 6;
  x.is_unsigned = true;
  x.zp = 3;
  options.input_quant = x;
  proto = parse(qgru::onnx_gru_model_bytes(model, options));
  CHECK(op_types(proto) == std::vector<std::string>{"QuantizeLinear", "DequantizeLinear", "Clip", "GRU", "Squeeze"});
  CHECK(initializer(proto, "x_zero_point").data_type() == onnx::TensorProto::UINT8);
  float bound = 0.0f;
  std::memcpy(&bound, initializer(proto, "x_min").raw_data().data(), 4);
  CHECK(bound == -3.0f / 32.0f);
  std::memcpy(&bound, initializer(proto, "x_max").raw_data().data(), 4);
  CHECK(bound == 60.0f / 32.0f);
  check_with_onnx(qgru::onnx_gru_model_bytes(model, options));

  // 16-bit codes need opset 21's INT16 QuantizeLinear: refused below it, naming the opset.
  x.bits = 16;
  x.is_unsigned = false;
  x.zp = -300;
  options.input_quant = x;
  options.opset = 17;
  try {
    qgru::onnx_gru_model_bytes(model, options);
    FAIL("16-bit x at opset 17 was accepted");
  } catch (const qgru::Error& e) {
    CHECK(std::string(e.what()).find("opset 21") != std::string::npos);
  }
  options.opset = 21;
  proto = parse(qgru::onnx_gru_model_bytes(model, options));
  CHECK(proto.ir_version() == 10);
  CHECK(initializer(proto, "x_zero_point").data_type() == onnx::TensorProto::INT16);
  const std::string& zp16 = initializer(proto, "x_zero_point").raw_data();
  REQUIRE(zp16.size() == 2);
  CHECK(static_cast<int16_t>(static_cast<uint8_t>(zp16[0]) | (static_cast<uint8_t>(zp16[1]) << 8)) == -300);
}

TEST_CASE("an opset the export does not write is refused, naming the opsets it writes") {
  const qgru::FloatGruModel model = qgru::test::random_float_gru(3, 4, 1, 1, 2);
  for (int opset : {10, 23}) {
    qgru::OnnxExportOptions options;
    options.opset = opset;
    try {
      qgru::onnx_gru_model_bytes(model, options);
      FAIL("opset " << opset << " accepted");
    } catch (const qgru::Error& e) {
      CHECK(std::string(e.what()).find("opsets 11 .. 22") != std::string::npos);
    }
  }
}
