#pragma once
// GPTQ checkpoints as AutoGPTQ / GPTQModel write them: for a linear layer "PREFIX.weight" [N, K],
//   PREFIX.qweight int32 [K·bits/32, N], PREFIX.qzeros int32 [G, N·bits/32], PREFIX.scales fp16 [G, N],
//   PREFIX.g_idx int32 [K]  (packing in qgru/gptq/pack.h),
// and quantize_config.json beside the tensor file (bits, group_size, damp_percent, desc_act, static_groups,
// sym, true_sequential, quant_method "gptq", checkpoint_format "gptq" | "gptq_v2").
// Dequantized weight: Ŵ[n, k] = scales[g, n] · (code[n, k] − zero[g, n]), g = g_idx[k].
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/gptq/gptq.h"
#include "qgru/gptq/pack.h"
#include "qgru/io/safetensors.h"

namespace qgru::gptq {

struct QuantizeConfig {
  int bits = 4;
  int64_t group_size = 128;  // -1: per row
  double damp_percent = 0.01;
  bool desc_act = false;
  bool static_groups = false;
  bool sym = false;
  CheckpointFormat format = CheckpointFormat::kGptq;
};

std::string quantize_config_json(const QuantizeConfig& config);
// Throws qgru::Error naming `source` for a missing or wrong-typed key, quant_method other than "gptq", or
// an unsupported bit width / format. checkpoint_format absent means "gptq" (older AutoGPTQ files).
QuantizeConfig parse_quantize_config(const std::string& text, const std::string& source);
QuantizeConfig read_quantize_config(const std::string& path);
// quantize_config.json in the folder of `tensor_path`.
std::string quantize_config_path_beside(const std::string& tensor_path);

// One layer unpacked: what a checkpoint carries, in plain arrays.
struct QuantizedLayer {
  int bits = 4;
  int64_t N = 0, K = 0, G = 0;
  std::vector<int32_t> codes;   // [N, K]
  std::vector<float> scales;    // [G, N], fp16 values
  std::vector<int32_t> zeros;   // [G, N], the zero points themselves (not v1's zero − 1)
  std::vector<int32_t> g_idx;   // [K]
};

// "a.b.weight" → "a.b"; any other name is its own prefix.
std::string layer_prefix(const std::string& weight_name);

// GPTQ's result with scales rounded to fp16 (throws naming `what` if a scale is not a positive finite fp16).
QuantizedLayer to_checkpoint_layer(const GptqResult& result, const std::string& what);
std::vector<double> dequantize(const QuantizedLayer& layer);

// Adds PREFIX.{qweight,qzeros,scales,g_idx}; returns how many zero points v1 could not carry (zero = 0).
int64_t add_layer(SafetensorsFile& file, const std::string& prefix, const QuantizedLayer& layer,
                  CheckpointFormat format);
// Reads and checks every shape and dtype; `source` (the file name) is named in errors.
QuantizedLayer read_layer(const SafetensorsFile& file, const std::string& prefix, int bits, CheckpointFormat format,
                          const std::string& source);
// Prefixes of every layer in the file (names ending in ".qweight"), sorted.
std::vector<std::string> list_layers(const SafetensorsFile& file);

}  // namespace qgru::gptq
