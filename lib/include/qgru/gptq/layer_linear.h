#pragma once
// One layer of a GPTQ checkpoint on the CPU, y = x · Ŵᵀ, straight from its packed codes (linear.h's
// linear_f32, a tile of Ŵ at a time): what `qgru linear --device cpu` and the Python package's gptq_linear run.
#include <cstdint>
#include <vector>

#include "qgru/gptq/checkpoint.h"

namespace qgru::gptq {

// x [M, K] row-major floats; qweight the layer's codes packed as the checkpoint stores them (pack_qweight of
// layer.codes, [K·bits/32, N]). Returns y [M, N] row-major, float32 sums.
std::vector<float> layer_linear_f32(const QuantizedLayer& layer, const std::vector<int32_t>& qweight,
                                    const std::vector<float>& x, int64_t M);

}  // namespace qgru::gptq
