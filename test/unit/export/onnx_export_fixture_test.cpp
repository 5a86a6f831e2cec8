// onnxruntime's word on the export, without Python: test/data/onnx_export/<case>/ holds a model (a quantized
// artifact, or a float ONNX model), the options it was exported with (options.json), the graph qgru exported
// (exported.onnx), inputs, and the outputs onnxruntime computed on that graph (y.npy, h_n.npy), all made by
// scripts/check_onnx_export.py --write-fixtures. Here: today's export of the same model with the same options
// is that graph (so onnxruntime's outputs are about what qgru writes now), and qgru's float GRU on the exported
// weights computes onnxruntime's outputs within 1e-5, x quantized as ONNX's QuantizeLinear does (round half to
// even, saturate, Clip) where the case quantizes x. `scripts/check_onnx_export.py` reruns onnxruntime itself.
#include <doctest/doctest.h>

#include <onnx/onnx_pb.h>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cfenv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgru/base/atomic_file.h"
#include "qgru/export/dequantized_gru.h"
#include "qgru/export/onnx_export.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/io/npy.h"
#include "qgru/io/sequence_io.h"
#include "qgru/runtime/artifact.h"

namespace {

const std::string kFixtures = std::string(QGRU_TEST_DATA_DIR) + "/onnx_export/";

std::vector<float> floats(const std::string& path) { return qgru::tensor_to_f32(qgru::read_npy(path)); }

// The serialized model with producer_version cleared (the one field that names the qgru version).
std::string without_version(const std::string& bytes) {
  onnx::ModelProto model;
  REQUIRE(model.ParseFromString(bytes));
  model.clear_producer_version();
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  REQUIRE(model.SerializeToCodedStream(&coded));
  coded.Trim();
  return out;
}

std::string file_bytes(const std::string& path) {
  const std::vector<uint8_t> bytes = qgru::read_file_bytes(path);
  return std::string(bytes.begin(), bytes.end());
}

// [A, B, C] -> [B, A, C].
std::vector<float> swap_leading(const std::vector<float>& v, int64_t a, int64_t b, int64_t c) {
  std::vector<float> out(v.size());
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) std::copy_n(&v[static_cast<size_t>((i * b + j) * c)], c, &out[static_cast<size_t>((j * a + i) * c)]);
  }
  return out;
}

// ONNX QuantizeLinear -> DequantizeLinear (-> Clip at the artifact's code range), written from the ONNX
// operator definitions: q = saturate(round_half_to_even(x / scale) + zp) in the container type (INT8/UINT8,
// INT16/UINT16), y = (q - zp) · scale. std::nearbyint rounds half to even in the default rounding mode.
float onnx_fake_quantize(float x, const qgru::TensorQuant& quant) {
  REQUIRE(std::fegetround() == FE_TONEAREST);
  const int container_bits = quant.bits > 8 ? 16 : 8;
  const double lo = quant.is_unsigned ? 0.0 : -std::ldexp(1.0, container_bits - 1);
  const double hi = quant.is_unsigned ? std::ldexp(1.0, container_bits) - 1 : std::ldexp(1.0, container_bits - 1) - 1;
  const float scale = static_cast<float>(quant.scale());
  const double code = std::clamp(static_cast<double>(std::nearbyint(x / scale)) + quant.zp, lo, hi);
  const float y = static_cast<float>((code - quant.zp) * scale);
  return std::clamp(y, static_cast<float>(quant.dequantize(quant.qmin())), static_cast<float>(quant.dequantize(quant.qmax())));
}

struct Case {
  std::string name, dir;
  nlohmann::json options;
};

std::vector<Case> cases() {
  std::vector<Case> found;
  for (const auto& entry : std::filesystem::directory_iterator(kFixtures)) {
    if (!entry.is_directory()) continue;
    Case c;
    c.name = entry.path().filename().string();
    c.dir = entry.path().string() + "/";
    c.options = nlohmann::json::parse(qgru::read_file_text(c.dir + "options.json"));
    found.push_back(c);
  }
  std::sort(found.begin(), found.end(), [](const Case& a, const Case& b) { return a.name < b.name; });
  return found;
}

qgru::OnnxExportRequest request_of(const Case& c, const std::string& output) {
  qgru::OnnxExportRequest request;
  request.model.path = c.dir + c.options.at("model").get<std::string>();
  request.output_path = output;
  request.options.opset = c.options.at("opset").get<int>();
  request.options.batch_first = c.options.value("batch_first", false);
  request.options.h0_input = c.options.value("h0_input", false);
  request.options.lengths_input = c.options.value("lengths_input", false);
  request.quantize_input = c.options.value("quantize_input", false);
  return request;
}

}  // namespace

TEST_CASE("the committed onnxruntime fixtures cover every export option and both cell variants") {
  const std::vector<Case> all = cases();
  REQUIRE(all.size() >= 4);
  bool batch_first = false, h0 = false, lengths = false, quantize = false, lbr0 = false, int16_qdq = false, clip = false;
  bool lbr0_artifact = false;  // an artifact of the linear_before_reset = 0 cell (version 2) exported as that cell
  for (const Case& c : all) {
    batch_first |= c.options.value("batch_first", false);
    h0 |= c.options.value("h0_input", false);
    lengths |= c.options.value("lengths_input", false);
    quantize |= c.options.value("quantize_input", false);
    onnx::ModelProto model;
    REQUIRE(model.ParseFromString(file_bytes(c.dir + "exported.onnx")));
    for (const onnx::NodeProto& n : model.graph().node()) {
      clip |= n.op_type() == "Clip";
      for (const onnx::AttributeProto& a : n.attribute()) {
        const bool zero = a.name() == "linear_before_reset" && a.i() == 0;
        lbr0 |= zero;
        lbr0_artifact |= zero && c.options.at("model").get<std::string>() == "model.qgru.json";
      }
    }
    for (const onnx::TensorProto& t : model.graph().initializer()) int16_qdq |= t.name() == "x_zero_point" && t.data_type() == onnx::TensorProto::INT16;
  }
  CHECK(batch_first);
  CHECK(h0);
  CHECK(lengths);
  CHECK(quantize);
  CHECK(lbr0);
  CHECK(lbr0_artifact);
  CHECK(int16_qdq);
  CHECK(clip);
}

TEST_CASE("today's export is the graph onnxruntime ran, and qgru's float GRU computes its outputs within 1e-5") {
  const std::string scratch = std::filesystem::temp_directory_path().string() + "/qgru_export_fixture_" +
                              std::to_string(::getpid());
  std::filesystem::create_directories(scratch);
  for (const Case& c : cases()) {
    INFO("fixture ", c.name);
    const qgru::OnnxExportRequest request = request_of(c, scratch + "/" + c.name + ".onnx");
    const qgru::OnnxExportSummary summary = qgru::export_onnx_file(request);
    CHECK(without_version(file_bytes(request.output_path)) == without_version(file_bytes(c.dir + "exported.onnx")));

    // The model onnxruntime ran, as qgru holds it: the dequantized artifact, or the float model.
    const qgru::FloatGruModel model = summary.from_artifact ? qgru::dequantized_float_gru(qgru::read_artifact(request.model.path))
                                                            : qgru::load_float_gru(request.model);
    const qgru::Tensor x_tensor = qgru::read_npy(c.dir + "x.npy");
    std::vector<float> x = qgru::tensor_to_f32(x_tensor);
    int T = static_cast<int>(x_tensor.shape[0]), N = static_cast<int>(x_tensor.shape[1]);
    const int C = static_cast<int>(x_tensor.shape[2]);
    if (request.quantize_input) {
      const qgru::TensorQuant quant = qgru::read_artifact(request.model.path).input_quant();
      int ties = 0, rounded_apart = 0;
      for (float& v : x) {
        const double scaled = std::ldexp(static_cast<double>(v), quant.shift);
        ties += scaled - std::floor(scaled) == 0.5;
        const float fake = onnx_fake_quantize(v, quant);
        rounded_apart += fake != static_cast<float>(quant.dequantize(quant.quantize(v)));  // qgru rounds half away from zero
        v = fake;
      }
      // The fixtures hold x exactly between grid points (where ONNX and qgru round apart) on purpose.
      CHECK(ties > 0);
      CHECK(rounded_apart > 0);
    }
    if (request.options.batch_first) {
      x = swap_leading(x, T, N, C);
      std::swap(T, N);
    }
    std::vector<float> h0;
    if (request.options.h0_input) h0 = floats(c.dir + "h0.npy");
    std::vector<int32_t> lengths;
    if (request.options.lengths_input) lengths = qgru::read_sequence_lengths(c.dir + "lengths.npy", N, T);
    const qgru::FloatGruResult result = qgru::run_float_gru(model, x.data(), T, N, h0.empty() ? nullptr : h0.data(), nullptr,
                                                            lengths.empty() ? nullptr : lengths.data());
    std::vector<float> y = floats(c.dir + "y.npy");
    if (request.options.batch_first) y = swap_leading(y, N, T, static_cast<int64_t>(model.num_directions) * model.hidden_size);
    const std::vector<float> h_n = floats(c.dir + "h_n.npy");
    REQUIRE(y.size() == result.output.size());
    REQUIRE(h_n.size() == result.h_n.size());
    double worst = 0.0, signal = 0.0;
    for (size_t i = 0; i < y.size(); ++i) {
      worst = std::max(worst, std::fabs(static_cast<double>(y[i]) - result.output[i]));
      signal = std::max(signal, std::fabs(static_cast<double>(y[i])));
    }
    for (size_t i = 0; i < h_n.size(); ++i) worst = std::max(worst, std::fabs(static_cast<double>(h_n[i]) - result.h_n[i]));
    MESSAGE(c.name, ": qgru's float GRU vs onnxruntime, largest difference ", worst);
    CHECK(signal > 0.05);  // outputs that carry a signal, not a graph that returns zeros
    CHECK(worst <= 1e-5);
  }
  std::filesystem::remove_all(scratch);
}
