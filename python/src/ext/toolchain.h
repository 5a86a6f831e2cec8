#pragma once
// The toolchain's objects as the extension holds them: a float model, calibration statistics, a quantized
// artifact and a verify report, each with the names the library's messages and the artifact's provenance use.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgru/base/output_policy.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/model/float_gru.h"
#include "qgru/qgru_runtime.hpp"
#include "qgru/runtime/quantized_gru.h"
#include "qgru/verify/gru_verify.h"

namespace qgru::python {

struct FloatModel {
  FloatGruModel gru;
  std::string path;    // the file it was read from; "" for tensors held in memory
  std::string sha256;  // the file's, or for tensors held in memory float_gru_weights_sha256's
  std::string source;  // its name in messages: the path, or what the caller called it ("state dict", ...)
};

struct Statistics {
  CalibrationStats stats;
  std::string path;    // the file it was read from or last saved to; "" otherwise
  std::string sha256;  // the serialized statistics' (the file's, when qgru wrote or read it)
  std::string source;  // its name in messages
};

// A quantized model: the toolchain's struct (verify, save) and, made on first use, the runtime's C API model
// (run, stream) opened from the same bytes.
class Artifact {
 public:
  Artifact(std::shared_ptr<const QuantizedGru> model, std::string path,
           nlohmann::json provenance_extra = nlohmann::json::object())
      : model_(std::move(model)), path_(std::move(path)), provenance_extra_(std::move(provenance_extra)) {}
  const QuantizedGru& model() const { return *model_; }
  std::shared_ptr<const QuantizedGru> shared_model() const { return model_; }
  const std::string& path() const { return path_; }
  void set_path(std::string path) { path_ = std::move(path); }
  // The name in messages and reports: the path, or "artifact (in memory)".
  std::string source() const { return path_.empty() ? "artifact (in memory)" : path_; }
  const qgru_rt::Model& runtime() const;
  // Provenance keys beyond the reader's (e.g. "range_search"), written again by save.
  const nlohmann::json& provenance_extra() const { return provenance_extra_; }

 private:
  std::shared_ptr<const QuantizedGru> model_;
  std::string path_;
  nlohmann::json provenance_extra_;
  mutable std::mutex runtime_mutex_;
  mutable std::unique_ptr<qgru_rt::Model> runtime_;
};

struct Report {
  GruVerifyReport report;
  std::shared_ptr<const QuantizedGru> model;  // for the HTML report's activation plots
  std::string model_name, artifact_name, input_name;
  std::vector<CommandFile> inputs;  // the files it was made from, which no report written may replace
};

}  // namespace qgru::python
