// ONNX GRU import: the committed fixtures (graphs written as exporters write them, outputs by onnxruntime,
// scripts/make_onnx_fixtures.py) run by qgru's float GRU within 1e-5 of onnxruntime; stacks, --node, and
// every refusal with its message, on graphs built here with the ONNX protobuf classes.
#include <doctest/doctest.h>

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "qgru/import/load_float_gru.h"
#include "qgru/import/onnx_gru.h"
#include "qgru/io/npy.h"
#include "qgru/io/sequence_io.h"
#include "qgru/model/float_gru.h"

namespace {

const std::string kOnnxData = std::string(QGRU_TEST_DATA_DIR) + "/onnx/";

std::vector<float> floats(const std::string& path) { return qgru::tensor_to_f32(qgru::read_npy(path)); }

// qgru's float GRU on a fixture's x against onnxruntime's y and h_n: the largest absolute difference.
double max_difference_to_onnxruntime(const std::string& fixture, const qgru::FloatGruModel& model) {
  const qgru::Tensor x = qgru::read_npy(kOnnxData + fixture + "/x.npy");
  const int T = static_cast<int>(x.shape[0]), N = static_cast<int>(x.shape[1]);
  const std::vector<float> xs = qgru::tensor_to_f32(x);
  std::vector<int32_t> lengths;  // the fixture's sequence_lens, when it has them
  if (std::filesystem::exists(kOnnxData + fixture + "/lengths.npy")) {
    lengths = qgru::read_sequence_lengths(kOnnxData + fixture + "/lengths.npy", N, T);
  }
  const qgru::FloatGruResult result =
      qgru::run_float_gru(model, xs.data(), T, N, nullptr, nullptr, lengths.empty() ? nullptr : lengths.data());
  const std::vector<float> y = floats(kOnnxData + fixture + "/y.npy");
  const std::vector<float> h_n = floats(kOnnxData + fixture + "/h_n.npy");
  REQUIRE(y.size() == result.output.size());
  REQUIRE(h_n.size() == result.h_n.size());
  double worst = 0.0;
  for (size_t i = 0; i < y.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(y[i]) - result.output[i]));
  for (size_t i = 0; i < h_n.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(h_n[i]) - result.h_n[i]));
  return worst;
}

// A graph with GRU nodes built here: X -> GRU(W, R, B) [-> Squeeze -> GRU ...].
struct GraphBuilder {
  onnx::ModelProto model;
  onnx::GraphProto* graph = model.mutable_graph();
  GraphBuilder() {
    model.set_ir_version(7);
    model.add_opset_import()->set_version(14);
    graph->add_input()->set_name("x");
  }
  void constant(const std::string& name, std::vector<int64_t> dims, float value = 0.1f) {
    onnx::TensorProto* t = graph->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t count = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      count *= d;
    }
    for (int64_t i = 0; i < count; ++i) t->add_float_data(value + 0.001f * static_cast<float>(i % 7));
  }
  onnx::NodeProto* gru(const std::string& name, const std::string& x, const std::string& prefix, int C, int H, int D,
                       bool bias = true) {
    constant(prefix + "W", {D, 3 * H, C});
    constant(prefix + "R", {D, 3 * H, H});
    if (bias) constant(prefix + "B", {D, 6 * H});
    onnx::NodeProto* node = graph->add_node();
    node->set_op_type("GRU");
    node->set_name(name);
    for (const std::string& in : {x, prefix + "W", prefix + "R", bias ? prefix + "B" : std::string()}) node->add_input(in);
    node->add_output(prefix + "Y");
    auto* hs = node->add_attribute();
    hs->set_name("hidden_size");
    hs->set_type(onnx::AttributeProto::INT);
    hs->set_i(H);
    if (D == 2) {
      auto* dir = node->add_attribute();
      dir->set_name("direction");
      dir->set_type(onnx::AttributeProto::STRING);
      dir->set_s("bidirectional");
    }
    return node;
  }
  std::string squeeze(const std::string& y, const std::string& out) {
    onnx::TensorProto* axes = graph->add_initializer();
    axes->set_name(out + "_axes");
    axes->set_data_type(onnx::TensorProto::INT64);
    axes->add_dims(1);
    axes->add_int64_data(1);
    onnx::NodeProto* node = graph->add_node();
    node->set_op_type("Squeeze");
    node->add_input(y);
    node->add_input(out + "_axes");
    node->add_output(out);
    return out;
  }
  std::string bytes() const { return model.SerializeAsString(); }
};

void add_string_attribute(onnx::NodeProto* node, const char* name, const std::string& value) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

std::string import_error(const std::string& bytes, const std::string& node = "") {
  try {
    qgru::onnx_gru_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m.onnx", "", node);
  } catch (const qgru::Error& e) {
    return e.what();
  }
  return "(no error)";
}

qgru::FloatGruModel import(const std::string& bytes, const std::string& node = "") {
  return qgru::onnx_gru_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m.onnx", "", node);
}

}  // namespace

TEST_CASE("a PyTorch-exported 2-layer GRU runs within 1e-5 of onnxruntime") {
  const qgru::FloatGruModel model = qgru::load_float_gru(kOnnxData + "pytorch_l2/model.onnx");
  CHECK(model.source_layout == "onnx");
  CHECK(model.num_layers == 2);
  CHECK(model.num_directions == 1);
  CHECK(model.input_size == 5);
  CHECK(model.hidden_size == 7);
  CHECK(model.linear_before_reset);
  CHECK(max_difference_to_onnxruntime("pytorch_l2", model) <= 1e-5);
}

TEST_CASE("a bidirectional 2-layer GRU with weights in an external data file runs within 1e-5 of onnxruntime") {
  const qgru::FloatGruModel model = qgru::load_float_gru(kOnnxData + "pytorch_l2_bidir_external/model.onnx");
  CHECK(model.num_layers == 2);
  CHECK(model.num_directions == 2);
  CHECK(model.cell(1, 1).input_size == 14);
  CHECK(max_difference_to_onnxruntime("pytorch_l2_bidir_external", model) <= 1e-5);
}

TEST_CASE("the linear_before_reset = 0 cell (the ONNX default) runs within 1e-5 of onnxruntime") {
  const qgru::FloatGruModel model = qgru::load_float_gru(kOnnxData + "lbr0_l2_opset11/model.onnx");
  CHECK_FALSE(model.linear_before_reset);
  CHECK(model.num_layers == 2);  // Squeeze with an axes attribute (opset 11) chains the layers too
  CHECK(std::all_of(model.cell(0, 0).bw.begin(), model.cell(0, 0).bw.end(), [](float b) { return b == 0.0f; }));
  CHECK(max_difference_to_onnxruntime("lbr0_l2_opset11", model) <= 1e-5);
}

TEST_CASE("sequence_lens: batches of unequal lengths run within 1e-5 of onnxruntime, both cells, both directions") {
  for (const char* fixture : {"lbr0_bidir_lengths", "pytorch_l2_bidir_lengths"}) {
    CAPTURE(fixture);
    const qgru::FloatGruModel model = qgru::load_float_gru(kOnnxData + fixture + "/model.onnx");
    CHECK(model.num_directions == 2);
    CHECK(max_difference_to_onnxruntime(fixture, model) <= 1e-5);
  }
}

TEST_CASE("inspect lists every GRU node with its sizes, direction, cell variant and stack") {
  const qgru::OnnxGraphGrus grus = qgru::inspect_onnx_grus(kOnnxData + "pytorch_l2_bidir_external/model.onnx");
  REQUIRE(grus.nodes.size() == 2);
  CHECK(grus.stacks.size() == 1);
  CHECK(grus.nodes[1].name == "/rnn/GRU_1");
  CHECK(grus.nodes[1].input_size == 14);
  CHECK(grus.nodes[1].layer == 1);
  const std::string text = qgru::describe_onnx_grus(grus);
  CHECK(text.find("GRU '/rnn/GRU_0': C = 5, H = 7, bidirectional, linear_before_reset = 1, activations Sigmoid,Tanh "
                  "(default); stack 0 layer 0") != std::string::npos);
  const qgru::OnnxGraphGrus lengths = qgru::inspect_onnx_grus(kOnnxData + "lbr0_bidir_lengths/model.onnx");
  CHECK(lengths.nodes.at(0).sequence_lens == "sequence_lens");
  CHECK(lengths.nodes.at(0).linear_before_reset == 0);
}

TEST_CASE("two separate GRU stacks need --node, which picks the stack from that node on") {
  GraphBuilder b;
  b.gru("enc0", "x", "e0", 3, 4, 1);
  b.gru("enc1", b.squeeze("e0Y", "e0out"), "e1", 4, 4, 1);
  b.gru("dec", "x", "d0", 3, 2, 1);
  const std::string bytes = b.bytes();
  CHECK(import_error(bytes) == "m.onnx: the graph holds 2 GRU stacks: 'enc0' (2 layer(s), C = 3, H = 4, forward); "
                               "'dec' (1 layer(s), C = 3, H = 2, forward); pick one with --node NAME");
  CHECK(import(bytes, "enc0").num_layers == 2);
  CHECK(import(bytes, "enc1").num_layers == 1);
  CHECK(import(bytes, "enc1").input_size == 4);
  CHECK(import(bytes, "dec").hidden_size == 2);
  CHECK(import_error(bytes, "gru") == "m.onnx: --node 'gru' is not a GRU node of the graph; its GRU nodes: 'enc0', "
                                      "'enc1', 'dec'");
}

TEST_CASE("what qgru's cell cannot compute is refused, naming the node and the attribute") {
  {
    GraphBuilder b;
    auto* node = b.gru("g", "x", "a", 3, 4, 1);
    auto* clip = node->add_attribute();
    clip->set_name("clip");
    clip->set_type(onnx::AttributeProto::FLOAT);
    clip->set_f(3.0f);
    CHECK(import_error(b.bytes()).find("m.onnx: GRU node 'g': clip = 3.0") == 0);
  }
  {
    GraphBuilder b;
    auto* node = b.gru("g", "x", "a", 3, 4, 1);
    auto* acts = node->add_attribute();
    acts->set_name("activations");
    acts->set_type(onnx::AttributeProto::STRINGS);
    acts->add_strings("HardSigmoid");
    acts->add_strings("Tanh");
    CHECK(import_error(b.bytes()) == "m.onnx: GRU node 'g': activations [HardSigmoid, Tanh]: qgru's cell is Sigmoid for "
                                     "the gates and Tanh for the new gate only");
  }
  {
    GraphBuilder b;
    auto* node = b.gru("g", "x", "a", 3, 4, 1);
    auto* acts = node->add_attribute();
    acts->set_name("activations");
    acts->set_type(onnx::AttributeProto::STRINGS);
    acts->add_strings("sigmoid");
    acts->add_strings("tanh");
    CHECK(import(b.bytes()).hidden_size == 4);  // the defaults, written out (any case), are accepted
  }
  {
    GraphBuilder b;
    add_string_attribute(b.gru("g", "x", "a", 3, 4, 1), "direction", "reverse");
    CHECK(import_error(b.bytes()).find("m.onnx: GRU node 'g': direction 'reverse' alone is not read") == 0);
  }
  {
    GraphBuilder b;
    b.gru("g", "x", "a", 3, 4, 1);
    b.graph->mutable_node(0)->set_input(1, "computed");
    onnx::NodeProto* concat = b.graph->add_node();
    concat->set_op_type("Concat");
    concat->set_name("make_W");
    concat->add_output("computed");
    CHECK(import_error(b.bytes()) == "m.onnx: GRU node 'g': W 'computed' is computed by node 'make_W' (Concat), not stored: "
                                     "export the model with constant folding (torch.onnx.export(..., "
                                     "do_constant_folding=True)) so that weights are initializers");
  }
  {
    GraphBuilder b;
    b.gru("g", "x", "a", 3, 4, 1);
    b.graph->mutable_node(0)->add_input("");  // sequence_lens
    b.graph->mutable_node(0)->add_input("h0");
    b.constant("h0", {1, 2, 4}, 0.5f);
    CHECK(import_error(b.bytes()).find("m.onnx: GRU node 'g': initial_h 'h0' is a constant non-zero state") == 0);
  }
  {
    GraphBuilder b;
    b.gru("g", "x", "a", 3, 4, 1);
    b.graph->mutable_initializer(1)->add_float_data(1.0f);  // R with one value too many
    CHECK(import_error(b.bytes()) == "m.onnx: GRU node 'g': R: 49 values stored, shape [1, 12, 4] needs 48");
  }
  {
    GraphBuilder b;
    b.gru("g", "x", "a", 3, 4, 1);
    b.graph->mutable_initializer(0)->set_float_data(5, NAN);
    CHECK(import_error(b.bytes()) == "m.onnx: GRU node 'g': W: element 5 is NaN (as float32); weights must be finite");
  }
  {
    GraphBuilder b;
    onnx::NodeProto* lstm = b.graph->add_node();
    lstm->set_op_type("LSTM");
    lstm->set_name("lstm");
    CHECK(import_error(b.bytes()) == "m.onnx: no GRU node in the ONNX graph (other recurrent nodes: LSTM 'lstm'; qgru reads "
                                     "GRU nodes only)");
  }
  CHECK(import_error("not a protobuf \xff\xff\xff") == "m.onnx: not a valid ONNX model (the protobuf ModelProto does not parse)");
}

TEST_CASE("external data may not point outside the model's folder") {
  GraphBuilder b;
  b.gru("g", "x", "a", 3, 4, 1, false);
  onnx::TensorProto* W = b.graph->mutable_initializer(0);
  W->clear_float_data();
  W->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* entry = W->add_external_data();
  entry->set_key("location");
  entry->set_value("../secret.bin");
  const std::string folder = (std::filesystem::temp_directory_path() / "qgru_onnx_external").string();
  std::filesystem::create_directories(folder);
  std::ofstream(folder + "/m.onnx", std::ios::binary) << b.bytes();
  try {
    qgru::load_onnx_gru(folder + "/m.onnx", "");
    FAIL("an external data path with .. was followed");
  } catch (const qgru::Error& e) {
    CHECK(std::string(e.what()).find("GRU node 'g': W: external data location '../secret.bin' must be a file name inside "
                                     "the model's folder") != std::string::npos);
  }
}
