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

// A 64-bit integer option's text: a whole number int64 holds. CLI11 reads a number past int64 as its largest
// value, silently (99999999999999999999 as 2^63 - 1); this validator goes first and refuses it (exit 2).
const CLI::Validator& int64_number();

// A finite number above 0 / at or above 0 (CLI11's PositiveNumber and NonNegativeNumber name their bound as
// the 309-digit largest double, and let an infinity through).
const CLI::Validator& positive_number();
const CLI::Validator& non_negative_number();

// --allow-model-mismatch, with one help text wherever it appears.
CLI::Option* add_allow_model_mismatch(CLI::App& command, bool& allow, const std::string& what);

// qgru::require_same_weights (qgru/base/weights_provenance.h) for the file --model: refused with exit 1, or
// with `allow` only warned about. Returns the sha256 of --model.
std::string require_same_weights(const std::string& recorded_by, const std::string& recorded_sha256,
                          const std::string& model_path, bool allow);

}  // namespace qgru::cli
