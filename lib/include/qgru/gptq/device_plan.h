#pragma once
// Host-side sizing of GPTQ on the GPU (cuda/src/gptq_device.cpp), device-free so that the CPU tests check it:
// how many activation rows one Hessian chunk widens to float64, and what device memory one layer takes.
#include <cstdint>
#include <string>

namespace qgru::gptq {

// Activation rows per Hessian chunk: as many as fit `budget_bytes` of float32 staging plus float64 widened
// rows (12 bytes per value), at least 1, at most M (and at most 2^31 − 1, cuBLAS's int k).
int64_t hessian_chunk_rows(int64_t K, int64_t M, uint64_t budget_bytes);

// Device bytes of one layer's GPTQ (each buffer rounded up to 256 bytes), UINT64_MAX on overflow:
//   weight        W row-major as uploaded [N, K] and transposed Wt [K, N], float64
//   matrices      the permuted H, the reversed work matrix and U, float64 [K, K] each (the caller's H apart)
//   block         Err [B, N] float64
//   tables        scale and zero [T, N] float64
//   codes         processing-order and original-order codes [K, N] int32, packed words [K·bits/32, N]
//   tie_margin    [K, N] float64 when asked
//   small         perm, inverse perm, slots, diag: [K] each
// The cuSOLVER workspaces come on top (queried from the library at run time).
struct DeviceGptqBytes {
  uint64_t weight = 0, matrices = 0, block = 0, tables = 0, codes = 0, tie_margin = 0, small = 0, total = 0;
};
DeviceGptqBytes device_gptq_bytes(int64_t N, int64_t K, int64_t block_size, int64_t tables, int bits,
                                  bool tie_margin);

// "" when `needed` bytes fit in `free_bytes` of device memory, else the one-line refusal naming the layer
// shape and both figures.
std::string device_memory_refusal(int64_t N, int64_t K, uint64_t needed, uint64_t free_bytes);

}  // namespace qgru::gptq
