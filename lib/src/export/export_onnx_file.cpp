// `qgru export --onnx` as one library call (qgru/export/onnx_export.h): read the model (a quantized artifact,
// dequantized; or a float model as it is), build the ONNX graph, write it atomically.
#include <filesystem>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/base/sha256.h"
#include "qgru/export/dequantized_gru.h"
#include "qgru/export/onnx_export.h"
#include "qgru/import/model_file_kind.h"
#include "qgru/runtime/artifact.h"

namespace qgru {
namespace {

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// Writing the export over one of its own inputs would destroy the model being exported.
void refuse_overwriting_input(const std::string& output, const std::vector<std::string>& inputs) {
  std::error_code error;
  for (const std::string& input : inputs) {
    if (std::filesystem::exists(output, error) && std::filesystem::equivalent(output, input, error)) {
      throw Error(output + ": the output is the input " + input + "; name another file with -o");
    }
  }
}

}  // namespace

OnnxExportSummary export_onnx_file(const OnnxExportRequest& request) {
  const std::string& path = request.model.path;
  OnnxExportSummary summary;
  OnnxExportOptions options = request.options;
  std::vector<std::string> inputs = {path};
  options.metadata.emplace_back("qgru.source", file_name(path));
  // A JSON document is never a float model: an artifact, or refused by the artifact reader with what is wrong.
  const ModelFileKind kind = sniff_model_file(path);
  if (kind == ModelFileKind::QgruArtifact || kind == ModelFileKind::Json) {
    const std::string json_text = read_file_text(path);
    require_exportable_cell_variant(json_text, path);
    const QuantizedGru quantized = read_artifact(path);
    inputs.push_back(recorded_artifact_tensor_path(path));
    summary.from_artifact = true;
    summary.model = dequantized_float_gru(quantized);
    summary.config_name = quantized.config.name;
    if (request.quantize_input) {
      options.input_quant = quantized.input_quant();
      summary.input_quant = describe_quant(quantized.input_quant());
    }
    options.doc_string =
        "The float-equivalent of the quantized qgru artifact " + file_name(path) + " (config " + quantized.config.name +
        "): every weight (W, R, bw, br) is the artifact's integer code times its channel's power-of-two scale, exactly; " +
        (request.quantize_input ? "x is quantized and dequantized with the artifact's x scale and zero point; " : "") +
        "activations (x" + (request.quantize_input ? " after that" : "") +
        ", h, the gates) stay float and sigmoid/tanh are exact, so this is the quantized weights' effect, not the "
        "integer executor's output.";
    options.metadata.emplace_back("qgru.kind", "float-equivalent of a quantized artifact (dequantized weights)");
    options.metadata.emplace_back("qgru.source_sha256", sha256_hex(json_text.data(), json_text.size()));
    options.metadata.emplace_back("qgru.config", quantized.config.name);
    if (request.quantize_input) options.metadata.emplace_back("qgru.input_quantization", summary.input_quant);
  } else {
    if (request.quantize_input) {
      throw Error(path + ": --quantize-input takes x's quantization from a quantized artifact (.qgru.json); this is "
                  "a float model");
    }
    summary.model = load_float_gru(request.model);
    options.doc_string = "The float GRU of " + file_name(path) + " as qgru reads it (" + summary.model.source_layout + ").";
    options.metadata.emplace_back("qgru.kind", "float model");
    options.metadata.emplace_back("qgru.source_sha256", sha256_file_hex(path));
  }
  refuse_overwriting_input(request.output_path, inputs);
  const std::string bytes = onnx_gru_model_bytes(summary.model, options);
  AtomicFile out(request.output_path);
  out.write(bytes);
  out.commit();
  summary.bytes = bytes.size();
  return summary;
}

}  // namespace qgru
