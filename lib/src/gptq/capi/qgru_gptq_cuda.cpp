// The C API's CUDA device: qgruQuantizeLinearGPTQ through qgru::cuda::QuantLinear (W4A16, docs/CUDA.md).
// Compiled to code only when qgru is built with CUDA (QGRU_CAPI_WITH_CUDA, set by lib/CMakeLists.txt).
//
// The C API's layouts are not the kernel's: a [K, M] and c [N, M] are the transposes of the kernel's A [M, K]
// and C [M, N]; packed_weights [N, K/8] holds the same words as the checkpoint's qweight [K/8, N] (8 codes
// along K per word, lowest first), transposed; b_scale / zero [N, G] in dT become scales fp16 [G, N] and
// qzeros int32 [G, N/8] (gptq_v2: the zero itself, zero_adjust 0).
// Two paths. Resident (after qgruSetQuantizeGPTQWeights): the weights were read, repacked and uploaded once
// into a QuantLinear kept on the descriptor; a call transposes a into fp16 [M, K] and C back into c on the
// GPU (skipped for M = 1 with contiguous fp16 operands) and enqueues the layer's kernels on the caller's
// stream: no host copy, no synchronization. Per call (otherwise): the operands go to the host, are re-laid
// out there, the QuantLinear is built (upload), a and c are staged through the workspace and the call
// synchronizes the stream.
#ifdef QGRU_CAPI_WITH_CUDA

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "capi_internal.h"
#include "qgru/base/error.h"
#include "qgru/kernels/linear_plan.h"
#include "qgru/half.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/gptq_checkpoint_linear.h"
#include "qgru_cuda/gptq_device.h"
#include "qgru_cuda/layout_convert.h"
#include "qgru_cuda/quant_linear.h"
#include "qgru_cuda/status.h"

namespace qgru::capi {

namespace {

constexpr size_t kDeviceAlign = 256;
constexpr int kBits = 4;  // the C API's packed_weights hold 4-bit codes

size_t align_up(size_t bytes) { return (bytes + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign; }

kernels::LinearProblem problem_of(const qgruQuantizeGPTQDescriptor& d) {
  return {d.M, d.N, d.K, kBits, d.K / d.G};
}

size_t element_bytes(qgruDtype_t dtype) { return dtype == QGRU_DTYPE_F16 ? 2 : 4; }

uint16_t load_half(qgruDtype_t dtype, const std::vector<unsigned char>& bytes, size_t index) {
  if (dtype == QGRU_DTYPE_F16) {
    uint16_t bits = 0;
    std::memcpy(&bits, bytes.data() + 2 * index, 2);
    return bits;
  }
  float value = 0.0f;
  std::memcpy(&value, bytes.data() + 4 * index, 4);
  return qgru::float_to_half_bits(value);
}

// A rows × cols tensor with row stride `stride` (elements) on the device, copied into a packed host buffer.
std::vector<unsigned char> download_rows(const void* device, int64_t rows, int64_t cols, int64_t stride, size_t esize,
                                         cudaStream_t stream) {
  std::vector<unsigned char> host(static_cast<size_t>(rows * cols) * esize);
  const size_t row_bytes = static_cast<size_t>(cols) * esize;
  cuda::count_host_transfer();
  QGRU_CUDA_CHECK(cudaMemcpy2DAsync(host.data(), row_bytes, device, static_cast<size_t>(stride) * esize, row_bytes,
                                    static_cast<size_t>(rows), cudaMemcpyDeviceToHost, stream));
  return host;
}

// A packed host buffer of rows × cols elements copied into the device tensor with row stride `stride` (elements).
void upload_rows(void* device, const std::vector<unsigned char>& host, int64_t rows, int64_t cols, int64_t stride,
                 size_t esize, cudaStream_t stream) {
  const size_t row_bytes = static_cast<size_t>(cols) * esize;
  cuda::count_host_transfer();
  QGRU_CUDA_CHECK(cudaMemcpy2DAsync(device, static_cast<size_t>(stride) * esize, host.data(), row_bytes, row_bytes,
                                    static_cast<size_t>(rows), cudaMemcpyHostToDevice, stream));
}

float load_float(qgruDtype_t dtype, const std::vector<unsigned char>& bytes, size_t index) {
  if (dtype == QGRU_DTYPE_F32) {
    float value = 0.0f;
    std::memcpy(&value, bytes.data() + 4 * index, 4);
    return value;
  }
  return qgru::half_bits_to_float(load_half(dtype, bytes, index));
}

// Makes device_id current for the call and gives the caller's current device back afterwards.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device_id) {
    QGRU_CUDA_CHECK(cudaGetDevice(&previous_));
    if (previous_ != device_id) QGRU_CUDA_CHECK(cudaSetDevice(device_id));
  }
  void restore() {
    QGRU_CUDA_CHECK(cudaSetDevice(previous_));
    restored_ = true;
  }
  ~CurrentDevice() {
    // Only on an exception path (restore() is called on success); a destructor must not throw, and the
    // exception already in flight is the failure to report.
    if (!restored_) static_cast<void>(cudaSetDevice(previous_));
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = 0;
  bool restored_ = false;
};

Outcome check_device(int device_id) {
  const cuda::DeviceProbe probe = cuda::probe_devices();
  if (probe.device_count == 0) return {QGRU_STATUS_DEVICE_UNAVAILABLE, "no CUDA device: " + probe.reason};
  // A usable device also needs cuBLAS (loaded at its first use: qgru_cuda/cublas_library.h).
  const std::string cublas = cuda::cublas_unusable_reason();
  if (!cublas.empty()) return {QGRU_STATUS_DEVICE_UNAVAILABLE, "no usable CUDA device: " + cublas};
  if (device_id >= probe.device_count) {
    return {QGRU_STATUS_DEVICE_UNAVAILABLE, "no CUDA device " + std::to_string(device_id) + ": the CUDA runtime sees " +
                                                std::to_string(probe.device_count) + " device(s)"};
  }
  return {};
}

// The checkpoint layer (gptq_v2 zeros) the kernels read, from the C API's host copies of the weights.
cuda::GptqLinearWeights checkpoint_weights(const qgruQuantizeGPTQDescriptor& d, const std::vector<unsigned char>& packed_host,
                                           const std::vector<unsigned char>& scale_host,
                                           const std::vector<unsigned char>& zero_host) {
  std::vector<int32_t> packed_words(packed_host.size() / 4);
  std::memcpy(packed_words.data(), packed_host.data(), packed_host.size());
  CheckpointLayer layer_data = capi_to_checkpoint(d.dtype, d.N, d.K, d.G, packed_words.data(), scale_host.data(), zero_host.data());
  cuda::GptqLinearWeights w;
  w.K = d.K;
  w.N = d.N;
  w.bits = kBits;
  w.group_size = d.K / d.G;
  w.zero_adjust = 0;
  w.qweight = std::move(layer_data.qweight);
  w.qzeros = std::move(layer_data.qzeros);
  w.scales = std::move(layer_data.scales);
  return w;
}

void run_linear(const qgruQuantizeGPTQDescriptor& d, void* workspace, void* c, const void* a, const void* packed_weights,
                const void* b_scale, const void* zero, void* stream_handle) {
  CurrentDevice current(d.device_id);
  const auto stream = static_cast<cudaStream_t>(stream_handle);
  const int64_t N = d.N, K = d.K, M = d.M, G = d.G, words = K / 8;
  const size_t esize = element_bytes(d.dtype);

  // Operands to the host, in the C API's layout without row padding.
  const std::vector<unsigned char> packed_host = download_rows(packed_weights, N, words, d.stride_packed, 4, stream);
  const std::vector<unsigned char> scale_host = download_rows(b_scale, N, G, d.stride_scale, esize, stream);
  const std::vector<unsigned char> zero_host = download_rows(zero, N, G, d.stride_zero, esize, stream);
  const std::vector<unsigned char> a_host = download_rows(a, K, M, d.stride_a, esize, stream);
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));

  const cuda::GptqLinearWeights w = checkpoint_weights(d, packed_host, scale_host, zero_host);
  std::vector<uint16_t> a_half(static_cast<size_t>(M * K));  // A [M, K] = aᵀ
  for (int64_t k = 0; k < K; ++k)
    for (int64_t m = 0; m < M; ++m) a_half[static_cast<size_t>(m * K + k)] = load_half(d.dtype, a_host, static_cast<size_t>(k * M + m));

  // validates and uploads (cudaMemcpy on the legacy default stream); the tile kernel, whose split-K workspace
  // cuda_linear_workspace_bytes counts
  const cuda::QuantLinear layer(w, kernels::LinearKernelSetting::Legacy);
  // The uploads must be complete before `stream` (possibly non-blocking) reads them.
  QGRU_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));

  // Workspace: A fp16 [M, K] | C fp16 [M, N] | split-K fp32 [M, N], each 256-byte aligned.
  const uintptr_t base = (reinterpret_cast<uintptr_t>(workspace) + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign;
  void* a_dev = reinterpret_cast<void*>(base);
  void* c_dev = reinterpret_cast<void*>(base + align_up(2 * static_cast<size_t>(M * K)));
  void* split_dev = reinterpret_cast<void*>(base + align_up(2 * static_cast<size_t>(M * K)) + align_up(2 * static_cast<size_t>(M * N)));
  cuda::count_host_transfer();
  QGRU_CUDA_CHECK(cudaMemcpyAsync(a_dev, a_half.data(), a_half.size() * 2, cudaMemcpyHostToDevice, stream));
  layer.run(a_dev, M, c_dev, split_dev, stream);
  std::vector<uint16_t> c_half(static_cast<size_t>(M * N));
  cuda::count_host_transfer();
  QGRU_CUDA_CHECK(cudaMemcpyAsync(c_half.data(), c_dev, c_half.size() * 2, cudaMemcpyDeviceToHost, stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));

  // c [N, M] = Cᵀ in dT, written row by row (padding between rows untouched).
  std::vector<unsigned char> c_host(static_cast<size_t>(N * M) * esize);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t m = 0; m < M; ++m) {
      const uint16_t bits = c_half[static_cast<size_t>(m * N + n)];
      unsigned char* out = c_host.data() + static_cast<size_t>(n * M + m) * esize;
      if (d.dtype == QGRU_DTYPE_F16) {
        std::memcpy(out, &bits, 2);
      } else {
        const float value = qgru::half_bits_to_float(bits);
        std::memcpy(out, &value, 4);
      }
    }
  }
  const size_t row_bytes = static_cast<size_t>(M) * esize;
  cuda::count_host_transfer();
  QGRU_CUDA_CHECK(cudaMemcpy2DAsync(c, static_cast<size_t>(d.stride_c) * esize, c_host.data(), row_bytes, row_bytes,
                                    static_cast<size_t>(N), cudaMemcpyHostToDevice, stream));
  QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
  current.restore();
}

// Staging of the resident path: A fp16 [M, K] | C fp16 [M, N] | the layer's own workspace, 256-byte aligned.
size_t staging_bytes(const qgruQuantizeGPTQDescriptor& d) {
  const auto M = static_cast<size_t>(d.M), N = static_cast<size_t>(d.N), K = static_cast<size_t>(d.K);
  return kDeviceAlign + align_up(2 * M * K) + align_up(2 * M * N);
}

}  // namespace

struct CudaResidentLinear {
  explicit CudaResidentLinear(const cuda::GptqLinearWeights& w) : layer(w) {}
  ~CudaResidentLinear() {
    if (previous_call != nullptr) static_cast<void>(cudaEventDestroy(previous_call));
  }
  CudaResidentLinear(const CudaResidentLinear&) = delete;
  CudaResidentLinear& operator=(const CudaResidentLinear&) = delete;
  cuda::QuantLinear layer;  // the engine QGRU_CUDA_LINEAR_KERNEL chose at load (qgru/kernels/linear_plan.h)
  // Recorded after each call of cuda_resident_run_device, on the caller's stream; the next such call, on whatever
  // stream, waits for it on the GPU, and a host-operand call (cuda_resident_run_host) on the host (the layer's
  // launches must not overlap). Guarded by the caller's lock.
  cudaEvent_t previous_call = nullptr;
};

Outcome cuda_device_count(int* count) {
  const cuda::DeviceProbe probe = cuda::probe_devices();
  *count = probe.device_count;
  if (probe.device_count == 0) return {QGRU_STATUS_DEVICE_UNAVAILABLE, "no CUDA device: " + probe.reason};
  return {};
}

Outcome cuda_check_descriptor(const qgruQuantizeGPTQDescriptor& d) {
  // The shape rules do not depend on the device (the multiprocessor count only sets split-K).
  const kernels::LinearPlan plan = kernels::plan_linear(problem_of(d), 1);
  if (!plan.supported) return {QGRU_STATUS_NOT_SUPPORTED, plan.reason};
  return check_device(d.device_id);
}

size_t cuda_linear_workspace_bytes(const qgruQuantizeGPTQDescriptor& d) {
  const auto M = static_cast<size_t>(d.M), N = static_cast<size_t>(d.N), K = static_cast<size_t>(d.K);
  // The split-K partial sums are counted whatever the split: the plan's split depends on the device.
  const size_t per_call = kDeviceAlign + align_up(2 * M * K) + align_up(2 * M * N) + align_up(4 * M * N);
  if (!d.resident) return per_call;
  const size_t resident = staging_bytes(d) + align_up(static_cast<size_t>(d.resident->layer.workspace_bytes(d.M)));
  return resident > per_call ? resident : per_call;
}

namespace {

// Maps the CUDA exceptions to statuses (the C API's contract), running `body` with device_id current.
template <typename Body>
Outcome on_device(int device_id, Body&& body) {
  const Outcome device = check_device(device_id);
  if (!device.ok()) return device;
  try {
    CurrentDevice current(device_id);
    body();
    current.restore();
    return {};
  } catch (const cuda::NoDevice& e) {
    return {QGRU_STATUS_DEVICE_UNAVAILABLE, e.what()};
  } catch (const cuda::NotSupported& e) {
    return {QGRU_STATUS_NOT_SUPPORTED, e.what()};
  } catch (const cuda::CudaFailure& e) {
    return {QGRU_STATUS_EXECUTION_FAILED, e.what()};
  } catch (const BadZeroPoint& e) {
    return {QGRU_STATUS_BAD_PARAM, e.what()};
  }
}

}  // namespace

Outcome cuda_set_weights(qgruQuantizeGPTQDescriptor& d, const void* packed_weights, const void* b_scale,
                         const void* zero, void* stream_handle) {
  return on_device(d.device_id, [&] {
    const auto stream = static_cast<cudaStream_t>(stream_handle);
    const size_t esize = element_bytes(d.dtype);
    const std::vector<unsigned char> packed_host = download_rows(packed_weights, d.N, d.K / 8, d.stride_packed, 4, stream);
    const std::vector<unsigned char> scale_host = download_rows(b_scale, d.N, d.G, d.stride_scale, esize, stream);
    const std::vector<unsigned char> zero_host = download_rows(zero, d.N, d.G, d.stride_zero, esize, stream);
    QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
    // Repacks and uploads; the uploads end with a synchronization, so any stream reads the finished weights.
    d.resident = std::make_shared<CudaResidentLinear>(checkpoint_weights(d, packed_host, scale_host, zero_host));
    d.resident_packed = packed_weights;
    d.resident_scale = b_scale;
    d.resident_zero = zero;
  });
}

Outcome cuda_linear_resident(const qgruQuantizeGPTQDescriptor& d, void* workspace, void* c, const void* a,
                             void* stream) {
  return on_device(d.device_id, [&] {
    const bool f32 = d.dtype == QGRU_DTYPE_F32;
    const int64_t M = d.M, N = d.N, K = d.K;
    const uintptr_t base = (reinterpret_cast<uintptr_t>(workspace) + kDeviceAlign - 1) / kDeviceAlign * kDeviceAlign;
    void* a_stage = reinterpret_cast<void*>(base);
    void* c_stage = reinterpret_cast<void*>(base + align_up(2 * static_cast<size_t>(M * K)));
    void* layer_workspace = reinterpret_cast<void*>(base + align_up(2 * static_cast<size_t>(M * K)) +
                                                    align_up(2 * static_cast<size_t>(M * N)));
    // One row of contiguous fp16 needs no transpose: a [K, 1] is A [1, K], c [N, 1] is C [1, N].
    const bool a_direct = M == 1 && !f32 && d.stride_a == 1 && reinterpret_cast<uintptr_t>(a) % 16 == 0;
    const bool c_direct = M == 1 && !f32 && d.stride_c == 1 && reinterpret_cast<uintptr_t>(c) % 4 == 0;
    const void* a_rows = a;
    if (!a_direct) {
      cuda::transpose_convert(a, f32, d.stride_a, a_stage, false, K, K, M, stream);  // a [K, M] -> A [M, K] fp16
      a_rows = a_stage;
    }
    void* c_rows = c_direct ? c : c_stage;
    d.resident->layer.run(a_rows, M, c_rows, layer_workspace, stream);
    if (!c_direct) cuda::transpose_convert(c_stage, false, N, c, f32, d.stride_c, M, N, stream);  // C [M, N] -> c [N, M]
  });
}

Outcome cuda_resident_checkpoint(const gptq::QuantizedLayer& layer, const std::vector<int32_t>& qweight, int device_id,
                                 std::shared_ptr<CudaResidentLinear>& resident) {
  return on_device(device_id, [&] {
    resident = std::make_shared<CudaResidentLinear>(cuda::checkpoint_linear_weights(layer, qweight));
  });
}

Outcome cuda_resident_run_host(const CudaResidentLinear& resident, int device_id, const std::vector<float>& x, int64_t M,
                               std::vector<float>& y) {
  return on_device(device_id, [&] {
    // A device-operand call still running on another stream must end first (the layer's column counters).
    if (resident.previous_call != nullptr) QGRU_CUDA_CHECK(cudaEventSynchronize(resident.previous_call));
    y = cuda::run_host_floats(resident.layer, x, M);
  });
}

Outcome cuda_resident_workspace_bytes(const CudaResidentLinear& resident, int device_id, int64_t M, int64_t* bytes) {
  return on_device(device_id, [&] { *bytes = resident.layer.workspace_bytes(M); });
}

Outcome cuda_resident_run_device(CudaResidentLinear& resident, int device_id, const void* x, int64_t M, void* y,
                                 void* workspace, void* stream_handle) {
  return on_device(device_id, [&] {
    const auto stream = static_cast<cudaStream_t>(stream_handle);
    if (resident.previous_call == nullptr) {
      QGRU_CUDA_CHECK(cudaEventCreateWithFlags(&resident.previous_call, cudaEventDisableTiming));
    } else {
      QGRU_CUDA_CHECK(cudaStreamWaitEvent(stream, resident.previous_call, 0));  // the last call, on any stream
    }
    resident.layer.run(x, M, y, workspace, stream);
    QGRU_CUDA_CHECK(cudaEventRecord(resident.previous_call, stream));
  });
}

Outcome cuda_quantize(const qgruQuantizeGPTQDescriptor& d, void* packed_weights, void* b_scale, void* zero,
                      const void* a, const void* b, void* stream_handle) {
  return on_device(d.device_id, [&] {
    const auto stream = static_cast<cudaStream_t>(stream_handle);
    const int64_t N = d.N, K = d.K, M = d.M, G = d.G, words = K / 8;
    const size_t esize = element_bytes(d.dtype);
    const std::vector<unsigned char> a_host = download_rows(a, K, M, d.stride_a, esize, stream);
    const std::vector<unsigned char> b_host = download_rows(b, N, K, K, esize, stream);  // b is contiguous
    QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> A(static_cast<size_t>(K * M));  // [K, M] as the CPU path reads it
    for (size_t i = 0; i < A.size(); ++i) A[i] = load_float(d.dtype, a_host, i);
    std::vector<double> W(static_cast<size_t>(N * K));
    for (size_t i = 0; i < W.size(); ++i) W[i] = load_float(d.dtype, b_host, i);
    cuda::DeviceHessian hessian(K, stream);
    hessian.add_feature_major(A.data(), M);
    cuda::DeviceGptqOutput out =
        cuda::gptq_quantize_device(W, N, K, hessian.device_hessian(), capi_gptq_options(d), {}, stream);
    // The outputs in the C API's layout on the host (rows unpadded), then to the caller's padded rows.
    std::vector<unsigned char> packed_host(static_cast<size_t>(N * words) * 4), scale_host(static_cast<size_t>(N * G) * esize),
        zero_host(scale_host.size());
    capi_write_gptq_result(d, out.result, packed_host.data(), words, scale_host.data(), G, zero_host.data(), G);
    upload_rows(packed_weights, packed_host, N, words, d.stride_packed, 4, stream);
    upload_rows(b_scale, scale_host, N, G, d.stride_scale, esize, stream);
    upload_rows(zero, zero_host, N, G, d.stride_zero, esize, stream);
    QGRU_CUDA_CHECK(cudaStreamSynchronize(stream));
  });
}

Outcome cuda_linear(const qgruQuantizeGPTQDescriptor& d, void* workspace, void* c, const void* a,
                    const void* packed_weights, const void* b_scale, const void* zero, void* stream) {
  // run_linear manages the current device itself (CurrentDevice); on_device's is the same device, harmless.
  return on_device(d.device_id, [&] { run_linear(d, workspace, c, a, packed_weights, b_scale, zero, stream); });
}

}  // namespace qgru::capi

#endif  // QGRU_CAPI_WITH_CUDA
