#pragma once
// Checks that several subcommands share: finite numeric options and the provenance check of weights.
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "qgru/base/output_policy.h"

namespace qgru::cli {

// An artifact read by the command: its JSON, and the tensor file that JSON names as a second input, so that no
// output of the command can replace either (qgru/base/output_policy.h). The JSON is read for the name only
// when it is a regular file; the policy refuses it otherwise.
void add_artifact_input(std::vector<CommandFile>& inputs, const std::string& flag, const std::string& json_path);

// A float model read by the command: the file, and for an ONNX model every external data file its tensors
// name, so that no output of the command can replace weights stored beside the graph.
void add_model_input(std::vector<CommandFile>& inputs, const std::string& flag, const std::string& model_path);

// A numeric option that must be a finite number: NaN or an infinity is a usage error (exit 2), since NaN
// compares false with everything and would switch a check off (--fail-below-sqnr nan). CLI11's Range lets NaN
// through, so this validator goes first.
const CLI::Validator& finite_number();

// The file a --config names, or "" for a preset name (qgru/quant/bitwidth_presets.h).
std::string config_file(const std::string& name_or_path);

// --allow-model-mismatch, with one help text wherever it appears.
CLI::Option* add_allow_model_mismatch(CLI::App& command, bool& allow, const std::string& what);

// `recorded_by` (statistics or an artifact) records the sha256 of the float weights it was made from; refuse
// (qgru::Error, exit 1) when --model has other bytes, or with `allow` only warn. A file that records no
// sha256 (made by an older qgru) is let through with a warning: there is nothing to compare. Returns the
// sha256 of --model.
std::string require_same_weights(const std::string& recorded_by, const std::string& recorded_sha256,
                          const std::string& model_path, bool allow);

}  // namespace qgru::cli
