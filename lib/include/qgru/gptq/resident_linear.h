#pragma once
// One GPTQ checkpoint layer kept ready for many calls y = x · Ŵᵀ + b (the Python package's qgru.QuantLinear):
// the checkpoint is read once, by the caller (read_checkpoint_layer, checkpoint_layer), and handed over.
//   cpu:  the decoded layer is held; each call is layer_linear_f32 + add_linear_bias, exactly what `qgru linear
//         --device cpu` and qgru.gptq_linear compute from the file (float32, byte for byte the same).
//   cuda: the layer is repacked and uploaded once into the resident layer the C API's
//         qgruSetQuantizeGPTQWeights keeps on a descriptor (a qgru::cuda::QuantLinear, its engine chosen by
//         QGRU_CUDA_LINEAR_KERNEL at load); each call copies x up as fp16, runs and copies y down as fp16
//         values (synchronous), then adds the bias in float32, as `qgru linear --device cuda` does.
// Part of the GPTQ C API's target (qgru_capi, lib/src/gptq/capi/), the one that links the CUDA linear when qgru
// is built with CUDA; a program built without CUDA gets the refusal below.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "qgru/gptq/layer_linear.h"

namespace qgru::capi {
struct CudaResidentLinear;  // lib/src/gptq/capi/qgru_gptq_cuda.cpp
}  // namespace qgru::capi

namespace qgru::gptq {

enum class LinearDevice { kCpu, kCuda };

class ResidentLinear {
 public:
  // `name` names the layer in errors ("q.safetensors: layer 'fc'"). On cuda, refused with a qgru::Error
  // "NAME: device cuda: REASON" when qgru was built without CUDA, no GPU device_id is usable, or no GPU kernel
  // serves the layer (2 and 3 bits; the shape rules of docs/CUDA.md).
  ResidentLinear(CheckpointLayer layer, LinearDevice device, int device_id, std::string name);
  ~ResidentLinear();
  ResidentLinear(const ResidentLinear&) = delete;
  ResidentLinear& operator=(const ResidentLinear&) = delete;

  const CheckpointLayer& checkpoint() const { return layer_; }
  LinearDevice device() const { return device_; }
  int device_id() const { return device_id_; }

  // y [M, N] row-major for x [M, K] row-major (x.size() == M·K, else a qgru::Error), the bias added unless it
  // was left out of `layer`. Calls may come from several threads; CUDA calls on one layer run one at a time.
  std::vector<float> run(const std::vector<float>& x, int64_t M) const;

  // cuda only (a qgru::Error on cpu): the product for operands already in device_id's memory (a framework's
  // tensors): y fp16 [M, N] = x fp16 [M, K] · Ŵᵀ, row-major, x 16-byte aligned, `workspace` at least
  // device_workspace_bytes(M) bytes (may be 0 when that is 0), queued on `stream` (a cudaStream_t as an integer;
  // 0: the legacy default stream) without waiting and without a host copy. Each call is ordered on the GPU after
  // the previous one of this layer, whatever its stream. The bias is not added: the caller adds it in float32 to
  // the fp16 values, as run does, and gets run's values bit for bit.
  void run_device(uintptr_t x, int64_t M, uintptr_t y, uintptr_t workspace, uintptr_t stream) const;
  int64_t device_workspace_bytes(int64_t M) const;

 private:
  void require_cuda_for_device_operands() const;  // qgru::Error naming the layer on cpu

  CheckpointLayer layer_;
  LinearDevice device_;
  int device_id_;
  std::string name_;
  std::shared_ptr<capi::CudaResidentLinear> cuda_;
  mutable std::mutex cuda_calls_;
};

}  // namespace qgru::gptq
