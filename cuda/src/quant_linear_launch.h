#pragma once
// Internal: the kernel arguments of the quantized linear and its launcher (quant_linear_kernels.cu).
// Plain C++ types so quant_linear.cpp (compiled by the host compiler) can fill them.
#include <cstdint>

#include "qgru/kernels/linear_plan.h"

namespace qgru::cuda {

struct QuantLinearArgs {
  const uint16_t* a = nullptr;       // fp16 [M, K] row-major, 16-byte aligned
  const int32_t* a_perm = nullptr;   // [K] act-order gather (column perm[k'] of A), or null
  const uint32_t* qweight = nullptr; // [K·bits/32, N], rows already in the order of a_perm
  const uint32_t* qzeros = nullptr;  // [G, N·bits/32]
  const uint16_t* scales = nullptr;  // fp16 [G, N]
  uint16_t* c = nullptr;             // fp16 [M, N]
  float* workspace = nullptr;        // fp32 [M, N], zeroed, when plan.grid_z > 1; else null
  int64_t M = 0, N = 0, K = 0;
  int64_t group_size = 0;
  int zero_adjust = 0;
  int64_t k_tiles = 0, k_tiles_per_split = 0;
};

// Launches the GEMM (and, with split-K, the fp32 -> fp16 pass). stream is a cudaStream_t.
// Throws NotSupported for a plan whose configuration has no kernel, CudaFailure on a launch error.
void launch_quant_linear(const QuantLinearArgs& args, const kernels::LinearPlan& plan, void* stream);

}  // namespace qgru::cuda
