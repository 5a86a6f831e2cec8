#include "shared_checks.h"

#include <cmath>
#include <filesystem>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/base/message_text.h"
#include "qgru/base/sha256.h"
#include "qgru/import/onnx_gru.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/artifact.h"

namespace qgru::cli {

void add_artifact_input(std::vector<CommandFile>& inputs, const std::string& flag, const std::string& json_path) {
  inputs.push_back({flag, json_path});
  std::error_code error;
  if (!json_path.empty() && std::filesystem::is_regular_file(json_path, error)) {
    inputs.push_back({flag + " (its tensor file)", recorded_artifact_tensor_path(json_path)});
  }
}

void add_model_input(std::vector<CommandFile>& inputs, const std::string& flag, const std::string& model_path) {
  inputs.push_back({flag, model_path});
  for (const std::string& file : onnx_external_data_files(model_path)) inputs.push_back({flag + " (its external data)", file});
}

const CLI::Validator& finite_number() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        double value = 0.0;
        if (!CLI::detail::lexical_cast(text, value)) return "expected a number, got '" + text + "'";
        if (!std::isfinite(value)) return "expected a finite number, got '" + text + "'";
        return {};
      },
      "FINITE");
  return validator;
}

CLI::Option* add_allow_model_mismatch(CLI::App& command, bool& allow, const std::string& what) {
  return command.add_flag("--allow-model-mismatch", allow,
                          "Use " + what + " even when it records other float weights than --model (their sha256 "
                          "differs): a warning instead of the refusal");
}

std::string config_file(const std::string& name_or_path) {
  for (const std::string& name : bitwidth_preset_names()) {
    if (name == name_or_path) return "";
  }
  return name_or_path;
}

std::string require_same_weights(const std::string& recorded_by, const std::string& recorded_sha256,
                                 const std::string& model_path, bool allow) {
  const std::string model_sha256 = sha256_file_hex(model_path);
  if (recorded_sha256.empty()) {
    log()->warn("{}: records no sha256 of its float weights; cannot check that it belongs to --model {}",
                printable(recorded_by), printable(model_path));
    return model_sha256;
  }
  if (model_sha256 == recorded_sha256) return model_sha256;
  const std::string message = recorded_by + " was made from other float weights (sha256 " + recorded_sha256 +
                              ") than --model " + model_path + " (sha256 " + model_sha256 + ")";
  if (!allow) throw Error(message + "; use the matching files, or --allow-model-mismatch to go on anyway");
  log()->warn("{} (--allow-model-mismatch: going on)", printable(message));
  return model_sha256;
}

}  // namespace qgru::cli
