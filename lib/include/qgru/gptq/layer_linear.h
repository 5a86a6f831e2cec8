#pragma once
// One layer of a GPTQ checkpoint run on activations, y = x · Ŵᵀ + b: what `qgru linear` and the Python
// package's gptq_linear call, so that both read a checkpoint the same way. The CPU product comes straight
// from the packed codes (linear.h's linear_f32, a tile of Ŵ at a time).
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"
#include "qgru/gptq/checkpoint.h"

namespace qgru::gptq {

// A checkpoint layer as the clients read it: quantize_config.json beside the tensor file gives the bits, the
// format and the v1 zero-point rule (read_layer); PREFIX.bias [N] (F16, F32 or BF16) is the bias every client
// adds, kept unless `with_bias` is false.
struct CheckpointLayer {
  QuantizedLayer layer;
  std::vector<int32_t> qweight;  // the codes packed as the checkpoint stores them, [K·bits/32, N]
  std::vector<float> bias;       // [N]; empty when the checkpoint has none or it was left out
};
CheckpointLayer read_checkpoint_layer(const std::string& checkpoint_path, const std::string& prefix, bool with_bias);
// The same for a checkpoint's tensors already in memory (qgru.gptq's result, a file read once), decoded under
// `config` (the bits, format and v1 zero-point rule its quantize_config.json gives); `source` names them in errors.
CheckpointLayer checkpoint_layer(const SafetensorsFile& file, const QuantizeConfig& config, const std::string& prefix,
                                 bool with_bias, const std::string& source);

// x [M, K] as float32 row-major; refused naming `source` unless it has rank 2 and the layer's K columns.
std::vector<float> linear_input(const Tensor& input, const std::string& source, const CheckpointLayer& checkpoint,
                                const std::string& prefix, int64_t& M);

// y [M, N] row-major = x [M, K] · Ŵᵀ, float32 sums on the CPU; qweight as CheckpointLayer::qweight.
std::vector<float> layer_linear_f32(const QuantizedLayer& layer, const std::vector<int32_t>& qweight,
                                    const std::vector<float>& x, int64_t M);

// y [M, N] += bias [N] in float32 (nothing when bias is empty). On a y of fp16 values (the GPU kernel's)
// this is the clients' own order: the product first, then their fp16 bias.
void add_linear_bias(std::vector<float>& y, const std::vector<float>& bias, int64_t M);

}  // namespace qgru::gptq
