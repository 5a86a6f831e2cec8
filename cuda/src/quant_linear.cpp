// QuantLinear: validation, act-order preparation, the one-time repack and upload of a GPTQ layer; the engine
// choice per call (qgru/kernels/linear_plan.h) and the launches. run() copies nothing between host and device.
#include "qgru_cuda/quant_linear.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "blas_handle.h"
#include "qgru/kernels/device_upload.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/kernels/stripe_wgmma.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "cuda_uploader.h"
#include "quant_linear_launch.h"

namespace qgru::cuda {

struct QuantLinear::Impl {
  int64_t K = 0, N = 0, group_size = 0;
  int bits = 4, zero_adjust = 0, sm_count = 0;
  kernels::LinearTuning tuning;  // the plan's defaults unless set_tuning
  kernels::LinearKernelSetting setting = kernels::kDefaultLinearKernelSetting;
  std::string stripes_reason;  // "" when the layer holds the stripes layout
  bool act_order = false;
  std::vector<DeviceBuffer> arrays;  // the uploads below live here
  kernels::GptqLayerUpload device;   // the checkpoint layout (legacy setting, or a layer stripes cannot take)
  kernels::StripeLayerUpload stripes;  // the stripes layout (otherwise)
  int64_t k_padded = 0, n_padded = 0, stripe_group_size = 0;
  // Resident blocks per multiprocessor of the stripes kernel at 1, 2 and 4 m16 fragments (the occupancy
  // calculator's answer, at most kStripeBlocksPerSm): the partition's block target.
  int stripe_blocks_per_sm[3] = {0, 0, 0};
  // The wgmma engine (wgmma setting): resident blocks per SM at row blocks of 64 and 128 rows, and why the
  // layer cannot run it ("" when it can; the stripes kernel serves instead).
  int wgmma_blocks_per_sm[2] = {0, 0};
  std::string wgmma_reason;
  std::unique_ptr<BlasHandle> blas;  // the DequantGemm engine's cuBLAS (auto setting only)
  // The engine per row of kEngineTable, chosen once at load (choose_engine gives the same answer for every M
  // of a row): run() looks it up instead of choosing again.
  std::vector<kernels::EngineChoice> choices;

  const kernels::EngineChoice& choice(int64_t M) const {
    size_t row = 0;
    while (row + 1 < choices.size() && M > kernels::kEngineTable[row].max_m) ++row;
    return choices[row];
  }
};

namespace {

void expect_size(const char* tensor, size_t got, int64_t want, const std::string& shape) {
  if (static_cast<int64_t>(got) != want) {
    throw Error("GPTQ layer: " + std::string(tensor) + " has " + std::to_string(got) + " elements, expected " + shape +
                " = " + std::to_string(want));
  }
}

kernels::LinearKernelSetting setting_from_environment() {
  kernels::LinearKernelSetting setting;
  const std::string why = kernels::parse_linear_kernel_setting(std::getenv("QGRU_CUDA_LINEAR_KERNEL"), setting);
  if (!why.empty()) throw Error(why);
  return setting;
}

constexpr int64_t kAlign = 256;
int64_t align_up(int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace

QuantLinear::QuantLinear(const GptqLinearWeights& w) : QuantLinear(w, setting_from_environment()) {}

QuantLinear::QuantLinear(const GptqLinearWeights& w, kernels::LinearKernelSetting setting) : impl_(std::make_unique<Impl>()) {
  if (w.bits != 4 && w.bits != 8) throw NotSupported("GPTQ layer with " + std::to_string(w.bits) + "-bit weights (kernels exist for 4 and 8)");
  if (w.K <= 0 || w.N <= 0) throw Error("GPTQ layer: K and N must be positive, got K=" + std::to_string(w.K) + " N=" + std::to_string(w.N));
  const int per_word = 32 / w.bits;
  if (w.K % per_word != 0 || w.N % per_word != 0) {
    throw Error("GPTQ layer: K=" + std::to_string(w.K) + " and N=" + std::to_string(w.N) + " must be multiples of " +
                std::to_string(per_word) + " for " + std::to_string(w.bits) + "-bit packing");
  }
  const int64_t group_size = w.group_size > 0 ? w.group_size : w.K;
  const int64_t groups = (w.K + group_size - 1) / group_size;
  expect_size("qweight", w.qweight.size(), w.K / per_word * w.N, "[K*bits/32, N]");
  expect_size("qzeros", w.qzeros.size(), groups * (w.N / per_word), "[G, N*bits/32]");
  expect_size("scales", w.scales.size(), groups * w.N, "[G, N]");
  if (!w.g_idx.empty()) expect_size("g_idx", w.g_idx.size(), w.K, "[K]");
  if (w.zero_adjust != 0 && w.zero_adjust != 1) throw Error("GPTQ layer: zero_adjust must be 0 or 1");

  kernels::ActOrderPlan order;
  if (!w.g_idx.empty()) {
    const std::string why = kernels::plan_act_order(w.g_idx, w.K, group_size, order);
    if (!why.empty()) throw NotSupported("GPTQ layer K=" + std::to_string(w.K) + " N=" + std::to_string(w.N) + ": " + why);
  }
  require_device();
  Impl& d = *impl_;
  d.K = w.K;
  d.N = w.N;
  d.group_size = group_size;
  d.bits = w.bits;
  d.zero_adjust = w.zero_adjust;
  d.sm_count = multiprocessor_count();
  d.act_order = !order.identity;
  d.setting = setting;
  d.stripes_reason = setting == kernels::LinearKernelSetting::Legacy
                         ? std::string("QGRU_CUDA_LINEAR_KERNEL=legacy (the default)")
                         : kernels::stripe_unsupported_reason(w.bits, w.K, w.N, group_size);
  if (d.stripes_reason.empty()) {
    for (int i = 0; i < 3; ++i) {
      const int m_frags = 1 << i;
      const int resident = prepare_stripe_linear(w.bits, m_frags);
      if (resident < 1) {
        d.stripes_reason = "stripes kernel: " + std::to_string(w.bits) + "-bit with " + std::to_string(m_frags) +
                           " m16 fragments per block does not fit one multiprocessor of this device (" +
                           std::to_string(kernels::stripe_smem_bytes(w.bits, m_frags)) + " bytes of shared memory)";
        break;
      }
      d.stripe_blocks_per_sm[i] = resident < kernels::kStripeBlocksPerSm ? resident : kernels::kStripeBlocksPerSm;
    }
  }
  // Uploads on the legacy default stream, ending with its synchronization (qgru/kernels/device_upload.h): run()
  // on a caller's stream, non-blocking or not, right after construction reads the finished weights.
  CudaUploader uploader(nullptr);
  if (!d.stripes_reason.empty()) {
    const std::vector<int32_t> permuted =
        order.identity ? std::vector<int32_t>() : kernels::permute_qweight_rows(w.qweight, w.K, w.N, w.bits, order.perm);
    d.device = kernels::upload_gptq_layer(order.identity ? w.qweight : permuted, w.qzeros, w.scales,
                                          d.act_order ? &order.perm : nullptr, uploader);
  } else {
    const kernels::StripeWeights s =
        kernels::repack_stripes(w.bits, w.K, w.N, group_size, w.zero_adjust, w.qweight, w.qzeros, w.scales, order);
    d.k_padded = s.k_padded;
    d.n_padded = s.n_padded;
    d.stripe_group_size = s.group_size;
    d.stripes = kernels::upload_stripe_layer(s, uploader);  // with the column counters, 0 before any launch
    if (setting == kernels::LinearKernelSetting::Auto) d.blas = std::make_unique<BlasHandle>(nullptr);
  }
  if (setting == kernels::LinearKernelSetting::Wgmma && d.stripes_reason.empty()) {
    d.wgmma_reason = wgmma_unavailable_reason();
    for (int i = 0; i < 2 && d.wgmma_reason.empty(); ++i) {
      const int rows = 64 << i;
      d.wgmma_blocks_per_sm[i] = prepare_stripe_wgmma(w.bits, rows);
      if (d.wgmma_blocks_per_sm[i] < 1) {
        d.wgmma_reason = "wgmma kernel: " + std::to_string(w.bits) + "-bit with row blocks of " + std::to_string(rows) +
                         " rows does not fit one multiprocessor of this device (" +
                         std::to_string(kernels::wgmma_smem_bytes(w.bits, rows)) + " bytes of shared memory)";
      }
    }
  }
  d.arrays = uploader.take();
  for (const kernels::EngineRow& row : kernels::kEngineTable) {
    kernels::EngineChoice choice = kernels::choose_engine(row.max_m, setting, d.stripes_reason);
    if (choice.engine == kernels::LinearEngine::Wgmma && !d.wgmma_reason.empty()) {
      choice = {kernels::LinearEngine::Stripes, d.wgmma_reason + "; the stripes kernel serves instead"};
    }
    d.choices.push_back(choice);
  }
}

QuantLinear::~QuantLinear() = default;
QuantLinear::QuantLinear(QuantLinear&&) noexcept = default;
QuantLinear& QuantLinear::operator=(QuantLinear&&) noexcept = default;

int64_t QuantLinear::K() const { return impl_->K; }
int64_t QuantLinear::N() const { return impl_->N; }
bool QuantLinear::act_order() const { return impl_->act_order; }
kernels::LinearKernelSetting QuantLinear::setting() const { return impl_->setting; }

kernels::EngineChoice QuantLinear::engine(int64_t M) const {
  return impl_->choice(M);
}

kernels::LinearPlan QuantLinear::plan(int64_t M) const {
  const Impl& d = *impl_;
  return kernels::plan_linear({M, d.N, d.K, d.bits, d.group_size}, d.sm_count, d.tuning);
}

kernels::StripePlan QuantLinear::stripe_plan(int64_t M) const {
  const Impl& d = *impl_;
  const int64_t rows = M < kernels::kStripeMaxRows ? M : kernels::kStripeMaxRows;
  const int m_frags = kernels::stripe_m_frags(rows);
  const int resident = d.stripe_blocks_per_sm[m_frags == 1 ? 0 : m_frags == 2 ? 1 : 2];
  const int per_sm = d.tuning.target_blocks_per_sm > 0 ? d.tuning.target_blocks_per_sm : resident > 0 ? resident : kernels::kStripeBlocksPerSm;
  return kernels::plan_stripes(rows, d.n_padded, d.k_padded, int64_t{per_sm} * d.sm_count);
}

kernels::StripePlan QuantLinear::wgmma_plan(int64_t M) const {
  const Impl& d = *impl_;
  const int64_t rows_m = M < kernels::kStripeMaxRows ? M : kernels::kStripeMaxRows;
  const int rows = d.tuning.wgmma_rows == 64 || d.tuning.wgmma_rows == 128 ? d.tuning.wgmma_rows : kernels::wgmma_rows(rows_m);
  const int resident = d.wgmma_blocks_per_sm[rows == 64 ? 0 : 1];
  const int per_sm = d.tuning.target_blocks_per_sm > 0 ? d.tuning.target_blocks_per_sm : resident > 0 ? resident : 1;
  return kernels::plan_wgmma(rows_m, rows, d.n_padded, d.k_padded, int64_t{per_sm} * d.sm_count);
}

void QuantLinear::set_tuning(const kernels::LinearTuning& tuning) { impl_->tuning = tuning; }

int64_t QuantLinear::workspace_bytes(int64_t M) const {
  const Impl& d = *impl_;
  if (M < 1) throw NotSupported("quant linear with M=" + std::to_string(M) + " rows");
  const kernels::EngineChoice& choice = d.choice(M);
  if (choice.engine == kernels::LinearEngine::Tiles) {
    const kernels::LinearPlan p = plan(M);
    if (!p.supported) throw NotSupported(p.reason);
    return p.workspace_bytes;
  }
  // [the gathered A, act-order only] [stripes: fp32 partials of one launch | dequant-gemm: fp16 W [K, N]]
  const int64_t gathered = d.act_order ? align_up(2 * M * d.K) : 0;
  if (choice.engine == kernels::LinearEngine::Stripes || choice.engine == kernels::LinearEngine::Wgmma) {
    const kernels::StripePlan sp = choice.engine == kernels::LinearEngine::Stripes ? stripe_plan(M) : wgmma_plan(M);
    const int64_t rows = M < kernels::kStripeMaxRows ? M : kernels::kStripeMaxRows;
    return gathered + align_up(4 * sp.max_segments * rows * d.n_padded);
  }
  return gathered + align_up(2 * d.K * d.N);
}

void QuantLinear::run(const void* a, int64_t M, void* c, void* workspace, void* stream) const {
  const Impl& d = *impl_;
  if (reinterpret_cast<uintptr_t>(a) % 16 != 0) {
    throw NotSupported("quant linear with an activation pointer that is not 16-byte aligned (M=" + std::to_string(M) + ")");
  }
  const int64_t need = workspace_bytes(M);
  if (need > 0 && workspace == nullptr) {
    throw Error("quant linear M=" + std::to_string(M) + " needs a workspace of " + std::to_string(need) + " bytes");
  }
  const kernels::EngineChoice& choice = d.choice(M);
  if (choice.engine == kernels::LinearEngine::Stripes || choice.engine == kernels::LinearEngine::Wgmma) {
    // The stripes kernel stores C two halves at a time (32-bit stores) and reads the gathered A in the workspace
    // with 16-byte copies: a misaligned address there is a launch failure that ends the CUDA context.
    if (reinterpret_cast<uintptr_t>(c) % 4 != 0) {
      throw NotSupported("quant linear (stripes) with an output pointer that is not 4-byte aligned (M=" + std::to_string(M) + ")");
    }
    if (need > 0 && reinterpret_cast<uintptr_t>(workspace) % 16 != 0) {
      throw NotSupported("quant linear (stripes) with a workspace that is not 16-byte aligned (M=" + std::to_string(M) + ")");
    }
  }
  if (choice.engine == kernels::LinearEngine::Tiles) {
    const kernels::LinearPlan p = plan(M);
    QuantLinearArgs args;
    args.a = static_cast<const uint16_t*>(a);
    args.a_perm = d.device.perm;
    args.qweight = d.device.qweight;
    args.qzeros = d.device.qzeros;
    args.scales = d.device.scales;
    args.c = static_cast<uint16_t*>(c);
    args.workspace = p.grid_z > 1 ? static_cast<float*>(workspace) : nullptr;
    args.M = M;
    args.N = d.N;
    args.K = d.K;
    args.group_size = d.group_size;
    args.zero_adjust = d.zero_adjust;
    args.k_tiles = p.k_tiles;
    args.k_tiles_per_split = p.k_tiles_per_split;
    if (args.workspace != nullptr) {
      QGRU_CUDA_CHECK(cudaMemsetAsync(workspace, 0, static_cast<size_t>(p.workspace_bytes), static_cast<cudaStream_t>(stream)));
    }
    launch_quant_linear(args, p, stream);
    return;
  }
  auto* base = static_cast<unsigned char*>(workspace);
  const auto* a_in = static_cast<const uint16_t*>(a);
  if (d.act_order) {  // A'[m, k'] = A[m, perm[k']], once per call
    auto* gathered = reinterpret_cast<uint16_t*>(base);
    launch_gather_columns(a_in, d.stripes.perm, gathered, M, d.K, stream);
    a_in = gathered;
    base += align_up(2 * M * d.K);
  }
  StripeLinearArgs args;
  args.words = d.stripes.words;
  args.params = d.stripes.params;
  args.counters = d.stripes.counters;
  args.N = d.N;
  args.K = d.K;
  args.n_padded = d.n_padded;
  args.group_size = d.stripe_group_size;
  if (choice.engine == kernels::LinearEngine::Stripes || choice.engine == kernels::LinearEngine::Wgmma) {
    // One partition for every launch of the call; launches of up to kStripeMaxRows rows, in stream order, share the
    // column counters.
    const bool wgmma = choice.engine == kernels::LinearEngine::Wgmma;
    const kernels::StripePlan sp = wgmma ? wgmma_plan(M) : stripe_plan(M);
    args.n_tiles = sp.n_tiles;
    args.k_tiles = sp.k_tiles;
    args.tiles = sp.tiles;
    args.tiles_per_block = sp.tiles_per_block;
    args.workspace = reinterpret_cast<float*>(base);
    for (int64_t m0 = 0; m0 < M; m0 += kernels::kStripeMaxRows) {
      args.M = M - m0 < kernels::kStripeMaxRows ? M - m0 : kernels::kStripeMaxRows;
      args.a = a_in + m0 * d.K;
      args.c = static_cast<uint16_t*>(c) + m0 * d.N;
      if (wgmma) {
        launch_stripe_wgmma(args, d.bits, kernels::kStripeTileM * sp.m_frags, sp.blocks, stream);
      } else {
        launch_stripe_linear(args, d.bits, sp.blocks, stream);
      }
    }
    return;
  }
  // DequantGemm: W fp16 [K, N] row-major is column-major Wᵀ [N, K]; C[M, N] row-major = column-major
  // Cᵀ[N, M] = Wᵀ[N, K] · Aᵀ[K, M] (fp32 compute, rounded once to fp16).
  auto* w16 = reinterpret_cast<uint16_t*>(base);
  const kernels::StripePlan sp = kernels::plan_stripes(1, d.n_padded, d.k_padded, 1);
  args.k_tiles = sp.k_tiles;
  args.tiles = sp.tiles;
  launch_stripe_dequant(args, d.bits, w16, stream);
  d.blas->bind(static_cast<cudaStream_t>(stream));
  const float alpha = 1.0f, beta = 0.0f;
  QGRU_CUBLAS_CHECK(blas::cublasGemmEx(d.blas->get(), CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(d.N),
                                       static_cast<int>(M), static_cast<int>(d.K), &alpha, w16, CUDA_R_16F,
                                       static_cast<int>(d.N), a_in, CUDA_R_16F, static_cast<int>(d.K), &beta, c,
                                       CUDA_R_16F, static_cast<int>(d.N), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

std::vector<uint16_t> QuantLinear::run_host(const std::vector<uint16_t>& a, int64_t M) const {
  const Impl& d = *impl_;
  if (static_cast<int64_t>(a.size()) != M * d.K) {
    throw Error("quant linear input has " + std::to_string(a.size()) + " values, expected M*K = " + std::to_string(M * d.K));
  }
  const DeviceBuffer a_dev = DeviceBuffer::from(a);
  DeviceBuffer c_dev(static_cast<size_t>(M * d.N) * sizeof(uint16_t));
  DeviceBuffer workspace(static_cast<size_t>(workspace_bytes(M)));
  run(a_dev.data(), M, c_dev.data(), workspace.data(), nullptr);
  QGRU_CUDA_CHECK(cudaGetLastError());
  QGRU_CUDA_CHECK(cudaDeviceSynchronize());
  return c_dev.to_vector<uint16_t>(static_cast<size_t>(M * d.N));
}

}  // namespace qgru::cuda
