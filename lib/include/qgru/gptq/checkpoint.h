#pragma once
// GPTQ checkpoints as AutoGPTQ / GPTQModel write them: for a linear layer "PREFIX.weight" [N, K],
//   PREFIX.qweight int32 [K·bits/32, N], PREFIX.qzeros int32 [G, N·bits/32], PREFIX.scales fp16 [G, N],
//   PREFIX.g_idx int32 [K]  (packing in qgru/gptq/pack.h),
// and quantize_config.json beside the tensor file in the layout GPTQModel writes and reads (bits, group_size,
// desc_act, sym, static_groups, damp_percent, true_sequential (false: no re-capture of activations between
// layers), quant_method "gptq", format and
// checkpoint_format "gptq" | "gptq_v2", pack_dtype "int32", and meta: quantizer ["qgru:VERSION", ...], uri,
// damp_percent, static_groups, true_sequential, mse, act_group_aware); docs/GPTQ.md lists every key and
// which reader uses it.
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
  bool act_group_aware = false;  // group-aware act-order (meta.act_group_aware); never with desc_act
  bool static_groups = false;
  bool sym = false;
  CheckpointFormat format = CheckpointFormat::kGptq;
  // How the v1 zero points of the files this config describes are read: the clients' rule, unless the
  // config is in qgru's earlier layout (meta.quantizer the plain string "qgru"). Set by parsing.
  V1ZeroRule v1_zero_rule = V1ZeroRule::kClients;
};

// The meta.quantizer entries written: "qgru:VERSION", and for v1 files "gptqmodel:7.7.0" as well, which
// declares that the v1 zero points follow GPTQModel's rule (pack.h). GPTQModel's loader reads an asymmetric
// v1 checkpoint only when its meta.quantizer names gptqmodel >= 0.9.0 (docs/GPTQ.md, "Clients").
std::vector<std::string> meta_quantizers(CheckpointFormat format);
std::string quantize_config_json(const QuantizeConfig& config);
// Throws qgru::Error naming `source` for a missing or wrong-typed key, quant_method other than "gptq",
// format and checkpoint_format that disagree, desc_act with act_group_aware, or an unsupported bit width /
// format. No format key means "gptq" (older AutoGPTQ files).
QuantizeConfig parse_quantize_config(const std::string& text, const std::string& source);
QuantizeConfig read_quantize_config(const std::string& path);
// quantize_config.json in the folder of `tensor_path`.
std::string quantize_config_path_beside(const std::string& tensor_path);
// "" when a checkpoint described by `wanted` may share the folder of `existing` (one quantize_config.json
// describes both): the same bits, group_size, sym, desc_act, act_group_aware, static_groups, damp_percent,
// format and v1 zero rule. Otherwise the keys that differ, "bits 8 here, 4 there"-style.
std::string config_disagreement(const QuantizeConfig& existing, const QuantizeConfig& wanted);

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

// Adds PREFIX.{qweight,qzeros,scales,g_idx}; for v1, returns what readers that add 1 to each zero-point
// field (not the clients) would misread (pack.h); zeros for v2.
V1FieldReaderMisreads add_layer(SafetensorsFile& file, const std::string& prefix, const QuantizedLayer& layer,
                                CheckpointFormat format);
// Reads and checks every shape and dtype; `source` (the file name) is named in errors. v1 zero points by
// `rule`; with qgru's earlier rule, where the clients would read a zero point differently, says so on the
// log (once per layer) with the count.
QuantizedLayer read_layer(const SafetensorsFile& file, const std::string& prefix, int bits, CheckpointFormat format,
                          const std::string& source, V1ZeroRule rule = V1ZeroRule::kClients);
// Prefixes of every layer in the file (names ending in ".qweight"), sorted.
std::vector<std::string> list_layers(const SafetensorsFile& file);

}  // namespace qgru::gptq
