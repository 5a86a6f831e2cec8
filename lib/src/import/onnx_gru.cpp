// ONNX GRU import (qgru/import/onnx_gru.h): the graph read by the ONNX project's protobuf classes, GRU nodes
// found and chained into stacks, their weights converted to qgru's layout.
#include "qgru/import/onnx_gru.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <set>

#include "qgru/base/error.h"
#include "qgru/base/input_file.h"
#include "qgru/base/log.h"
#include "qgru/base/tensor.h"
#include "qgru/base/atomic_file.h"
#include "qgru/import/model_file_kind.h"
#include "qgru/import/onnx_layer_link.h"

namespace qgru {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

constexpr int64_t kMaxElements = int64_t{1} << 31;  // a GRU weight beyond 2^31 values is refused

std::string in_quotes(const std::string& name) { return "'" + name + "'"; }

// The graph as the importer needs it: constants by name, the node producing each value, its consumers.
struct Graph {
  std::string source;
  std::string model_dir;
  const onnx::GraphProto* proto = nullptr;
  std::map<std::string, const TensorProto*> constants;  // initializers and Constant nodes' values
  std::map<std::string, int> producer;                  // value name -> node index
  std::map<std::string, std::vector<int>> consumers;    // value name -> node indices
  std::set<std::string> graph_inputs;

  const NodeProto& node(int i) const { return proto->node(i); }
  int single_consumer(const std::string& value) const {
    const auto it = consumers.find(value);
    return it != consumers.end() && it->second.size() == 1 ? it->second[0] : -1;
  }
};

const AttributeProto* attribute(const NodeProto& node, const char* name) {
  for (const AttributeProto& a : node.attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

int64_t int_attribute(const NodeProto& node, const char* name, int64_t fallback) {
  const AttributeProto* a = attribute(node, name);
  return a != nullptr && a->type() == AttributeProto::INT ? a->i() : fallback;
}

std::vector<int64_t> ints_attribute(const NodeProto& node, const char* name) {
  const AttributeProto* a = attribute(node, name);
  if (a == nullptr) return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

// An external data location names a file inside the model's folder: relative, no "..", so that a model cannot
// make qgru read (or the output policy guard) files elsewhere.
bool location_inside_folder(const std::string& location) {
  const std::filesystem::path relative(location);
  if (location.empty() || relative.is_absolute()) return false;
  for (const auto& part : relative) {
    if (part == "..") return false;
  }
  return true;
}

// The bytes of an external-data tensor: location inside the model's folder (location_inside_folder), offset
// and length as recorded.
std::string external_bytes(const Graph& g, const TensorProto& t, const std::string& what, size_t expected) {
  if (g.model_dir.empty()) throw Error(g.source + ": " + what + ": external data is not read here");
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& entry : t.external_data()) {
    try {
      if (entry.key() == "location") location = entry.value();
      if (entry.key() == "offset") offset = std::stoll(entry.value());
      if (entry.key() == "length") length = std::stoll(entry.value());
    } catch (const std::exception&) {
      throw Error(g.source + ": " + what + ": external data " + entry.key() + " '" + entry.value() + "' is not a number");
    }
  }
  if (!location_inside_folder(location)) {
    throw Error(g.source + ": " + what + ": external data location '" + location +
                "' must be a file name inside the model's folder");
  }
  const std::string path = (std::filesystem::path(g.model_dir) / location).string();
  if (length < 0) length = static_cast<int64_t>(expected);
  if (offset < 0 || static_cast<size_t>(length) != expected) {
    throw Error(g.source + ": " + what + ": external data (" + path + ") offset " + std::to_string(offset) + ", length " +
                std::to_string(length) + ", expected " + std::to_string(expected) + " bytes");
  }
  std::string bytes(expected, '\0');
  std::unique_ptr<InputFile> file;
  try {
    file = std::make_unique<InputFile>(path);  // a regular file only: a FIFO would block the read
  } catch (const Error& e) {
    throw Error(g.source + ": " + what + ": cannot open the external data file " + e.what());
  }
  if (static_cast<uint64_t>(offset) > file->size() || expected > file->size() - static_cast<uint64_t>(offset)) {
    throw Error(g.source + ": " + what + ": the external data file " + path + " ends before offset " +
                std::to_string(offset) + " + " + std::to_string(expected) + " bytes");
  }
  file->read_at(static_cast<uint64_t>(offset), bytes.data(), expected, "external data");
  return bytes;
}

// A float tensor's values as float (FLOAT, DOUBLE, FLOAT16, BFLOAT16; raw_data, typed fields or external
// data), with its shape. NaN and Inf are refused.
std::vector<float> tensor_values(const Graph& g, const TensorProto& t, const std::string& what, std::vector<int64_t>& shape) {
  shape.assign(t.dims().begin(), t.dims().end());
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && count > kMaxElements / d)) throw Error(g.source + ": " + what + ": shape " + shape_string(shape) + " is not valid");
    count *= d;
  }
  DType dtype;
  switch (t.data_type()) {
    case TensorProto::FLOAT: dtype = DType::F32; break;
    case TensorProto::DOUBLE: dtype = DType::F64; break;
    case TensorProto::FLOAT16: dtype = DType::F16; break;
    case TensorProto::BFLOAT16: dtype = DType::BF16; break;
    default:
      throw Error(g.source + ": " + what + ": data type " + std::to_string(t.data_type()) +
                  " is not a float type (FLOAT, DOUBLE, FLOAT16, BFLOAT16)");
  }
  const size_t bytes_needed = static_cast<size_t>(count) * dtype_size(dtype);
  std::vector<uint8_t> bytes;
  if (t.data_location() == TensorProto::EXTERNAL) {
    const std::string raw = external_bytes(g, t, what, bytes_needed);
    bytes.assign(raw.begin(), raw.end());
  } else if (t.has_raw_data()) {
    if (t.raw_data().size() != bytes_needed) {
      throw Error(g.source + ": " + what + ": raw_data holds " + std::to_string(t.raw_data().size()) + " bytes, shape " +
                  shape_string(shape) + " needs " + std::to_string(bytes_needed));
    }
    bytes.assign(t.raw_data().begin(), t.raw_data().end());
  } else {
    // Typed fields: float_data (FLOAT), double_data (DOUBLE), int32_data holding the 16-bit patterns (FLOAT16,
    // BFLOAT16), as the ONNX specification stores them.
    const int64_t stored = dtype == DType::F32 ? t.float_data_size() : dtype == DType::F64 ? t.double_data_size() : t.int32_data_size();
    if (stored != count) {
      throw Error(g.source + ": " + what + ": " + std::to_string(stored) + " values stored, shape " + shape_string(shape) +
                  " needs " + std::to_string(count));
    }
    bytes.resize(bytes_needed);
    for (int64_t i = 0; i < count; ++i) {
      if (dtype == DType::F32) {
        const float v = t.float_data(static_cast<int>(i));
        std::memcpy(bytes.data() + i * 4, &v, 4);
      } else if (dtype == DType::F64) {
        const double v = t.double_data(static_cast<int>(i));
        std::memcpy(bytes.data() + i * 8, &v, 8);
      } else {
        const uint16_t v = static_cast<uint16_t>(t.int32_data(static_cast<int>(i)));
        std::memcpy(bytes.data() + i * 2, &v, 2);
      }
    }
  }
  Tensor tensor;
  tensor.dtype = dtype;
  tensor.shape = shape;
  tensor.bytes = std::move(bytes);
  std::vector<float> values = tensor_to_f32(tensor);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      throw Error(g.source + ": " + what + ": element " + std::to_string(i) + " is " +
                  (std::isnan(values[i]) ? "NaN" : "infinite") + " (as float32); weights must be finite");
    }
  }
  return values;
}

// The constant feeding input `slot` of a node, or null when the input is absent (empty name / too few inputs).
// A value computed by another node is refused, naming that node.
const TensorProto* constant_input(const Graph& g, const NodeProto& node, int slot, const std::string& node_name,
                                  const char* role) {
  if (slot >= node.input_size() || node.input(slot).empty()) return nullptr;
  const std::string& value = node.input(slot);
  const auto it = g.constants.find(value);
  if (it != g.constants.end()) return it->second;
  std::string from = "a graph input";
  const auto p = g.producer.find(value);
  if (p != g.producer.end()) from = "node " + in_quotes(g.node(p->second).name()) + " (" + g.node(p->second).op_type() + ")";
  throw Error(g.source + ": GRU node " + in_quotes(node_name) + ": " + role + " " + in_quotes(value) + " is computed by " + from +
              ", not stored: export the model with constant folding (torch.onnx.export(..., do_constant_folding=True)) "
              "so that weights are initializers");
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// An error's text without the "<source>: GRU node '<name>': " that the caller puts in front again.
std::string problem_text(const Graph& g, const std::string& name, const Error& e) {
  std::string text = e.what();
  for (const std::string& prefix : {g.source + ": ", "GRU node " + in_quotes(name) + ": "}) {
    if (text.compare(0, prefix.size(), prefix) == 0) text = text.substr(prefix.size());
  }
  return text;
}

// Attributes and wiring of one GRU node (no weights read yet).
OnnxGruNodeInfo describe_node(const Graph& g, const NodeProto& node, const std::string& name) {
  OnnxGruNodeInfo info;
  info.name = name;
  const AttributeProto* direction = attribute(node, "direction");
  info.direction = direction != nullptr ? direction->s() : "forward";
  info.hidden_size = static_cast<int>(std::clamp<int64_t>(int_attribute(node, "hidden_size", 0), 0, 1 << 24));
  info.linear_before_reset = static_cast<int>(int_attribute(node, "linear_before_reset", 0));
  info.layout = static_cast<int>(int_attribute(node, "layout", 0));
  if (const AttributeProto* clip = attribute(node, "clip")) {
    info.has_clip = true;
    info.clip = clip->f();
  }
  if (const AttributeProto* a = attribute(node, "activations")) {
    for (const std::string& s : a->strings()) info.activations.push_back(s);
  }
  info.sequence_lens = node.input_size() > 4 ? node.input(4) : "";
  info.initial_h = node.input_size() > 5 ? node.input(5) : "";
  info.has_bias = node.input_size() > 3 && !node.input(3).empty();
  const int D = info.direction == "bidirectional" ? 2 : 1;
  // Problems, most fundamental first.
  std::string& problem = info.problem;
  if (node.input_size() < 3 || node.output_size() < 1) {
    problem = "a GRU node needs inputs X, W, R";
  } else if (info.direction != "forward" && info.direction != "bidirectional") {
    problem = info.direction == "reverse"
                  ? "direction 'reverse' alone is not read (qgru's cells run forward, or forward and reverse); reverse "
                    "the time axis of the input and output around a forward GRU instead"
                  : "direction '" + info.direction + "' is not forward, reverse or bidirectional";
  } else if (info.has_clip) {
    problem = "clip = " + std::to_string(info.clip) +
              ": clipping the gate inputs is not implemented by qgru's cell; export without clip";
  } else if (info.linear_before_reset != 0 && info.linear_before_reset != 1) {
    problem = "linear_before_reset = " + std::to_string(info.linear_before_reset) + " is not 0 or 1";
  } else if (info.layout != 0 && info.layout != 1) {
    problem = "layout = " + std::to_string(info.layout) + " is not 0 or 1";
  }
  if (problem.empty() && !info.activations.empty()) {
    std::vector<std::string> expected;
    for (int d = 0; d < D; ++d) {
      expected.push_back("sigmoid");
      expected.push_back("tanh");
    }
    std::vector<std::string> got;
    for (const std::string& a : info.activations) got.push_back(lower(a));
    if (got != expected) {
      std::string list;
      for (const std::string& a : info.activations) list += (list.empty() ? "" : ", ") + a;
      problem = "activations [" + list + "]: qgru's cell is Sigmoid for the gates and Tanh for the new gate only";
    }
  }
  // Sizes from W (read only its shape here).
  if (problem.empty()) {
    try {
      const TensorProto* W = constant_input(g, node, 1, name, "W");
      if (W == nullptr || W->dims_size() != 3) {
        problem = "W must be a constant [num_directions, 3*hidden_size, input_size]";
      } else {
        const int64_t d0 = W->dims(0), rows = W->dims(1), C = W->dims(2);
        if (d0 != D || rows < 3 || rows % 3 != 0 || C < 1 || C > (1 << 24) || rows / 3 > (1 << 24)) {
          problem = "W has shape [" + std::to_string(d0) + ", " + std::to_string(rows) + ", " + std::to_string(C) +
                    "], expected [" + std::to_string(D) + ", 3*hidden_size, input_size]";
        } else {
          info.input_size = static_cast<int>(C);
          if (info.hidden_size == 0) info.hidden_size = static_cast<int>(rows / 3);
          if (rows != 3 * int64_t{info.hidden_size}) {
            problem = "W has " + std::to_string(rows) + " rows, hidden_size = " + std::to_string(info.hidden_size) +
                      " needs " + std::to_string(3 * int64_t{info.hidden_size});
          }
        }
      }
    } catch (const Error& e) {
      problem = problem_text(g, name, e);
    }
  }
  if (problem.empty() && !info.initial_h.empty() && g.constants.count(info.initial_h) > 0) {
    try {
      std::vector<int64_t> shape;
      const std::vector<float> h0 = tensor_values(g, *g.constants.at(info.initial_h), "initial_h", shape);
      if (std::any_of(h0.begin(), h0.end(), [](float v) { return v != 0.0f; })) {
        problem = "initial_h " + in_quotes(info.initial_h) + " is a constant non-zero state in the graph; qgru's h0 "
                  "comes from --h0: export the model with initial_h as a graph input";
      }
    } catch (const Error& e) {
      problem = problem_text(g, name, e);
    }
  }
  return info;
}

int constant_int(const Graph& g, const std::string& value, std::vector<int64_t>& out) {
  const auto it = g.constants.find(value);
  if (it == g.constants.end()) return -1;
  const TensorProto& t = *it->second;
  if (t.data_type() != TensorProto::INT64) return -1;
  out.clear();
  if (t.has_raw_data()) {
    const std::string& raw = t.raw_data();
    if (raw.size() % 8 != 0 || raw.size() > 64) return -1;
    for (size_t i = 0; i < raw.size(); i += 8) {
      int64_t v = 0;
      std::memcpy(&v, raw.data() + i, 8);
      out.push_back(v);
    }
  } else {
    if (t.int64_data_size() > 8) return -1;
    out.assign(t.int64_data().begin(), t.int64_data().end());
  }
  return static_cast<int>(out.size());
}

// A node's first output, or "" (which has no consumer) when a malformed graph gives it none.
const std::string& first_output(const NodeProto& node) {
  static const std::string none;
  return node.output_size() > 0 ? node.output(0) : none;
}

// The static dimensions the graph declares for `value` (its inputs, value_info and outputs), -1 where a
// dimension is symbolic or absent; empty when the graph declares no shape for it.
std::vector<int64_t> declared_dims(const Graph& g, const std::string& value) {
  for (const auto* list : {&g.proto->input(), &g.proto->value_info(), &g.proto->output()}) {
    for (const onnx::ValueInfoProto& info : *list) {
      if (info.name() != value || !info.has_type() || !info.type().has_tensor_type() ||
          !info.type().tensor_type().has_shape()) {
        continue;
      }
      std::vector<int64_t> dims;
      for (const auto& dim : info.type().tensor_type().shape().dim()) dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
      return dims;
    }
  }
  return {};
}

// The layout op `node` as onnx_link follows it; "" or why its arguments cannot be read.
std::string layout_op_of(const Graph& g, const NodeProto& node, const std::string& name, onnx_link::LayoutOp& op) {
  op.op_type = node.op_type();
  op.name = name;
  const std::string& type = node.op_type();
  const char* attribute_name = type == "Transpose" ? "perm" : (type == "Squeeze" || type == "Unsqueeze") ? "axes" : nullptr;
  if (attribute_name != nullptr && attribute(node, attribute_name) != nullptr) {
    op.ints = ints_attribute(node, attribute_name);
    op.has_ints = true;
  }
  if (type == "Flatten" && attribute(node, "axis") != nullptr) {
    op.ints = {int_attribute(node, "axis", 1)};
    op.has_ints = true;
  }
  if (type == "Reshape") op.allowzero = int_attribute(node, "allowzero", 0) != 0;
  // Squeeze/Unsqueeze from opset 13 and Reshape take theirs as a second input, which must be a constant.
  if ((type == "Squeeze" || type == "Unsqueeze" || type == "Reshape") && node.input_size() > 1 && !node.input(1).empty()) {
    if (constant_int(g, node.input(1), op.ints) < 0) {
      return type + " " + in_quotes(name) + ": its " + (type == "Reshape" ? "shape" : "axes") + " " +
             in_quotes(node.input(1)) + " is not a constant (export with constant folding)";
    }
    op.has_ints = true;
  }
  return "";
}

// True when some GRU node consumes `value` or anything computed from it.
bool feeds_a_gru(const Graph& g, const std::string& value) {
  std::vector<std::string> pending = {value};
  std::set<std::string> seen = {value};
  while (!pending.empty()) {
    const std::string current = pending.back();
    pending.pop_back();
    const auto it = g.consumers.find(current);
    if (it == g.consumers.end()) continue;
    for (int at : it->second) {
      if (g.node(at).op_type() == "GRU") return true;
      for (const std::string& out : g.node(at).output()) {
        if (seen.insert(out).second) pending.push_back(out);
      }
    }
  }
  return false;
}

// The GRU node whose X is fed by node `from`'s Y through layout ops whose composed effect makes Y [T, D, N, H]
// the next layer's X [T, N, D·H] (qgru/import/onnx_layer_link.h), or -1. When Y goes on into a GRU node or a
// layout op but not as a next layer, `problem` says which op breaks the chain and how.
int next_gru(const Graph& g, int from, int directions, int hidden_size, const std::string& gru_name, std::string& problem) {
  const NodeProto& gru = g.node(from);
  if (!feeds_a_gru(g, gru.output(0))) return -1;  // the last layer: nothing to explain
  onnx_link::AxisSizes sizes;
  sizes.D = directions;
  sizes.H = hidden_size;
  const std::vector<int64_t> x_dims = declared_dims(g, gru.input(0));  // [T, N, C]
  const std::vector<int64_t> y_dims = declared_dims(g, gru.output(0));  // [T, D, N, H]
  if (x_dims.size() == 3) {
    sizes.T = x_dims[0];
    sizes.N = x_dims[1];
  } else if (y_dims.size() == 4) {
    sizes.T = y_dims[0];
    sizes.N = y_dims[2];
  }
  std::vector<onnx_link::Hypothesis> tensor = onnx_link::gru_output(sizes);
  std::string value = gru.output(0);
  std::string path;  // the ops followed so far, for messages
  // A chain longer than the graph is a cycle (a malformed graph).
  for (int steps = 0; steps <= g.proto->node_size(); ++steps) {
    const int at = g.single_consumer(value);
    if (at < 0) return -1;  // the end of the graph, or Y used twice: no layer stack
    const NodeProto& node = g.node(at);
    const std::string name = node.name().empty() ? node.op_type() + "#" + std::to_string(at) : node.name();
    const bool onnx_domain = node.domain().empty() || node.domain() == "ai.onnx";
    const std::string through = path.empty() ? "" : " (through " + path + ")";
    if (node.op_type() == "GRU" && onnx_domain) {
      if (node.input(0) != value) return -1;  // Y feeds another input than X (a state): no layer stack
      problem = onnx_link::next_layer_input_problem(tensor);
      if (!problem.empty()) {
        problem = in_quotes(gru_name) + " feeds GRU " + in_quotes(name) + through + ", but " + problem;
        return -1;
      }
      return at;
    }
    if (!onnx_domain || !onnx_link::is_layout_op(node.op_type())) {
      problem = in_quotes(gru_name) + "'s output" + through + " goes on into " + node.op_type() + " " + in_quotes(name) +
                ", which is not a layout op";
      return -1;
    }
    if (node.input_size() < 1 || node.input(0) != value) {
      problem = in_quotes(gru_name) + "'s output" + through + " enters " + node.op_type() + " " + in_quotes(name) +
                " as another input than its data";
      return -1;
    }
    onnx_link::LayoutOp op;
    problem = layout_op_of(g, node, name, op);
    if (problem.empty()) problem = onnx_link::apply_layout_op(op, tensor);
    if (!problem.empty()) {
      problem = in_quotes(gru_name) + "'s output" + through + ": " + problem;
      return -1;
    }
    path += (path.empty() ? "" : ", ") + node.op_type() + " " + in_quotes(name);
    value = first_output(node);
  }
  return -1;
}

Graph index_graph(const onnx::ModelProto& model, const std::string& source, const std::string& model_dir) {
  Graph g;
  g.source = source;
  g.model_dir = model_dir;
  if (!model.has_graph()) throw Error(source + ": the ONNX model has no graph");
  g.proto = &model.graph();
  for (const TensorProto& t : g.proto->initializer()) g.constants[t.name()] = &t;
  for (const auto& input : g.proto->input()) {
    if (g.constants.count(input.name()) == 0) g.graph_inputs.insert(input.name());
  }
  for (int i = 0; i < g.proto->node_size(); ++i) {
    const NodeProto& node = g.node(i);
    for (const std::string& out : node.output()) g.producer[out] = i;
    for (const std::string& in : node.input()) {
      if (!in.empty()) g.consumers[in].push_back(i);
    }
    if (node.op_type() == "Constant" && node.output_size() == 1) {
      const AttributeProto* value = attribute(node, "value");
      if (value != nullptr && value->type() == AttributeProto::TENSOR) g.constants[node.output(0)] = &value->t();
    }
  }
  return g;
}

onnx::ModelProto parse_model(const uint8_t* data, size_t size, const std::string& source) {
  onnx::ModelProto model;
  if (size > static_cast<size_t>(std::numeric_limits<int>::max()) || !model.ParseFromArray(data, static_cast<int>(size))) {
    throw Error(source + ": not a valid ONNX model (the protobuf ModelProto does not parse)");
  }
  return model;
}

OnnxGraphGrus inspect_graph(const Graph& g) {
  OnnxGraphGrus result;
  result.source = g.source;
  std::map<int, int> node_of_info;  // graph node index -> result.nodes index
  std::vector<int> graph_node;
  for (int i = 0; i < g.proto->node_size(); ++i) {
    const NodeProto& node = g.node(i);
    const std::string& op = node.op_type();
    const bool onnx_domain = node.domain().empty() || node.domain() == "ai.onnx";
    if (op == "GRU" && onnx_domain) {
      const std::string name = node.name().empty() ? "GRU#" + std::to_string(result.nodes.size()) : node.name();
      node_of_info[i] = static_cast<int>(result.nodes.size());
      graph_node.push_back(i);
      result.nodes.push_back(describe_node(g, node, name));
    } else if (op == "LSTM" || op == "RNN" || op == "Loop" || op == "Scan") {
      result.other_recurrent_ops.push_back(op + (node.name().empty() ? "" : " " + in_quotes(node.name())));
    }
  }
  // Chains: a node follows another when the exporters' reshaping connects them and both agree on H, the
  // directions and the cell variant (a node that differs starts its own stack).
  std::vector<int> next(result.nodes.size(), -1), previous(result.nodes.size(), -1);
  for (size_t k = 0; k < result.nodes.size(); ++k) {
    const OnnxGruNodeInfo& a = result.nodes[k];
    if (!a.problem.empty()) continue;
    const int D = a.direction == "bidirectional" ? 2 : 1;
    const int to = a.layout == 0 ? next_gru(g, graph_node[k], D, a.hidden_size, a.name, result.nodes[k].link_problem) : -1;
    // (a GRU of another domain than ONNX's is not one of the nodes described above: no chain to it)
    const auto b_info = node_of_info.find(to);
    if (to < 0 || b_info == node_of_info.end()) continue;
    const int b_index = b_info->second;
    const OnnxGruNodeInfo& b = result.nodes[static_cast<size_t>(b_index)];
    if (!b.problem.empty() || g.node(to).input(0) == g.node(graph_node[k]).output(0)) continue;
    std::string differs;
    if (b.direction != a.direction) differs = "direction " + b.direction + ", not " + a.direction;
    if (b.hidden_size != a.hidden_size) differs = "H = " + std::to_string(b.hidden_size) + ", not " + std::to_string(a.hidden_size);
    if (b.linear_before_reset != a.linear_before_reset) differs = "another linear_before_reset";
    if (b.layout != 0) differs = "layout 1";
    if (b.input_size != D * a.hidden_size) {
      differs = "C = " + std::to_string(b.input_size) + ", not D·H = " + std::to_string(D * a.hidden_size);
    }
    if (!differs.empty()) {
      result.nodes[k].link_problem = in_quotes(a.name) + " feeds GRU " + in_quotes(b.name) + " as its X, but that has " + differs;
      continue;
    }
    next[k] = b_index;
    previous[static_cast<size_t>(b_index)] = static_cast<int>(k);
  }
  for (size_t k = 0; k < result.nodes.size(); ++k) {
    if (previous[k] >= 0) continue;
    std::vector<int> chain;
    for (int at = static_cast<int>(k); at >= 0 && chain.size() <= result.nodes.size(); at = next[static_cast<size_t>(at)]) {
      chain.push_back(at);
    }
    for (size_t layer = 0; layer < chain.size(); ++layer) {
      result.nodes[static_cast<size_t>(chain[layer])].stack = static_cast<int>(result.stacks.size());
      result.nodes[static_cast<size_t>(chain[layer])].layer = static_cast<int>(layer);
    }
    result.stacks.push_back(chain);
  }
  return result;
}

std::string stack_text(const OnnxGraphGrus& grus, const std::vector<int>& stack) {
  const OnnxGruNodeInfo& first = grus.nodes[static_cast<size_t>(stack.front())];
  std::string text = in_quotes(first.name) + " (" + std::to_string(stack.size()) + " layer(s), C = " +
                     std::to_string(first.input_size) + ", H = " + std::to_string(first.hidden_size) + ", " + first.direction;
  if (!first.problem.empty()) text += ", not readable: " + first.problem;
  return text + ")";
}

// The weights of one node into cells (layer, 0..D-1) of `model`.
void read_node_weights(const Graph& g, const NodeProto& node, const OnnxGruNodeInfo& info, int layer, FloatGruModel& model) {
  const int D = info.direction == "bidirectional" ? 2 : 1;
  const int64_t H = info.hidden_size, C = info.input_size;
  std::vector<int64_t> shape;
  const std::string where = "GRU node " + in_quotes(info.name);
  const std::vector<float> W = tensor_values(g, *constant_input(g, node, 1, info.name, "W"), where + ": W", shape);
  const TensorProto* R_proto = constant_input(g, node, 2, info.name, "R");
  if (R_proto == nullptr) throw Error(g.source + ": " + where + ": R is missing");
  const std::vector<float> R = tensor_values(g, *R_proto, where + ": R", shape);
  if (shape != std::vector<int64_t>{D, 3 * H, H}) {
    throw Error(g.source + ": " + where + ": R has shape " + shape_string(shape) + ", expected " +
                shape_string({D, 3 * H, H}));
  }
  std::vector<float> B;
  if (const TensorProto* B_proto = constant_input(g, node, 3, info.name, "B")) {
    B = tensor_values(g, *B_proto, where + ": B", shape);
    if (shape != std::vector<int64_t>{D, 6 * H}) {
      throw Error(g.source + ": " + where + ": B has shape " + shape_string(shape) + ", expected " + shape_string({D, 6 * H}));
    }
  } else {
    log()->info("{}: {}: no bias B: using zeros (a GRU made without biases)", g.source, where);
  }
  for (int d = 0; d < D; ++d) {
    GruCellWeights cell;
    cell.input_size = static_cast<int>(C);
    cell.hidden_size = static_cast<int>(H);
    // ONNX gate order z, r, h is qgru's z, r, n: the rows are taken as they are.
    cell.W.assign(W.begin() + d * 3 * H * C, W.begin() + (d + 1) * 3 * H * C);
    cell.R.assign(R.begin() + d * 3 * H * H, R.begin() + (d + 1) * 3 * H * H);
    cell.bw.assign(static_cast<size_t>(3 * H), 0.0f);
    cell.br.assign(static_cast<size_t>(3 * H), 0.0f);
    if (!B.empty()) {
      std::copy_n(B.begin() + d * 6 * H, 3 * H, cell.bw.begin());
      std::copy_n(B.begin() + d * 6 * H + 3 * H, 3 * H, cell.br.begin());
    }
    model.cells[static_cast<size_t>(layer * D + d)] = std::move(cell);
  }
}

// The folder external data is looked up in: the model's own, "." for a model named without one (a bare
// "model.onnx" must not look in "/").
std::string model_folder(const std::string& path) {
  const std::filesystem::path folder = std::filesystem::path(path).parent_path();
  return folder.empty() ? std::string(".") : folder.string();
}

}  // namespace

OnnxGraphGrus inspect_onnx_gru_bytes(const uint8_t* data, size_t size, const std::string& source, const std::string& model_dir) {
  const onnx::ModelProto model = parse_model(data, size, source);
  return inspect_graph(index_graph(model, source, model_dir));
}

OnnxGraphGrus inspect_onnx_grus(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  return inspect_onnx_gru_bytes(bytes.data(), bytes.size(), path, model_folder(path));
}

FloatGruModel onnx_gru_from_bytes(const uint8_t* data, size_t size, const std::string& source, const std::string& model_dir,
                                  const std::string& node_name) {
  const onnx::ModelProto model_proto = parse_model(data, size, source);
  const Graph g = index_graph(model_proto, source, model_dir);
  const OnnxGraphGrus grus = inspect_graph(g);
  if (grus.nodes.empty()) {
    std::string others;
    for (const std::string& op : grus.other_recurrent_ops) others += (others.empty() ? "" : ", ") + op;
    throw Error(source + ": no GRU node in the ONNX graph" +
                (others.empty() ? std::string() : " (other recurrent nodes: " + others + "; qgru reads GRU nodes only)"));
  }
  const std::vector<int>* stack = nullptr;
  std::vector<int> from;  // --node: the chain from that node on
  if (!node_name.empty()) {
    for (size_t k = 0; k < grus.nodes.size(); ++k) {
      if (grus.nodes[k].name != node_name) continue;
      const OnnxGruNodeInfo& n = grus.nodes[k];
      const std::vector<int>& whole = grus.stacks[static_cast<size_t>(n.stack)];
      from.assign(whole.begin() + n.layer, whole.end());
    }
    if (from.empty()) {
      std::string names;
      for (const OnnxGruNodeInfo& n : grus.nodes) names += (names.empty() ? "" : ", ") + in_quotes(n.name);
      throw Error(source + ": --node " + in_quotes(node_name) + " is not a GRU node of the graph; its GRU nodes: " + names);
    }
    stack = &from;
  } else if (grus.stacks.size() == 1) {
    stack = &grus.stacks[0];
  } else {
    std::string list;
    for (const auto& s : grus.stacks) list += (list.empty() ? "" : "; ") + stack_text(grus, s);
    // Why a GRU's output that goes on into another GRU does not make one stack of them: the op that breaks it.
    std::string breaks;
    for (const OnnxGruNodeInfo& n : grus.nodes) {
      if (!n.link_problem.empty()) breaks += "; " + n.link_problem;
    }
    throw Error(source + ": the graph holds " + std::to_string(grus.stacks.size()) + " GRU stacks: " + list + breaks +
                "; pick one with --node NAME");
  }
  const OnnxGruNodeInfo& first = grus.nodes[static_cast<size_t>(stack->front())];
  if (!first.problem.empty()) throw Error(source + ": GRU node " + in_quotes(first.name) + ": " + first.problem);
  const int D = first.direction == "bidirectional" ? 2 : 1;
  FloatGruModel model;
  model.input_size = first.input_size;
  model.hidden_size = first.hidden_size;
  model.num_layers = static_cast<int>(stack->size());
  model.num_directions = D;
  model.linear_before_reset = first.linear_before_reset == 1;
  model.source_layout = "onnx";
  model.cells.resize(static_cast<size_t>(model.num_layers * D));
  int gru_counter = 0;
  std::map<int, int> info_to_node;
  for (int i = 0; i < g.proto->node_size(); ++i) {
    const NodeProto& n = g.node(i);
    if (n.op_type() == "GRU" && (n.domain().empty() || n.domain() == "ai.onnx")) info_to_node[gru_counter++] = i;
  }
  for (size_t layer = 0; layer < stack->size(); ++layer) {
    const int k = (*stack)[layer];
    const OnnxGruNodeInfo& info = grus.nodes[static_cast<size_t>(k)];
    read_node_weights(g, g.node(info_to_node.at(k)), info, static_cast<int>(layer), model);
    if (info.layout == 1) {
      log()->info("{}: GRU node '{}' takes batch-first X (layout = 1): give qgru batch-first input with --batch-first",
                  source, info.name);
    }
    if (!info.sequence_lens.empty()) {
      log()->info("{}: GRU node '{}' takes sequence_lens '{}': give the lengths with --lengths", source, info.name,
                  info.sequence_lens);
    }
    if (!info.initial_h.empty() && g.constants.count(info.initial_h) == 0) {
      log()->info("{}: GRU node '{}' takes initial_h '{}' from the graph: give it with --h0 [L*D, N, H]", source,
                  info.name, info.initial_h);
    }
  }
  log()->info("{}: ONNX GRU stack from node '{}': {} layer(s), C = {}, H = {}, {}, linear_before_reset = {}", source,
              first.name, model.num_layers, model.input_size, model.hidden_size, first.direction,
              first.linear_before_reset);
  return model;
}

FloatGruModel load_onnx_gru(const std::string& path, const std::string& node) {
  const std::vector<uint8_t> bytes = read_file_bytes(path);
  return onnx_gru_from_bytes(bytes.data(), bytes.size(), path, model_folder(path), node);
}

std::vector<std::string> onnx_external_data_files(const std::string& path) {
  std::vector<std::string> files;
  try {
    if (sniff_model_file(path) != ModelFileKind::Onnx) return files;
    const std::vector<uint8_t> bytes = read_file_bytes(path);
    const onnx::ModelProto model = parse_model(bytes.data(), bytes.size(), path);
    // The constants the importer reads weights from (index_graph's: initializers and Constant nodes' values).
    const Graph g = index_graph(model, path, model_folder(path));
    std::set<std::string> seen;
    for (const auto& named : g.constants) {
      const TensorProto& t = *named.second;
      if (t.data_location() != TensorProto::EXTERNAL) continue;
      for (const auto& entry : t.external_data()) {
        // A location outside the folder is refused by the reader before anything is written.
        if (entry.key() != "location" || !location_inside_folder(entry.value())) continue;
        if (seen.insert(entry.value()).second) files.push_back((std::filesystem::path(g.model_dir) / entry.value()).string());
      }
    }
  } catch (const std::exception&) {
    files.clear();  // not readable as ONNX (or not a regular file): the model's reader and the policy say why
  }
  return files;
}

std::string describe_onnx_grus(const OnnxGraphGrus& grus) {
  std::string text;
  for (const OnnxGruNodeInfo& n : grus.nodes) {
    std::string activations;
    for (const std::string& a : n.activations) activations += (activations.empty() ? "" : ",") + a;
    text += "GRU " + in_quotes(n.name) + ": C = " + std::to_string(n.input_size) + ", H = " + std::to_string(n.hidden_size) +
            ", " + n.direction + ", linear_before_reset = " + std::to_string(n.linear_before_reset) + ", activations " +
            (activations.empty() ? "Sigmoid,Tanh (default)" : activations) + (n.has_clip ? ", clip " + std::to_string(n.clip) : "") +
            (n.layout == 1 ? ", batch-first" : "") + (n.has_bias ? "" : ", no bias") +
            (n.sequence_lens.empty() ? "" : ", sequence_lens " + in_quotes(n.sequence_lens)) +
            (n.initial_h.empty() ? "" : ", initial_h " + in_quotes(n.initial_h)) + "; stack " + std::to_string(n.stack) +
            " layer " + std::to_string(n.layer) + (n.problem.empty() ? "" : "; NOT READABLE: " + n.problem) +
            (n.link_problem.empty() ? "" : "; not chained: " + n.link_problem) + "\n";
  }
  if (grus.nodes.empty()) text = "no GRU node\n";
  return text;
}

}  // namespace qgru
