#pragma once
// ONNX graphs built with the ONNX protobuf classes for the importer's tests: GRU nodes with constant weights,
// the layout ops between them, and the importer's answer (the model, or its error message); the committed
// fixtures (scripts/make_onnx_fixtures.py) run against onnxruntime's outputs.
#include <doctest/doctest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/import/onnx_gru.h"
#include "qgru/io/npy.h"
#include "qgru/io/sequence_io.h"
#include "qgru/model/float_gru.h"

namespace onnx_test {

inline const std::string kOnnxData = std::string(QGRU_TEST_DATA_DIR) + "/onnx/";

inline std::vector<float> floats(const std::string& path) { return qgru::tensor_to_f32(qgru::read_npy(path)); }

// qgru's float GRU on a fixture's x against onnxruntime's y and h_n: the largest absolute difference.
inline double max_difference_to_onnxruntime(const std::string& fixture, const qgru::FloatGruModel& model) {
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
  // A node `op_type` named `name` from `input` to `out`, with an int64 constant second input (axes, shape)
  // when `constant` is given, or an ints attribute `attribute_name`.
  std::string layout(const std::string& op_type, const std::string& name, const std::string& input, const std::string& out,
                     const std::vector<int64_t>* constant = nullptr, const char* attribute_name = nullptr,
                     const std::vector<int64_t>& ints = {}) {
    onnx::NodeProto* node = graph->add_node();
    node->set_op_type(op_type);
    node->set_name(name);
    node->add_input(input);
    if (constant != nullptr) {
      onnx::TensorProto* t = graph->add_initializer();
      t->set_name(out + "_arg");
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(static_cast<int64_t>(constant->size()));
      for (int64_t v : *constant) t->add_int64_data(v);
      node->add_input(out + "_arg");
    }
    if (attribute_name != nullptr) {
      auto* a = node->add_attribute();
      a->set_name(attribute_name);
      if (ints.size() == 1 && std::string(attribute_name) == "axis") {
        a->set_type(onnx::AttributeProto::INT);
        a->set_i(ints[0]);
      } else {
        a->set_type(onnx::AttributeProto::INTS);
        for (int64_t v : ints) a->add_ints(v);
      }
    }
    node->add_output(out);
    return out;
  }
  std::string bytes() const { return model.SerializeAsString(); }
};

inline std::string import_error(const std::string& bytes, const std::string& node = "") {
  try {
    qgru::onnx_gru_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m.onnx", "", node);
  } catch (const qgru::Error& e) {
    return e.what();
  }
  return "(no error)";
}

inline qgru::FloatGruModel import(const std::string& bytes, const std::string& node = "") {
  return qgru::onnx_gru_from_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m.onnx", "", node);
}


}  // namespace onnx_test
