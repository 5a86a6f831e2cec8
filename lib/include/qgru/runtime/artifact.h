#pragma once
// The quantized-model artifact: model.qgru.json beside model.qgru.safetensors, and its reader. The writer
// is the toolchain's (qgru/quant/artifact_write.h): both files together or not at all (AtomicFileGroup).
//
// JSON (schema "qgru.artifact", version 1, 2 for the linear_before_reset = 0 cell, 3 for multiplier scales):
//   { "schema", "version", "tool_version",
//     "scales": "multiplier"                 // version 3 only (required there): real scales, every rescale a
//                                             // multiplier and a shift (docs/FIXED_POINT.md §1a); activation
//                                             // tensors then have "mantissa", the derived shifts a "multiplier_..."
//                                             // beside each, and the tensors below mantissa_W/R/bw/br [3H] F64 and
//                                             // the four per-channel derived multipliers [3H] I32. qgru writes
//                                             // version 3 only for such models.
//     "linear_before_reset": false           // version 2 and 3 (required there): every cell is ONNX's
//                                             // linear_before_reset = 0 cell (docs/FIXED_POINT.md §3a). Version 1
//                                             // artifacts are the linear_before_reset = 1 cell; qgru writes those
//                                             // as version 1, byte for byte as before, so older readers keep them
//     "tensor_file": "model.qgru.safetensors" (a name in the JSON's folder), "tensor_file_sha256",
//     "provenance": {"model": {"path", "sha256"}, "stats": {...}, "config": {"source", "sha256"}},
//     "config": <the bit-width config, qgru/runtime/bitwidth_config.h>,
//     "shapes": {"input_size", "hidden_size", "num_layers", "num_directions"},
//     "gemm_operands_fit_int8": bool,          // a CUDA int8 GEMM can run every GEMM
//     "overflow_proof": {"ok", "checks", "least_spare_bits"},   // informative; the reader proves again
//     "cells": [ { "layer", "direction", "input_size", "hidden_size",
//                  "gemm_x_accumulator": "int32"|"int64", "gemm_h_accumulator": ...,
//                  "tensors": { "<activation tensor>": {"bits", "unsigned", "symmetric", "shift", "zp", "range": [min, max]},
//                               "W"|"R"|"bw"|"br": {"bits", "per_channel", "shift_min", "shift_max"} },
//                  "derived": { every scalar derived shift of the cell's variant (docs/FIXED_POINT.md §3, §3a;
//                               qgru/runtime/artifact_keys.h), "quant_one_in_update_gate_scale" },
//                  "activations": { "update_gate"|"reset_gate"|"new_gate": <activation_to_artifact object> } } ] }
// Tensors, prefix "layer<l>.dir<d>.": W [3H, C] and R [3H, H] (I8 for widths <= 8, else I16); bw, br [3H] I32;
// W_sum, R_sum [3H] I64; shift_W, shift_R, shift_bw, shift_br and the four per-channel derived shifts [3H] I32;
// the activation arrays under "<prefix>update_gate." etc.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/base/output_policy.h"
#include "qgru/runtime/quantized_gru.h"

namespace qgru {

constexpr const char* kArtifactSchema = "qgru.artifact";
constexpr int kArtifactVersion = 3;                   // the newest version this qgru reads
constexpr int kArtifactVersionLinearBeforeReset = 1;  // what it writes for the linear_before_reset = 1 cell
constexpr int kArtifactVersionResetBeforeLinear = 2;  // ... and for the linear_before_reset = 0 cell
constexpr int kArtifactVersionMultiplierScales = 3;   // ... and for a multiplier-scale model (either cell)

// The tensor file an artifact's JSON names (its "tensor_file", a file name in the JSON's folder), for the
// readers and for the output policy of the commands that read an artifact. Reads and parses the JSON; throws
// qgru::Error naming the file when it cannot. (Artifacts are written under the rule of
// qgru/quant/artifact_write.h, NAME.qgru.json beside NAME.qgru.safetensors; older ones with other names are
// read by what their JSON records.)
std::string recorded_artifact_tensor_path(const std::string& json_path);

// An artifact read by a command, as inputs to the output policy (qgru/base/output_policy.h): its JSON, and the
// tensor file that JSON names (`flag` + " (its tensor file)"), so that no output can replace either. The JSON
// is read for the name only when it is a regular file; the policy refuses it otherwise.
void add_artifact_input(std::vector<CommandFile>& inputs, const std::string& flag, const std::string& json_path);

// Read and validate: schema name and version (a newer version is refused), the tensor file's sha256,
// every shape, dtype, code range and shift range, the derived shifts and row sums (recomputed and
// compared), the activation data, and the overflow proof. Every error is one line naming the file and
// the key or tensor.
QuantizedGru read_artifact(const std::string& json_path);

// The same reader and checks on an artifact held in memory: the JSON text and the tensor file's bytes (its
// "tensor_file" name is then only reported; the sha256 is checked). source_name names it in messages.
QuantizedGru read_artifact_memory(const std::string& json_text, const uint8_t* tensor_bytes, size_t tensor_size,
                                  const std::string& source_name);

}  // namespace qgru
