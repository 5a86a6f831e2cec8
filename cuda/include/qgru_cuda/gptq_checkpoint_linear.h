#pragma once
// A GPTQ checkpoint layer as the GPU linear takes it (QuantLinear's GptqLinearWeights): what `qgru linear
// --device cuda` and the Python package's QuantLinear(device="cuda") upload, converted in one place.
// Host-only, no CUDA headers.
#include <cstdint>
#include <vector>

#include "qgru/gptq/checkpoint.h"
#include "qgru_cuda/quant_linear.h"

namespace qgru::cuda {

// `layer` as read_layer decodes it (zero points themselves, fp16-valued scales) and its codes packed as the
// checkpoint stores them (qweight [K·bits/32, N]): qzeros re-packed as gptq_v2 (zero_adjust 0, so a v1 file's
// zero points reach the kernel as the clients read them), scales as fp16 bits (exact: they are fp16 values),
// g_idx as it is.
GptqLinearWeights checkpoint_linear_weights(const gptq::QuantizedLayer& layer, const std::vector<int32_t>& qweight);

// y [M, N] = x [M, K] · Ŵᵀ on the GPU from host floats: x rounded to fp16 and copied up, `linear` run on the
// default stream (QuantLinear::run_host: synchronizes), y's fp16 values copied down and returned as floats.
std::vector<float> run_host_floats(const QuantLinear& linear, const std::vector<float>& x, int64_t M);

}  // namespace qgru::cuda
