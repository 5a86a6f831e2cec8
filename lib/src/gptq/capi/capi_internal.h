#pragma once
// Internal to lib/src/gptq/capi: the objects behind the C API's handles, and the CUDA device's entry points
// (qgru_gptq_cuda.cpp, compiled only when qgru is built with CUDA: QGRU_CAPI_WITH_CUDA). Plain C++, no
// CUDA headers, so qgru_gptq.cpp stays the same in both builds.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/gptq.h"
#include "qgru/qgru_gptq.h"

struct qgruHandle {
  qgruDevice_t device;
  int device_id;
};

struct qgruTensorDescriptor {
  qgruDtype_t dtype;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
};

namespace qgru::capi {
struct CudaResidentLinear;  // qgru_gptq_cuda.cpp: the layer resident on the GPU
}  // namespace qgru::capi

struct qgruQuantizeGPTQDescriptor {
  qgruDevice_t device;
  int device_id;
  qgruDtype_t dtype;  // of a, b, c, b_scale, zero
  int64_t N, K, M, G;
  int64_t stride_a, stride_c, stride_packed, stride_scale, stride_zero;  // row strides (elements)
  bool act_order = false;  // qgruQuantizeGPTQ options (qgruSetQuantizeGPTQ*)
  double damp = 0.01;
  // Device-resident weights (qgruSetQuantizeGPTQWeights; CUDA only) and the pointers they were read from.
  std::shared_ptr<qgru::capi::CudaResidentLinear> resident = nullptr;
  const void* resident_packed = nullptr;
  const void* resident_scale = nullptr;
  const void* resident_zero = nullptr;
};

namespace qgru::capi {

// A status and its message ("" on success); the caller records it as the thread's last error.
struct Outcome {
  qgruStatus_t status = QGRU_STATUS_SUCCESS;
  std::string message;
  bool ok() const { return status == QGRU_STATUS_SUCCESS; }
};

// A zero point the 4-bit qzeros of the GPU kernels cannot hold (BAD_PARAM, not a device failure).
class BadZeroPoint : public qgru::Error {
 public:
  using Error::Error;
};

// The C API's weights in the checkpoint layout of qgru/kernels/gptq_layout.h that the GPU kernels read:
// qweight int32 [K/8, N] (the C API's [N, K/8] words, transposed: both hold 8 codes along K, lowest first),
// qzeros int32 [G, N/8] holding the zero itself (gptq_v2, zero_adjust 0), scales fp16 bits [G, N].
struct CheckpointLayer {
  std::vector<int32_t> qweight, qzeros;
  std::vector<uint16_t> scales;
};

// Host data, rows without padding: packed [N, K/8], scale and zero [N, G] in `dtype` (F16 or F32; F32
// scales are rounded to fp16). N a multiple of 8. Throws BadZeroPoint naming the first zero point that
// is not an integer in [0, 15]. Plain C++ (tested on the CPU); the CUDA linear is its only user.
CheckpointLayer capi_to_checkpoint(qgruDtype_t dtype, int64_t N, int64_t K, int64_t G, const int32_t* packed,
                                   const void* scale, const void* zero);

// qgruQuantizeGPTQ's options from the descriptor (4 bits, group K / G or per row, damp, act-order with static
// groups), the same for both devices.
gptq::GptqOptions capi_gptq_options(const qgruQuantizeGPTQDescriptor& d);
// Writes GPTQ's result as qgruQuantizeGPTQ's outputs into host memory with the given row strides (elements):
// packed [N, K/8] (8 four-bit codes along K per word, lowest first), scale and zero [N, G] in d.dtype. Throws
// qgru::Error if a column's group is not k / group_size (the [N, G] layout has no g_idx).
void capi_write_gptq_result(const qgruQuantizeGPTQDescriptor& d, const gptq::GptqResult& result, void* packed,
                            int64_t stride_packed, void* scale, int64_t stride_scale, void* zero, int64_t stride_zero);

#ifdef QGRU_CAPI_WITH_CUDA
// qgruQuantizeGPTQ on the GPU (qgru_cuda/gptq_device.h): a and b are read from the device (through the host:
// b as GPTQ's float64 W, a uploaded again in chunks to the device Hessian), GPTQ runs on the device on
// `stream`, the outputs are written to the device pointers; returns after synchronizing `stream`. Statuses as
// cuda_linear; GPTQ's own failures (H not positive definite) propagate as qgru::Error.
Outcome cuda_quantize(const qgruQuantizeGPTQDescriptor& d, void* packed_weights, void* b_scale, void* zero,
                      const void* a, const void* b, void* stream);

// Number of usable CUDA devices (SUCCESS), or DEVICE_UNAVAILABLE with the runtime's reason.
Outcome cuda_device_count(int* count);

// Whether a GPU kernel exists for the descriptor's shape (NOT_SUPPORTED naming M, N, K, bits and group
// size otherwise), then whether device_id is usable (DEVICE_UNAVAILABLE). The first needs no device.
Outcome cuda_check_descriptor(const qgruQuantizeGPTQDescriptor& d);

// Device workspace bytes of the CUDA linear: fp16 a [M, K] and c [M, N] staging and the split-K fp32
// partial sums [M, N], each 256-byte aligned, plus 256 bytes to align the caller's pointer; with resident
// weights, at least what the resident layer's engine needs besides the staging.
size_t cuda_linear_workspace_bytes(const qgruQuantizeGPTQDescriptor& d);

// qgruSetQuantizeGPTQWeights: reads the weights once (device pointers, synchronizing `stream`), repacks and
// uploads them as a resident layer on the descriptor. Statuses as cuda_linear.
Outcome cuda_set_weights(qgruQuantizeGPTQDescriptor& d, const void* packed_weights, const void* b_scale,
                         const void* zero, void* stream);

// qgruQuantizeLinearGPTQ with resident weights: a's and c's layout changes and the layer's kernels enqueued on
// `stream`; no host copy, no synchronization.
Outcome cuda_linear_resident(const qgruQuantizeGPTQDescriptor& d, void* workspace, void* c, const void* a, void* stream);

// qgruQuantizeLinearGPTQ on the GPU (every pointer device memory, stream a cudaStream_t; returns after
// synchronizing the stream). NoDevice, NotSupported and CUDA failures come back as DEVICE_UNAVAILABLE,
// NOT_SUPPORTED and EXECUTION_FAILED, BadZeroPoint as BAD_PARAM; other exceptions propagate.
Outcome cuda_linear(const qgruQuantizeGPTQDescriptor& d, void* workspace, void* c, const void* a,
                    const void* packed_weights, const void* b_scale, const void* zero, void* stream);

// The Python package's resident layer (qgru/gptq/resident_linear.h): a checkpoint layer (decoded, and its codes
// packed as qweight [K·bits/32, N]) converted as `qgru linear --device cuda` converts it
// (cuda::checkpoint_linear_weights) and uploaded on device_id into the resident layer qgruSetQuantizeGPTQWeights
// makes. Statuses as cuda_linear; the layer's own shape and width checks propagate as qgru::Error.
Outcome cuda_resident_checkpoint(const gptq::QuantizedLayer& layer, const std::vector<int32_t>& qweight, int device_id,
                                 std::shared_ptr<CudaResidentLinear>& resident);
// y [M, N] for host x [M, K] through the resident layer on device_id (cuda::run_host_floats: x up as fp16, y down
// as fp16 values; synchronous). Statuses as cuda_linear.
Outcome cuda_resident_run_host(const CudaResidentLinear& resident, int device_id, const std::vector<float>& x, int64_t M,
                               std::vector<float>& y);
// The device workspace cuda_resident_run_device needs for M rows (0 when none).
Outcome cuda_resident_workspace_bytes(const CudaResidentLinear& resident, int device_id, int64_t M, int64_t* bytes);
// y fp16 [M, N] = x fp16 [M, K] · Ŵᵀ, row-major, every pointer device memory of device_id (x 16-byte aligned,
// workspace >= cuda_resident_workspace_bytes), queued on `stream` (a cudaStream_t; null: the legacy default
// stream) after the layer's previous call of this function, whatever stream it came on; no host copy, no wait.
// One call at a time per layer on the host (the caller's lock). Statuses as cuda_linear.
Outcome cuda_resident_run_device(CudaResidentLinear& resident, int device_id, const void* x, int64_t M, void* y,
                                 void* workspace, void* stream);
#endif

}  // namespace qgru::capi
