#pragma once
// Writing a GRU as an ONNX model (docs/ONNX.md "Export"), with the ONNX project's own protobuf classes (the
// same libonnx-dev onnx_proto the importer reads with, qgru/import/onnx_gru.h), so that qgru's importer and
// onnxruntime read what qgru writes.
//
// The graph is the one PyTorch's exporter writes for nn.GRU, which qgru's importer reads back as one stack:
//   x [T, N, C] -> GRU layer 0 -> Y [T, D, N, H] -> Squeeze(axes 1)                      (D = 1)
//                                                 -> Transpose(0, 2, 1, 3) -> Reshape(0, 0, -1)   (D = 2)
//               -> GRU layer 1 -> ...                                     -> y [T, N, D*H]
//   h_n [L*D, N, H] = Concat(Y_h of every layer, axis 0)
// Each GRU node: W [D, 3H, C_layer], R [D, 3H, H], B [D, 6H] = (bw, br) initializers (float32, raw_data),
// ONNX gate order z, r, h, which is qgru's z, r, n: rows are written as they are; direction forward or
// bidirectional; hidden_size; linear_before_reset from the model's cell variant (written even when 0, the
// ONNX default). Options add a batch-first input/output (Transpose around the stack; the GRU nodes stay
// time-major, layout 0, as exporters write them), graph inputs h0 [L*D, N, H] (Slice per layer into
// initial_h) and sequence_lens [N] int32 (every layer), and the quantize-dequantize of x.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qgru/base/tensor_quant.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/model/float_gru.h"

namespace qgru {

// The opsets the export writes (GRU-7/14/22, Squeeze with an axes attribute before 13 and an axes input from
// 13, Clip with min/max inputs from 11). 17 is the default: what torch.onnx.export writes by default and
// what every maintained runtime reads.
constexpr int kOnnxExportMinOpset = 11;
constexpr int kOnnxExportMaxOpset = 22;
constexpr int kOnnxExportDefaultOpset = 17;
// The first opset whose QuantizeLinear / DequantizeLinear hold 16-bit codes (INT16, UINT16).
constexpr int kOnnxOpsetInt16Qdq = 21;

struct OnnxExportOptions {
  int opset = kOnnxExportDefaultOpset;
  bool batch_first = false;    // x [N, T, C], y [N, T, D*H]
  bool h0_input = false;       // graph input "h0" [L*D, N, H]; absent: zeros
  bool lengths_input = false;  // graph input "sequence_lens" int32 [N]; absent: every row has T steps
  // x's quantization (the artifact's layer-0 x space): when set, x passes through QuantizeLinear ->
  // DequantizeLinear (scale 2^-shift, zero point zp; INT8/UINT8 codes, INT16/UINT16 from opset 21) and,
  // for widths below the container's, a Clip to [(qmin - zp)·2^-shift, (qmax - zp)·2^-shift], which equals
  // saturating at the artifact's own code range. QuantizeLinear rounds half to even where qgru rounds half
  // away from zero: the two differ only for x exactly halfway between two grid points.
  std::optional<TensorQuant> input_quant;
  std::string graph_name = "qgru_gru";
  std::string doc_string;                                     // the graph's doc_string
  std::vector<std::pair<std::string, std::string>> metadata;  // the model's metadata_props, in this order
};

// The serialized ModelProto (deterministic: the same model and options give the same bytes). Throws
// qgru::Error for an opset outside [kOnnxExportMinOpset, kOnnxExportMaxOpset], a 16-bit input_quant below
// opset 21, or a model beyond protobuf's 2 GiB message limit.
std::string onnx_gru_model_bytes(const FloatGruModel& model, const OnnxExportOptions& options);

// `qgru export --onnx` as one library call.
struct OnnxExportRequest {
  FloatModelSource model;          // a quantized artifact (.qgru.json, recognised by its content) or a float model
  std::string output_path;         // the .onnx file, written atomically
  OnnxExportOptions options;       // input_quant, doc_string and metadata are filled here
  bool quantize_input = false;     // artifacts only: options.input_quant from layer 0's x
};

struct OnnxExportSummary {
  bool from_artifact = false;      // true: the float-equivalent of a quantized artifact
  FloatGruModel model;             // what was written (sizes, cell variant)
  std::string config_name;         // the artifact's bit-width config
  std::string input_quant;         // describe_quant of x when quantize_input, else empty
  size_t bytes = 0;                // the file's size
};

OnnxExportSummary export_onnx_file(const OnnxExportRequest& request);

}  // namespace qgru
