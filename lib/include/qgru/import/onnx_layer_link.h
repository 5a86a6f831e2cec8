#pragma once
// How one ONNX GRU layer's output reaches the next layer's input, judged by its effect: the layout ops
// between the two GRU nodes (Identity, Squeeze, Unsqueeze, Transpose, Reshape, Flatten) are followed on a
// symbolic tensor, and the link is a layer stack iff their composed effect turns Y [T, D, N, H] into
// X = [T, N, D·H] with the directions concatenated as the next GRU expects (the forward direction's H
// channels, then the backward's: D the slower axis of the last dimension). Any exporter's spelling of that
// (Squeeze(1); Transpose(0, 2, 1, 3) + Reshape([0, 0, -1]); Reshape to constants; Flatten + Reshape; ...) is
// accepted, anything else refused naming the op that breaks the chain.
//
// The symbolic tensor holds, per dimension, the axes of Y it is made of in memory order (slowest first); a
// dimension of no axis has size 1. An axis of size 1 moves nothing in memory, so it is dropped everywhere:
// D when the GRU runs one direction, and T or N once a constant shape says they are 1. T and N are unknown
// unless the graph declares them (its input's static shape) or a constant Reshape shape names them; a
// constant that names them binds them (the graph then runs at that length or batch only, which the graph
// itself says).
#include <cstdint>
#include <string>
#include <vector>

namespace qgru::onnx_link {

enum class Axis : uint8_t { T, D, N, H };

// Sizes of the axes of Y; -1: not known (T and N until something binds them).
struct AxisSizes {
  int64_t T = -1, D = 1, N = -1, H = 1;
  int64_t of(Axis axis) const;
  void set(Axis axis, int64_t size);
};

struct SymbolicTensor {
  std::vector<std::vector<Axis>> dims;
};

// The ops of a link, decoded from the graph: the op type, the node's name (for messages) and its integer
// argument: Transpose's perm, Squeeze/Unsqueeze's axes, Reshape's constant shape, Flatten's axis.
struct LayoutOp {
  std::string op_type;
  std::string name;
  std::vector<int64_t> ints;
  bool has_ints = false;   // false: the attribute or input is absent (Transpose reverses, Squeeze takes every 1)
  bool allowzero = false;  // Reshape (opset 14): a 0 in the shape is a 0, not "copy this dimension"
};

// One reading of the tensor: its layout and the sizes bound so far. A Reshape whose constants can split the
// axes in more than one way (6 is T, or N with T = 1) gives one reading per way; the link holds when one of
// them is the next layer's X (the constants then say the graph runs at those T and N).
struct Hypothesis {
  SymbolicTensor tensor;
  AxisSizes sizes;
};

// Y [T, D, N, H] with D and H known, sizes 1 dropped.
std::vector<Hypothesis> gru_output(const AxisSizes& sizes);

// True for the op types this module follows.
bool is_layout_op(const std::string& op_type);

// Applies `op` to every reading, keeping those it fits. Returns "" or, when it fits none, why the op cannot be
// followed, in words that name the op: "Reshape 'r' to [6, -1, 5]: the shape does not fit [T, 1, N, H]".
std::string apply_layout_op(const LayoutOp& op, std::vector<Hypothesis>& hypotheses);

// "" when a reading is the next layer's X = [T, N, D·H] (its sizes into `bound` when given); else what the
// readings are instead.
std::string next_layer_input_problem(const std::vector<Hypothesis>& hypotheses, AxisSizes* bound = nullptr);

// "[T, N, D·H]" (an empty dimension is 1).
std::string shape_text(const SymbolicTensor& tensor);

}  // namespace qgru::onnx_link
