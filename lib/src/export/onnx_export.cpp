// Writing a GRU as an ONNX model (qgru/export/onnx_export.h) with libonnx-dev's protobuf classes.
#include "qgru/export/onnx_export.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/onnx_pb.h>

#include <cstring>
#include <limits>

#include "qgru/base/error.h"
#include "qgru/version.h"

namespace qgru {
namespace {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

// The IR version that goes with an opset (the ONNX versioning table): runtimes refuse a model whose IR
// version is newer than they read, so the oldest one that carries the opset is written.
int64_t ir_version_for_opset(int opset) {
  if (opset <= 11) return 6;
  if (opset <= 14) return 7;
  if (opset <= 18) return 8;
  if (opset <= 20) return 9;
  return 10;
}

// Little-endian bytes of 32-bit words (ONNX raw_data is little-endian whatever the host).
void append_le(std::string& bytes, uint64_t word, int size) {
  for (int i = 0; i < size; ++i) bytes.push_back(static_cast<char>((word >> (8 * i)) & 0xff));
}

// One dimension of a graph input's or output's type: a symbolic name ("T", "N") or a size.
struct Dim {
  std::string param;
  int64_t value = 0;
};

class GraphWriter {
 public:
  GraphWriter(onnx::GraphProto* graph, int opset) : graph_(graph), opset_(opset) {}
  int opset() const { return opset_; }

  void floats(const std::string& name, const std::vector<int64_t>& dims, const std::vector<float>& values) {
    std::string bytes;
    bytes.reserve(values.size() * 4);
    for (float v : values) {
      uint32_t bits = 0;
      std::memcpy(&bits, &v, 4);
      append_le(bytes, bits, 4);
    }
    raw(name, TensorProto::FLOAT, dims, std::move(bytes));
  }
  void int64s(const std::string& name, const std::vector<int64_t>& dims, const std::vector<int64_t>& values) {
    std::string bytes;
    for (int64_t v : values) append_le(bytes, static_cast<uint64_t>(v), 8);
    raw(name, TensorProto::INT64, dims, std::move(bytes));
  }
  // A scalar integer of an ONNX integer type of `size` bytes (a zero point).
  void integer_scalar(const std::string& name, TensorProto::DataType type, int size, int64_t value) {
    std::string bytes;
    append_le(bytes, static_cast<uint64_t>(value), size);
    raw(name, type, {}, std::move(bytes));
  }

  NodeProto* node(const std::string& op, const std::string& name, const std::vector<std::string>& inputs,
                  const std::vector<std::string>& outputs) {
    NodeProto* n = graph_->add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const std::string& in : inputs) n->add_input(in);
    for (const std::string& out : outputs) n->add_output(out);
    return n;
  }
  static void attribute(NodeProto* n, const char* name, int64_t value) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INT);
    a->set_i(value);
  }
  static void attribute(NodeProto* n, const char* name, const std::vector<int64_t>& values) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::INTS);
    for (int64_t v : values) a->add_ints(v);
  }
  static void attribute(NodeProto* n, const char* name, const std::string& value) {
    AttributeProto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(AttributeProto::STRING);
    a->set_s(value);
  }

  void input(const std::string& name, TensorProto::DataType type, const std::vector<Dim>& dims) {
    typed_value(graph_->add_input(), name, type, dims);
  }
  void output(const std::string& name, const std::vector<Dim>& dims) {
    typed_value(graph_->add_output(), name, TensorProto::FLOAT, dims);
  }

  // Squeeze(axes = [1]): an attribute before opset 13, an input from 13 (as exporters write each).
  void squeeze_axis_1(const std::string& prefix, const std::string& in, const std::string& out) {
    if (opset_ < 13) {
      attribute(node("Squeeze", prefix + "Squeeze", {in}, {out}), "axes", std::vector<int64_t>{1});
    } else {
      int64s(prefix + "squeeze_axes", {1}, {1});
      node("Squeeze", prefix + "Squeeze", {in, prefix + "squeeze_axes"}, {out});
    }
  }

 private:
  void raw(const std::string& name, TensorProto::DataType type, const std::vector<int64_t>& dims, std::string bytes) {
    TensorProto* t = graph_->add_initializer();
    t->set_name(name);
    t->set_data_type(type);
    for (int64_t d : dims) t->add_dims(d);
    t->set_raw_data(std::move(bytes));
  }
  static void typed_value(onnx::ValueInfoProto* value, const std::string& name, TensorProto::DataType type,
                          const std::vector<Dim>& dims) {
    value->set_name(name);
    onnx::TypeProto_Tensor* tensor = value->mutable_type()->mutable_tensor_type();
    tensor->set_elem_type(type);
    onnx::TensorShapeProto* shape = tensor->mutable_shape();
    for (const Dim& d : dims) {
      if (d.param.empty()) {
        shape->add_dim()->set_dim_value(d.value);
      } else {
        shape->add_dim()->set_dim_param(d.param);
      }
    }
  }

  onnx::GraphProto* graph_;
  int opset_;
};

void check_model_shape(const FloatGruModel& model) {
  const size_t cells = static_cast<size_t>(model.num_layers) * static_cast<size_t>(model.num_directions);
  bool ok = model.num_layers >= 1 && (model.num_directions == 1 || model.num_directions == 2) &&
            model.hidden_size >= 1 && model.input_size >= 1 && model.cells.size() == cells;
  for (size_t k = 0; ok && k < model.cells.size(); ++k) {
    const GruCellWeights& c = model.cells[k];
    const size_t H = static_cast<size_t>(model.hidden_size);
    const size_t C = k < static_cast<size_t>(model.num_directions) ? static_cast<size_t>(model.input_size)
                                                                   : static_cast<size_t>(model.num_directions) * H;
    ok = c.hidden_size == model.hidden_size && static_cast<size_t>(c.input_size) == C && c.W.size() == 3 * H * C &&
         c.R.size() == 3 * H * H && c.bw.size() == 3 * H && c.br.size() == 3 * H;
  }
  if (!ok) throw Error("internal: onnx export: the float model's cells do not match its sizes");
}

// x's quantize-dequantize (OnnxExportOptions::input_quant) from `in`; returns the value that feeds layer 0.
std::string quantize_dequantize_input(GraphWriter& w, const TensorQuant& quant, const std::string& in) {
  if (quant.bits < 2 || quant.bits > 16) {
    throw Error("onnx export: x's quantization has " + std::to_string(quant.bits) + " bits, expected 2 .. 16");
  }
  const bool wide = quant.bits > 8;
  if (wide && w.opset() < kOnnxOpsetInt16Qdq) {
    throw Error("onnx export: x has " + std::to_string(quant.bits) + "-bit codes (" + describe_quant(quant) +
                "); ONNX QuantizeLinear holds 16-bit codes from opset " + std::to_string(kOnnxOpsetInt16Qdq) +
                " on: export with opset " + std::to_string(kOnnxOpsetInt16Qdq) + " or higher");
  }
  // The container type: the ONNX integer type of 8 or 16 bits with the same signedness.
  const TensorProto::DataType container = quant.is_unsigned ? (wide ? TensorProto::UINT16 : TensorProto::UINT8)
                                                            : (wide ? TensorProto::INT16 : TensorProto::INT8);
  const int container_bits = wide ? 16 : 8;
  // scale = 2^-shift: a power of two, exactly a float32 for shifts in [kMinShift, kMaxShift].
  w.floats("x_scale", {}, {static_cast<float>(quant.scale())});
  w.integer_scalar("x_zero_point", container, container_bits / 8, quant.zp);
  w.node("QuantizeLinear", "input/QuantizeLinear", {in, "x_scale", "x_zero_point"}, {"x_codes"});
  w.node("DequantizeLinear", "input/DequantizeLinear", {"x_codes", "x_scale", "x_zero_point"}, {"x_dequantized"});
  if (quant.bits == container_bits) return "x_dequantized";
  // Saturation at the artifact's own code range [qmin, qmax], narrower than the container's: clamping commutes
  // with the monotone dequantization, so Clip on the dequantized values at (qmin - zp)·scale and
  // (qmax - zp)·scale (exact float32 values) equals saturating the codes.
  w.floats("x_min", {}, {static_cast<float>(quant.dequantize(quant.qmin()))});
  w.floats("x_max", {}, {static_cast<float>(quant.dequantize(quant.qmax()))});
  w.node("Clip", "input/Clip", {"x_dequantized", "x_min", "x_max"}, {"x_fake_quantized"});
  return "x_fake_quantized";
}

// The layer's weights in ONNX's layout: W [D, 3H, C], R [D, 3H, H], B [D, 6H] = (bw, br) per direction.
void layer_initializers(GraphWriter& w, const FloatGruModel& model, int layer, const std::string& prefix) {
  const int D = model.num_directions;
  const int64_t H = model.hidden_size;
  const int64_t C = model.cell(layer, 0).input_size;
  std::vector<float> W, R, B;
  for (int d = 0; d < D; ++d) {
    const GruCellWeights& cell = model.cell(layer, d);
    // qgru's gate order z, r, n is ONNX's z, r, h: rows are copied as they are.
    W.insert(W.end(), cell.W.begin(), cell.W.end());
    R.insert(R.end(), cell.R.begin(), cell.R.end());
    B.insert(B.end(), cell.bw.begin(), cell.bw.end());
    B.insert(B.end(), cell.br.begin(), cell.br.end());
  }
  w.floats(prefix + "W", {D, 3 * H, C}, W);
  w.floats(prefix + "R", {D, 3 * H, H}, R);
  w.floats(prefix + "B", {D, 6 * H}, B);
}

}  // namespace

std::string onnx_gru_model_bytes(const FloatGruModel& model, const OnnxExportOptions& options) {
  if (options.opset < kOnnxExportMinOpset || options.opset > kOnnxExportMaxOpset) {
    throw Error("onnx export: opset " + std::to_string(options.opset) + " is not written; opsets " +
                std::to_string(kOnnxExportMinOpset) + " .. " + std::to_string(kOnnxExportMaxOpset) + " are");
  }
  check_model_shape(model);
  const int L = model.num_layers, D = model.num_directions;
  const int64_t H = model.hidden_size;

  onnx::ModelProto proto;
  proto.set_ir_version(ir_version_for_opset(options.opset));
  proto.set_producer_name("qgru");
  proto.set_producer_version(QGRU_VERSION_STRING);
  proto.set_doc_string(options.doc_string);
  onnx::OperatorSetIdProto* opset = proto.add_opset_import();
  opset->set_domain("");
  opset->set_version(options.opset);
  for (const auto& [key, value] : options.metadata) {
    onnx::StringStringEntryProto* entry = proto.add_metadata_props();
    entry->set_key(key);
    entry->set_value(value);
  }
  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name(options.graph_name);
  graph->set_doc_string(options.doc_string);
  GraphWriter w(graph, options.opset);

  const Dim T{"T"}, N{"N"};
  w.input("x", TensorProto::FLOAT, options.batch_first ? std::vector<Dim>{N, T, {"", model.input_size}}
                                                        : std::vector<Dim>{T, N, {"", model.input_size}});
  if (options.h0_input) w.input("h0", TensorProto::FLOAT, {{"", int64_t{L} * D}, N, {"", H}});
  if (options.lengths_input) w.input("sequence_lens", TensorProto::INT32, {N});

  std::string current = "x";
  if (options.input_quant) current = quantize_dequantize_input(w, *options.input_quant, current);
  if (options.batch_first) {
    GraphWriter::attribute(w.node("Transpose", "input/Transpose", {current}, {"x_time_major"}), "perm",
                           std::vector<int64_t>{1, 0, 2});
    current = "x_time_major";
  }

  std::vector<std::string> final_states;
  for (int l = 0; l < L; ++l) {
    const std::string prefix = "layer" + std::to_string(l) + "/";
    layer_initializers(w, model, l, prefix);
    std::string initial_h;
    if (options.h0_input && L == 1) {
      initial_h = "h0";
    } else if (options.h0_input) {
      // Layer l's rows [l*D, (l+1)*D) of h0 (PyTorch's h0 order: layer-major, then direction).
      w.int64s(prefix + "h0_starts", {1}, {int64_t{l} * D});
      w.int64s(prefix + "h0_ends", {1}, {int64_t{l + 1} * D});
      w.int64s(prefix + "h0_axes", {1}, {0});
      initial_h = prefix + "initial_h";
      w.node("Slice", prefix + "Slice", {"h0", prefix + "h0_starts", prefix + "h0_ends", prefix + "h0_axes"}, {initial_h});
    }
    std::vector<std::string> inputs = {current, prefix + "W", prefix + "R", prefix + "B"};
    if (options.lengths_input || options.h0_input) inputs.push_back(options.lengths_input ? "sequence_lens" : "");
    if (options.h0_input) inputs.push_back(initial_h);
    const std::string Y_h = L == 1 ? "h_n" : prefix + "Y_h";
    NodeProto* gru = w.node("GRU", prefix + "GRU", inputs, {prefix + "Y", Y_h});
    GraphWriter::attribute(gru, "hidden_size", H);
    GraphWriter::attribute(gru, "direction", std::string(D == 2 ? "bidirectional" : "forward"));
    GraphWriter::attribute(gru, "linear_before_reset", int64_t{model.linear_before_reset ? 1 : 0});
    final_states.push_back(Y_h);
    // Y [T, D, N, H] -> [T, N, D*H], as PyTorch's exporter writes it (and qgru's importer follows).
    const bool last = l == L - 1;
    const std::string output = last && !options.batch_first ? "y" : prefix + "output";
    if (D == 1) {
      w.squeeze_axis_1(prefix, prefix + "Y", output);
    } else {
      GraphWriter::attribute(w.node("Transpose", prefix + "Transpose", {prefix + "Y"}, {prefix + "Y_transposed"}), "perm",
                             std::vector<int64_t>{0, 2, 1, 3});
      w.int64s(prefix + "reshape_shape", {3}, {0, 0, -1});
      w.node("Reshape", prefix + "Reshape", {prefix + "Y_transposed", prefix + "reshape_shape"}, {output});
    }
    current = output;
  }
  if (options.batch_first) {
    GraphWriter::attribute(w.node("Transpose", "output/Transpose", {current}, {"y"}), "perm", std::vector<int64_t>{1, 0, 2});
  }
  if (L > 1) GraphWriter::attribute(w.node("Concat", "output/Concat", final_states, {"h_n"}), "axis", int64_t{0});

  const Dim DH{"", int64_t{D} * H};
  w.output("y", options.batch_first ? std::vector<Dim>{N, T, DH} : std::vector<Dim>{T, N, DH});
  w.output("h_n", {{"", int64_t{L} * D}, N, {"", H}});

  const size_t size = proto.ByteSizeLong();
  if (size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    throw Error("onnx export: the model needs " + std::to_string(size) + " bytes, beyond protobuf's 2 GiB message "
                "limit (external weight files are not written)");
  }
  std::string bytes;
  {
    // Deterministic serialization: the same model and options always give the same bytes.
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    if (!proto.SerializeToCodedStream(&coded)) throw Error("internal: onnx export: serializing the ModelProto failed");
  }
  return bytes;
}

}  // namespace qgru
