#pragma once
// One device workspace carved into regions (the CUDA executors allocate it once per run shape and reuse
// it; cuda/src/gru_cell_cuda.cu, float_gru_cuda.cu), and the grid of their one-thread-per-element kernels.
// Plain C++, tested on the host.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "qgru/base/error.h"

namespace qgru::kernels {

// 256 bytes: cudaMalloc's own alignment, enough for every vector access and cuBLAS's IMMA operands.
inline constexpr int64_t kWorkspaceAlignment = 256;

struct WorkspaceCarve {
  std::vector<int64_t> offsets;  // region i starts at offsets[i], a multiple of kWorkspaceAlignment
  int64_t total_bytes = 0;       // the allocation size: every region fits, none overlaps
};

// Regions in the order given (a size of 0 gets an offset and no bytes). Throws qgru::Error on a negative size.
inline WorkspaceCarve carve_workspace(std::initializer_list<int64_t> sizes) {
  WorkspaceCarve carve;
  int64_t at = 0;
  for (int64_t size : sizes) {
    if (size < 0) throw Error("workspace region of " + std::to_string(size) + " bytes");
    carve.offsets.push_back(at);
    at += (size + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  }
  carve.total_bytes = at;
  return carve;
}

// Blocks of `threads` threads covering `elements` (one thread per element; the kernel returns for
// idx >= elements). Throws qgru::Error when the grid would exceed CUDA's 2^31 - 1 blocks.
inline int64_t elementwise_blocks(int64_t elements, int threads) {
  if (elements < 1 || threads < 1) throw Error("elementwise launch over " + std::to_string(elements) + " elements");
  const int64_t blocks = (elements + threads - 1) / threads;
  if (blocks > INT32_MAX) throw Error("elementwise launch over " + std::to_string(elements) + " elements exceeds the grid limit");
  return blocks;
}

}  // namespace qgru::kernels
