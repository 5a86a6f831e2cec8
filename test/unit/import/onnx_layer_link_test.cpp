// Layers chained by their effect: the layout ops between two GRU nodes are followed on a symbolic
// [T, D, N, H] tensor (qgru/import/onnx_layer_link.h). Graphs that onnxruntime runs as a plain stacked GRU,
// in several spellings (committed fixtures, scripts/make_onnx_fixtures.py "link_*"), import as one stack and
// run within 1e-5 of onnxruntime; links that move the wrong axes are refused, naming the op.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "onnx_graph_builder.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/import/onnx_layer_link.h"

using namespace onnx_test;
namespace link = qgru::onnx_link;

namespace {

// The effect of `ops` on Y of a GRU with D directions and H units (T and N as given, -1 unknown): "" and the
// tensor's text, or the problem.
std::string follow(const std::vector<link::LayoutOp>& ops, int64_t D, int64_t H, int64_t T = -1, int64_t N = -1) {
  link::AxisSizes sizes;
  sizes.D = D;
  sizes.H = H;
  sizes.T = T;
  sizes.N = N;
  std::vector<link::Hypothesis> tensor = link::gru_output(sizes);
  for (const link::LayoutOp& op : ops) {
    const std::string problem = link::apply_layout_op(op, tensor);
    if (!problem.empty()) return problem;
  }
  const std::string problem = link::next_layer_input_problem(tensor);
  return problem.empty() ? "X" : problem;
}

link::LayoutOp op(const std::string& type, std::vector<int64_t> ints, bool has_ints = true) {
  link::LayoutOp o;
  o.op_type = type;
  o.name = type[0] + std::string("1");
  o.ints = std::move(ints);
  o.has_ints = has_ints;
  return o;
}

}  // namespace

TEST_CASE("every spelling of [T, D, N, H] -> [T, N, D·H] is the next layer's X") {
  // One direction.
  CHECK(follow({op("Squeeze", {1})}, 1, 7) == "X");
  CHECK(follow({op("Squeeze", {-3})}, 1, 7) == "X");
  CHECK(follow({op("Transpose", {0, 2, 1, 3}), op("Reshape", {6, 4, 7})}, 1, 7) == "X");  // binds T = 6, N = 4
  CHECK(follow({op("Transpose", {0, 2, 1, 3}), op("Reshape", {6, 4, 7})}, 1, 7, 6, 4) == "X");
  CHECK(follow({op("Reshape", {0, -1, 7})}, 1, 7) == "X");
  // With T unknown, 6 could be T (then N is the -1) or N with T = 1: the reading that is X holds (T = 6).
  CHECK(follow({op("Reshape", {6, -1, 7})}, 1, 7) == "X");
  CHECK(follow({op("Squeeze", {1}), op("Identity", {}, false), op("Unsqueeze", {0}), op("Squeeze", {0})}, 1, 7) == "X");
  CHECK(follow({op("Flatten", {2}), op("Reshape", {0, 4, -1})}, 1, 7) == "X");  // [T, N·H] -> [T, 4, -1]
  // N = 1: an empty dimension anywhere in memory order is the same tensor.
  CHECK(follow({op("Reshape", {6, 1, 7})}, 1, 7, -1, 1) == "X");
  CHECK(follow({op("Transpose", {0, 2, 1, 3}), op("Reshape", {6, 1, 7})}, 1, 7, 6) == "X");  // binds N = 1
  // Two directions.
  CHECK(follow({op("Transpose", {0, 2, 1, 3}), op("Reshape", {0, 0, -1})}, 2, 7) == "X");
  CHECK(follow({op("Transpose", {0, 2, 1, 3}), op("Reshape", {0, 0, 14})}, 2, 7) == "X");
  CHECK(follow({op("Transpose", {0, 2, 1, 3}), op("Flatten", {2}), op("Reshape", {-1, 4, 14})}, 2, 7) == "X");
  CHECK(follow({op("Transpose", {2, 0, 1, 3}), op("Reshape", {0, 0, -1}), op("Transpose", {1, 0, 2})}, 2, 7) == "X");
  CHECK(follow({op("Transpose", {0, 2, 1, 3}), op("Unsqueeze", {0}), op("Reshape", {0, 0, 0, -1}), op("Squeeze", {0})},
               2, 7) == "X");
}

TEST_CASE("links that move the wrong axes are refused naming the op and the layout they make") {
  // The directions interleaved with the units ([H, D] instead of [D, H]): onnxruntime runs it, wrongly.
  CHECK(follow({op("Transpose", {0, 2, 3, 1}), op("Reshape", {0, 0, -1})}, 2, 7) ==
        "the layer's output arrives as [T, N, H·D], not X = [T, N, D·H] (D = 2, H = 7)");
  // No Transpose: the directions stay ahead of the batch.
  CHECK(follow({op("Reshape", {0, 2, -1})}, 2, 7) == "the layer's output arrives as [T, D, N·H], not X = [T, N, D·H] "
                                                      "(D = 2, H = 7)");
  // Batch-major without the way back.
  CHECK(follow({op("Transpose", {2, 0, 1, 3}), op("Reshape", {0, 0, -1})}, 2, 7) ==
        "the layer's output arrives as [N, T, D·H], not X = [T, N, D·H] (D = 2, H = 7)");
  CHECK(follow({op("Squeeze", {2})}, 1, 7) == "Squeeze 'S1': axis 2 of [T, 1, N, H] is not of size 1");
  CHECK(follow({op("Squeeze", {}, false)}, 1, 7) ==
        "Squeeze 'S1' without axes on [T, 1, N, H]: it would also remove a T or N of 1");
  CHECK(follow({op("Transpose", {0, 2, 1})}, 1, 7) == "Transpose 'T1': perm [0, 2, 1] is not a permutation of 4 axes");
  CHECK(follow({op("Reshape", {0, 0, 5})}, 1, 7, 6, 4) == "Reshape 'R1' to [0, 0, 5]: the shape does not fit [T, 1, N, H]");
  CHECK(follow({op("Reshape", {-1, -1, 7})}, 1, 7) == "Reshape 'R1' to [-1, -1, 7]: more than one -1");
  // T and N unknown, one constant for both: no reading is X; each is named.
  CHECK(follow({op("Squeeze", {1}), op("Reshape", {12, 7})}, 1, 7) ==
        "the layer's output arrives as [N, H] or [T, H], not X = [T, N, H] (D = 1, H = 7)");
}

TEST_CASE("layers linked by other spellings than the exporters' import as one stack, within 1e-5 of onnxruntime") {
  struct Case {
    const char* fixture;
    int layers, directions;
  };
  for (const Case& c : {Case{"link_transpose_reshape_constant", 2, 1}, Case{"link_reshape_minus_one", 3, 1},
                        Case{"link_squeeze_identity_unsqueeze", 2, 1}, Case{"link_bidir_flatten_reshape", 2, 2},
                        Case{"link_bidir_batch_major_detour", 2, 2}}) {
    CAPTURE(c.fixture);
    const qgru::OnnxGraphGrus grus = qgru::inspect_onnx_grus(kOnnxData + c.fixture + "/model.onnx");
    CHECK(grus.stacks.size() == 1);
    const qgru::FloatGruModel model = qgru::load_float_gru(kOnnxData + c.fixture + "/model.onnx");
    CHECK(model.num_layers == c.layers);
    CHECK(model.num_directions == c.directions);
    CHECK(max_difference_to_onnxruntime(c.fixture, model) <= 1e-5);
  }
}

TEST_CASE("a graph of unknown T and N: a constant Reshape binds them, and a wrong link names the op that breaks it") {
  const std::vector<int64_t> time_major = {0, 2, 1, 3}, t_n_h = {6, 4, 5}, mixed = {0, 0, -1}, h_then_d = {0, 2, 3, 1};
  {
    GraphBuilder b;  // x has no declared shape
    b.gru("g0", "x", "a", 3, 5, 1);
    const std::string tr = b.layout("Transpose", "t", "aY", "t_out", nullptr, "perm", time_major);
    b.gru("g1", b.layout("Reshape", "r", tr, "r_out", &t_n_h), "b", 5, 5, 1);
    const qgru::FloatGruModel model = import(b.bytes());
    CHECK(model.num_layers == 2);
    CHECK(model.cell(1, 0).input_size == 5);
  }
  {
    GraphBuilder b;
    b.gru("g0", "x", "a", 3, 5, 2);
    const std::string tr = b.layout("Transpose", "t", "aY", "t_out", nullptr, "perm", h_then_d);
    b.gru("g1", b.layout("Reshape", "r", tr, "r_out", &mixed), "b", 10, 5, 2);
    CHECK(import_error(b.bytes()) ==
          "m.onnx: the graph holds 2 GRU stacks: 'g0' (1 layer(s), C = 3, H = 5, bidirectional); 'g1' (1 layer(s), "
          "C = 10, H = 5, bidirectional); 'g0' feeds GRU 'g1' (through Transpose 't', Reshape 'r'), but the layer's "
          "output arrives as [T, N, H·D], not X = [T, N, D·H] (D = 2, H = 5); pick one with --node NAME");
    // qgru inspect says it on the node's line.
    const std::string bytes = b.bytes();
    const qgru::OnnxGraphGrus grus =
        qgru::inspect_onnx_gru_bytes(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m.onnx", "");
    CHECK(qgru::describe_onnx_grus(grus).find("stack 0 layer 0; not chained: 'g0' feeds GRU 'g1'") != std::string::npos);
  }
  {
    GraphBuilder b;
    b.gru("g0", "x", "a", 3, 5, 1);
    const std::string tr = b.layout("Transpose", "t", "aY", "t_out", nullptr, "perm", time_major);
    const std::string relu = b.layout("Relu", "act", tr, "act_out");
    b.gru("g1", b.layout("Reshape", "r", relu, "r_out", &t_n_h), "b", 5, 5, 1);
    CHECK(import_error(b.bytes()).find("; 'g0''s output (through Transpose 't') goes on into Relu 'act', which is not a "
                                       "layout op; pick one with --node NAME") != std::string::npos);
  }
}
