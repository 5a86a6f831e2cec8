#pragma once
// Checks that several subcommands share: finite numeric options and the provenance check of weights.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "qgru/base/output_policy.h"

namespace qgru::cli {

// A numeric option that must be a finite number: NaN or an infinity is a usage error (exit 2), since NaN
// compares false with everything and would switch a check off (--fail-below-sqnr nan). CLI11's Range lets NaN
// through, so this validator goes first.
const CLI::Validator& finite_number();

// --allow-model-mismatch, with one help text wherever it appears.
CLI::Option* add_allow_model_mismatch(CLI::App& command, bool& allow, const std::string& what);

// qgru::require_same_weights (qgru/base/weights_provenance.h) for the file --model: refused with exit 1, or
// with `allow` only warned about. Returns the sha256 of --model.
std::string require_same_weights(const std::string& recorded_by, const std::string& recorded_sha256,
                          const std::string& model_path, bool allow);

}  // namespace qgru::cli
