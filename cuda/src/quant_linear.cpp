// QuantLinear: validation, act-order preparation and upload of a GPTQ layer; planning and launching.
#include "qgru_cuda/quant_linear.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "qgru/kernels/device_upload.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "cuda_uploader.h"
#include "quant_linear_launch.h"

namespace qgru::cuda {

struct QuantLinear::Impl {
  int64_t K = 0, N = 0, group_size = 0;
  int bits = 4, zero_adjust = 0, sm_count = 0;
  kernels::LinearTuning tuning;  // the plan's defaults unless set_tuning
  bool act_order = false;
  std::vector<DeviceBuffer> arrays;  // the uploads below live here
  kernels::GptqLayerUpload device;   // qweight, qzeros, scales, perm (null without act-order) on the device
};

namespace {

void expect_size(const char* tensor, size_t got, int64_t want, const std::string& shape) {
  if (static_cast<int64_t>(got) != want) {
    throw Error("GPTQ layer: " + std::string(tensor) + " has " + std::to_string(got) + " elements, expected " + shape +
                " = " + std::to_string(want));
  }
}

}  // namespace

QuantLinear::QuantLinear(const GptqLinearWeights& w) : impl_(std::make_unique<Impl>()) {
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
  // Uploads on the legacy default stream, ending with its synchronization (qgru/kernels/device_upload.h): run()
  // on a caller's stream, non-blocking or not, right after construction reads the finished weights.
  CudaUploader uploader(nullptr);
  const std::vector<int32_t> permuted =
      order.identity ? std::vector<int32_t>() : kernels::permute_qweight_rows(w.qweight, w.K, w.N, w.bits, order.perm);
  d.device = kernels::upload_gptq_layer(order.identity ? w.qweight : permuted, w.qzeros, w.scales,
                                        d.act_order ? &order.perm : nullptr, uploader);
  d.arrays = uploader.take();
}

QuantLinear::~QuantLinear() = default;
QuantLinear::QuantLinear(QuantLinear&&) noexcept = default;
QuantLinear& QuantLinear::operator=(QuantLinear&&) noexcept = default;

int64_t QuantLinear::K() const { return impl_->K; }
int64_t QuantLinear::N() const { return impl_->N; }
bool QuantLinear::act_order() const { return impl_->act_order; }

kernels::LinearPlan QuantLinear::plan(int64_t M) const {
  const Impl& d = *impl_;
  return kernels::plan_linear({M, d.N, d.K, d.bits, d.group_size}, d.sm_count, d.tuning);
}

void QuantLinear::set_tuning(const kernels::LinearTuning& tuning) { impl_->tuning = tuning; }

int64_t QuantLinear::workspace_bytes(int64_t M) const {
  const kernels::LinearPlan p = plan(M);
  if (!p.supported) throw NotSupported(p.reason);
  return p.workspace_bytes;
}

void QuantLinear::run(const void* a, int64_t M, void* c, void* workspace, void* stream) const {
  const Impl& d = *impl_;
  const kernels::LinearPlan p = plan(M);
  if (!p.supported) throw NotSupported(p.reason);
  if (reinterpret_cast<uintptr_t>(a) % 16 != 0) {
    throw NotSupported("quant linear with an activation pointer that is not 16-byte aligned (M=" + std::to_string(M) + ")");
  }
  if (p.workspace_bytes > 0 && workspace == nullptr) {
    throw Error("quant linear M=" + std::to_string(M) + " needs a workspace of " + std::to_string(p.workspace_bytes) + " bytes");
  }
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
