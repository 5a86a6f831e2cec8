#pragma once
// The host side shared by the kernels on the stripes layout (quant_linear_stripes.cu, quant_linear_wgmma.cu): a
// kernel instance with its dynamic shared memory, made ready once per layer (the opt-in limit checked, the
// attribute set, the occupancy asked) and launched over stripes x row blocks.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "qgru/base/error.h"
#include "qgru/kernels/stripe_linear.h"
#include "qgru_cuda/check.h"
#include "quant_linear_launch.h"

namespace qgru::cuda {

struct StripeKernelEntry {
  void (*kernel)(StripeLinearArgs);
  int smem_bytes;  // dynamic shared memory of a block
  const char* name;
};

// Resident blocks per multiprocessor of `entry` at `threads` a block, after opting it in to its shared memory; 0
// where a block cannot hold it (the opt-in limit below it): the layer then takes another engine, rather than an
// error from the attribute.
inline int prepare_stripe_kernel(const StripeKernelEntry& entry, int threads) {
  int device = 0, optin = 0;
  QGRU_CUDA_CHECK(cudaGetDevice(&device));
  QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  cudaFuncAttributes attributes{};
  QGRU_CUDA_CHECK(cudaFuncGetAttributes(&attributes, entry.kernel));
  if (static_cast<int64_t>(entry.smem_bytes) + static_cast<int64_t>(attributes.sharedSizeBytes) > optin) return 0;
  // A fixed value per kernel, the same whichever layer sets it: no ordering between threads is needed.
  QGRU_CUDA_CHECK(cudaFuncSetAttribute(entry.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, entry.smem_bytes));
  int blocks = 0;
  QGRU_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, entry.kernel, threads,
                                                                static_cast<size_t>(entry.smem_bytes)));
  return blocks;
}

// One launch of `entry`: `blocks` stripes x m_blocks row blocks (one-dimensional, row block fastest), args.m_blocks
// set; `what` names the engine in the refusal of a grid out of range (M outside 1..kStripeMaxRows, 2^31 blocks).
inline void launch_stripe_kernel(const StripeKernelEntry& entry, int threads, const StripeLinearArgs& args, int64_t blocks,
                                 int64_t m_blocks, const char* what, void* stream) {
  if (blocks < 1 || args.M < 1 || args.M > kernels::kStripeMaxRows || blocks * m_blocks > 0x7FFFFFFF) {
    throw Error(std::string(what) + " launch: " + std::to_string(blocks) + " stripes x " + std::to_string(m_blocks) +
                " row blocks (M=" + std::to_string(args.M) + ") out of range");
  }
  StripeLinearArgs launch = args;
  launch.m_blocks = m_blocks;
  entry.kernel<<<static_cast<unsigned>(blocks * m_blocks), static_cast<unsigned>(threads), static_cast<size_t>(entry.smem_bytes),
                 static_cast<cudaStream_t>(stream)>>>(launch);
  QGRU_CUDA_CHECK_LAUNCH(entry.name);
}

}  // namespace qgru::cuda
