#pragma once
// The bit-width config: for every tensor of the GRU data flow (qgru/gru_tensors.h) its width, signedness,
// symmetry and granularity, the activation implementation per gate, and the names of the range methods
// that calibration uses to pick each tensor's float range. An artifact embeds the config it was made with;
// the presets (configs/*.json) are the toolchain's (qgru/quant/bitwidth_presets.h).
//
// JSON (schema "qgru.bitwidth_config", version 1); every key is checked, unknown keys are refused:
//   { "schema": "qgru.bitwidth_config", "version": 1, "name": "int8", "description": "...",
//     "range_method": "minmax",   // optional default for every observed tensor (opaque string); absent:
//                                 // "" = the calibration statistics' own default method
//     "gemm_accumulator": "auto" | "int32" | "int64",   // optional, default "auto" (see GemmAccumulator)
//     "scales": "power_of_two" | "multiplier",   // optional, default "power_of_two" (docs/FIXED_POINT.md §1a)
//     "tensors": { "<GruTensor name>": { "bits": 2..16, "signed": bool, "symmetric": bool,
//                                        "granularity": "per_tensor" | "per_channel",   // W, R, bw, br only
//                                        "scale": "power_of_two" | "multiplier",         // optional: this
//                                                 // tensor's own scale kind (default: the config's "scales")
//                                        "range_method": "..." },                       // optional
//                  ... all 14 tensors ... },
//     "activations": { "update_gate" | "reset_gate" | "new_gate":
//                      { "impl": "table" | "pwl", "segments": N } } }   // segments: pwl only, optional
#include <array>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "qgru/fixed/activation.h"
#include "qgru/gru_tensors.h"
#include "qgru/base/tensor_quant.h"

namespace qgru {

constexpr const char* kBitwidthConfigSchema = "qgru.bitwidth_config";
constexpr int kBitwidthConfigVersion = 1;

struct TensorBitwidth {
  int bits = 8;              // 2..16
  bool is_unsigned = false;  // "signed": false
  bool symmetric = false;    // weights and biases must be symmetric (the cell has no weight zero point)
  bool per_channel = false;  // weights and biases only: one shift per output channel (row of W / R)
  // true: a real scale fitted to the range (mantissa * 2^-shift, TensorQuant); false: a power of two. A config
  // with any such tensor makes every rescale of the cell a multiplier and a shift (docs/FIXED_POINT.md §1a).
  bool multiplier_scale = false;
  std::string range_method;  // empty: the config's default
};

// Which implementation evaluates a gate's activation (see qgru/runtime/activation_tables.h).
struct GateActivationChoice {
  ActivationImpl impl = ActivationImpl::Table;
  int segments = 0;  // Pwl only; 0 = default_pwl_segments(output bits)
};

// The C++ type of the GEMM accumulators Σ q_W·q_x and Σ q_R·q_h.
//   Auto:  int32 when both operands are <= 8 bits (the GPU path: cublasGemmEx int8 x int8 -> int32),
//          int64 otherwise;
//   Int32: int32 for every GEMM (a device kernel accumulating in int32); quantize must prove it fits;
//   Int64: int64 for every GEMM.
enum class GemmAccumulator { Auto, Int32, Int64 };

enum class GateKind { Update = 0, Reset = 1, New = 2 };
const char* gate_kind_name(GateKind gate);  // "update_gate", "reset_gate", "new_gate"

struct BitwidthConfig {
  std::string name;
  std::string description;
  std::string range_method;  // "" = the range source's default
  GemmAccumulator gemm_accumulator = GemmAccumulator::Auto;
  std::array<TensorBitwidth, kGruTensorCount> tensors{};
  std::array<GateActivationChoice, 3> activations{};  // indexed by GateKind

  const TensorBitwidth& of(GruTensor tensor) const { return tensors[static_cast<int>(tensor)]; }
  TensorBitwidth& of(GruTensor tensor) { return tensors[static_cast<int>(tensor)]; }
  const GateActivationChoice& activation(GateKind gate) const { return activations[static_cast<int>(gate)]; }
  // The tensor's range method, or the config's default ("" when neither is given).
  const std::string& range_method_of(GruTensor tensor) const;
  // bits / is_unsigned / symmetric as a TensorQuant with shift 0 and zp 0 (the "spec" a range is asked for).
  TensorQuant spec(GruTensor tensor) const;
  // True when some tensor has a real scale: the model's rescales are multipliers (docs/FIXED_POINT.md §1a).
  bool multiplier_scales() const;
};

// Parse and validate. `source` (a file name or "preset int8") is named in every error, with the key.
BitwidthConfig parse_bitwidth_config(const nlohmann::json& json, const std::string& source);
BitwidthConfig parse_bitwidth_config_text(const std::string& text, const std::string& source);
nlohmann::json bitwidth_config_to_json(const BitwidthConfig& config);

}  // namespace qgru
