#pragma once
// Internal: the kernel arguments of the quantized linear and its launcher (quant_linear_kernels.cu).
// Plain C++ types so quant_linear.cpp (compiled by the host compiler) can fill them.
#include <cstdint>
#include <string>

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

// The stripes kernel (quant_linear_stripes.cu; layout and protocol: qgru/kernels/stripe_linear.h).
struct StripeLinearArgs {
  const uint16_t* a = nullptr;        // fp16 [M, K] row-major, 16-byte aligned; already gathered for act-order
  const uint32_t* words = nullptr;    // the repacked tiles (StripeWeights::words)
  const uint32_t* params = nullptr;   // [groups_padded, n_padded] scale | zero << 16
  uint16_t* c = nullptr;              // fp16 [M, N]
  float* workspace = nullptr;         // fp32 partial sums [max_segments, M, n_padded]
  uint32_t* counters = nullptr;       // [row blocks, n_tiles], 0 before the launch, 0 again after it
  int64_t M = 0, N = 0, K = 0, n_padded = 0;
  int64_t n_tiles = 0, k_tiles = 0, tiles = 0, tiles_per_block = 0;
  int64_t group_size = 0;             // effective (StripeWeights::group_size)
  int64_t m_blocks = 0;               // row blocks (stripe_m_blocks(M)); set by launch_stripe_linear
};

// blocks · stripe_m_blocks(M) blocks of 128 threads (one dimension, row block fastest: stripe_grid_block), the
// kernel of stripe_m_frags(M) m16 fragments per block; 1 <= M <= kStripeMaxRows. Throws NotSupported for other bit widths, CudaFailure on a launch error.
void launch_stripe_linear(const StripeLinearArgs& args, int bits, int64_t blocks, void* stream);
// Readies the kernel of (bits, m_frags) on the current device (its dynamic shared-memory limit, a fixed value
// per kernel) and returns how many of its blocks one multiprocessor holds (0: none fits this device).
int prepare_stripe_linear(int bits, int m_frags);
// The whole weight, fp16 [K, N] row-major (rows in the layer's K order), from the stripes layout of args.
// The wgmma engine (quant_linear_wgmma.cu): the same arguments, row blocks of `rows` (64 or 128) rows.
// prepare: resident blocks per SM of the (bits, rows) instance, 0 where the device cannot run it (not
// compute capability 9.0, or too little shared memory); wgmma_unavailable_reason says why ("" when it can).
void launch_stripe_wgmma(const StripeLinearArgs& args, int bits, int rows, int64_t blocks, void* stream);
int prepare_stripe_wgmma(int bits, int rows);
std::string wgmma_unavailable_reason();
void launch_stripe_dequant(const StripeLinearArgs& args, int bits, uint16_t* w16, void* stream);
// out[m, k'] = a[m, perm[k']] (fp16 bits, [M, K] each).
void launch_gather_columns(const uint16_t* a, const int32_t* perm, uint16_t* out, int64_t M, int64_t K, void* stream);

}  // namespace qgru::cuda
