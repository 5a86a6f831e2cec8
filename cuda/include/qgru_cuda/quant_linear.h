#pragma once
// GPU quantized linear (W4A16 / W8A16): C[M, N] fp16 = A[M, K] fp16 · W[K, N], W a GPTQ checkpoint layer
// dequantized on the fly with the fast PRMT/LOP3 path (qgru/kernels/fast_dequant.h), fp32 accumulation on
// tensor cores. Four engines (qgru/kernels/linear_plan.h, "which engine serves a call"): the WMMA tile kernel
// (kTileConfigs; the default), the stripes mma.sync kernel (qgru/kernels/stripe_linear.h), for large M a
// per-call dequantization + cuBLAS fp16 GEMM, and on Hopper the wgmma kernel (qgru/kernels/stripe_wgmma.h);
// QGRU_CUDA_LINEAR_KERNEL=legacy|stripes|auto|wgmma chooses at load.
// Host-only API without CUDA headers. Shapes no engine serves throw NotSupported naming the shape.
#include <cstdint>
#include <memory>
#include <vector>

#include "qgru/kernels/linear_plan.h"
#include "qgru/kernels/stripe_linear.h"

namespace qgru::cuda {

// One GPTQ layer on the host, in the checkpoint layout (qgru/kernels/gptq_layout.h):
//   qweight int32 [K·bits/32, N], qzeros int32 [G, N·bits/32], scales fp16 bits [G, N], g_idx int32 [K]
//   (empty g_idx = trivial k / group_size), G = ceil(K / group_size).
struct GptqLinearWeights {
  int64_t K = 0, N = 0;
  int bits = 4;
  int64_t group_size = 0;  // K for one group
  int zero_adjust = 0;     // 1 for the "gptq" (v1) format, whose qzeros hold zero - 1; 0 for "gptq_v2"
  std::vector<int32_t> qweight, qzeros;
  std::vector<uint16_t> scales;
  std::vector<int32_t> g_idx;
};

// The layer resident on the current GPU. Construction validates every shape (qgru::Error naming the tensor),
// prepares act-order (reorders qweight rows once, keeps the permutation to gather A) or refuses it
// (NotSupported), repacks (stripes layout) and uploads once; run() copies nothing between host and device.
// Requires a device (NoDevice otherwise). Launches of one layer must not overlap in time (issue them on one
// stream, or order them with events): the stripes kernel's column counters belong to the layer.
class QuantLinear {
 public:
  // The setting from QGRU_CUDA_LINEAR_KERNEL (unset: kDefaultLinearKernelSetting); a bad value throws Error.
  explicit QuantLinear(const GptqLinearWeights& weights);
  QuantLinear(const GptqLinearWeights& weights, kernels::LinearKernelSetting setting);
  ~QuantLinear();
  QuantLinear(QuantLinear&&) noexcept;
  QuantLinear& operator=(QuantLinear&&) noexcept;

  int64_t K() const;
  int64_t N() const;
  bool act_order() const;  // true when A columns are gathered through a permutation

  kernels::LinearKernelSetting setting() const;
  // The engine run(M) takes and why.
  kernels::EngineChoice engine(int64_t M) const;
  // The tile kernel's launch plan for M rows on this device (plan.supported false with the reason when no
  // kernel fits); meaningful when engine(M) is Tiles.
  kernels::LinearPlan plan(int64_t M) const;
  // The stripes partition of one launch of up to kStripeMaxRows rows (engine Stripes). Above kStripeMaxRows,
  // run() launches once per kStripeMaxRows rows with this partition's stripes (blocks, tiles_per_block,
  // max_segments); m_frags and m_blocks are those of a full launch, the last launch's follow from its rows.
  kernels::StripePlan stripe_plan(int64_t M) const;
  // The same for the wgmma engine (engine Wgmma): row blocks of LinearTuning::wgmma_rows rows, or
  // kernels::wgmma_rows of the launch's rows; m_frags = rows / 16.
  kernels::StripePlan wgmma_plan(int64_t M) const;
  // The split-K target and the tile configuration plan() chooses (qgru/kernels/linear_plan.h; the default
  // tuning leaves both to the plan; a benchmark sweeps them); for the stripes engine target_blocks_per_sm sets
  // the stripes per multiprocessor of each row block (0: as many of the instance's blocks as the occupancy
  // calculator fits on one multiprocessor at load, at most kStripeBlocksPerSm; for the wgmma engine, as many as
  // fit), and wgmma_rows the wgmma engine's row block. Changes plan(), stripe_plan(), wgmma_plan() and
  // workspace_bytes() from the next call on.
  void set_tuning(const kernels::LinearTuning& tuning);
  int64_t workspace_bytes(int64_t M) const;  // throws NotSupported when no kernel fits

  // a: device fp16 [M, K], 16-byte aligned; c: device fp16 [M, N] (4-byte aligned when engine(M) is Stripes or
  // Wgmma); workspace: device, >= workspace_bytes(M) bytes (may be null when that is 0; 16-byte aligned when
  // engine(M) is Stripes or Wgmma). A pointer misaligned for its engine throws NotSupported before any launch.
  // stream: a cudaStream_t (null: the default stream). Asynchronous.
  void run(const void* a, int64_t M, void* c, void* workspace, void* stream) const;

  // Convenience for tests and the CLI: host fp16 bits in, host fp16 bits out (synchronous).
  std::vector<uint16_t> run_host(const std::vector<uint16_t>& a, int64_t M) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace qgru::cuda
