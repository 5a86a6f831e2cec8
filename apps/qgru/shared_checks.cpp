#include "shared_checks.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "qgru/base/sha256.h"
#include "qgru/base/weights_provenance.h"

namespace qgru::cli {

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

const CLI::Validator& int64_number() {
  static const CLI::Validator validator(
      [](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || end == nullptr || *end != '\0') return "expected a whole number, got '" + text + "'";
        if (errno == ERANGE) return "'" + text + "' is outside the 64-bit integer range";
        return {};
      },
      "INT64");
  return validator;
}

namespace {

// A number (as CLI11 reads it) that `accept` takes; else "expected `wanted`, got 'TEXT'".
CLI::Validator number_check(bool (*accept)(double), const std::string& wanted, const std::string& name) {
  return CLI::Validator(
      [accept, wanted](std::string& text) -> std::string {
        double value = 0.0;
        if (!CLI::detail::lexical_cast(text, value) || !accept(value)) return "expected " + wanted + ", got '" + text + "'";
        return {};
      },
      name);
}

}  // namespace

const CLI::Validator& positive_number() {
  static const CLI::Validator validator =
      number_check([](double v) { return v > 0.0 && std::isfinite(v); }, "a finite number above 0", "POSITIVE");
  return validator;
}

const CLI::Validator& non_negative_number() {
  static const CLI::Validator validator =
      number_check([](double v) { return v >= 0.0 && std::isfinite(v); }, "a finite number, 0 or above", "NONNEGATIVE");
  return validator;
}

CLI::Option* add_allow_model_mismatch(CLI::App& command, bool& allow, const std::string& what) {
  return command.add_flag("--allow-model-mismatch", allow,
                          "Use " + what + " even when it records other float weights than --model (their sha256 "
                          "differs): a warning instead of the refusal");
}

std::string require_same_weights(const std::string& recorded_by, const std::string& recorded_sha256,
                                 const std::string& model_path, bool allow) {
  const std::string model_sha256 = sha256_file_hex(model_path);
  qgru::require_same_weights(recorded_by, recorded_sha256, model_path, model_sha256, allow);
  return model_sha256;
}

}  // namespace qgru::cli
