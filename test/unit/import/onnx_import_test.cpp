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
#include "onnx_graph_builder.h"

using namespace onnx_test;

namespace {

void add_string_attribute(onnx::NodeProto* node, const char* name, const std::string& value) {
  auto* a = node->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
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
