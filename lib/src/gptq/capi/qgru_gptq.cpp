// The GPTQ operator's C API (docs/GPTQ.md, "C API") over qgru::gptq (CPU) and qgru::cuda::QuantLinear (CUDA, qgru_gptq_cuda.cpp). Every
// entry point validates its arguments, then runs inside a try/catch: no exception crosses the C boundary,
// failures become statuses with a thread-local message.
#include "qgru/qgru_gptq.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "qgru/base/error.h"
#include "qgru/gptq/gptq.h"
#include "qgru/gptq/hessian.h"
#include "qgru/gptq/linear.h"
#include "qgru/gptq/pack.h"
#include "qgru/half.h"
#include "capi_internal.h"

namespace {

thread_local std::string last_error;

qgruStatus_t fail(qgruStatus_t status, const std::string& message) {
  last_error = std::string(qgruStatusString(status)) + ": " + message;
  return status;
}

qgruStatus_t ok() {
  last_error.clear();
  return QGRU_STATUS_SUCCESS;
}

#ifdef QGRU_CAPI_WITH_CUDA
qgruStatus_t answer(const char* fn, const qgru::capi::Outcome& outcome) {
  return outcome.ok() ? ok() : fail(outcome.status, std::string(fn) + ": " + outcome.message);
}
#else
constexpr const char* kNoCudaBuilt =
    "the CUDA device type is not built into this qgru (configured without CUDA: QGRU_ENABLE_CUDA=OFF or no nvcc)";
#endif

// Runs `body`; any exception becomes INTERNAL_ERROR with its message.
template <class Body>
qgruStatus_t guarded(const char* what, Body&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return fail(QGRU_STATUS_INTERNAL_ERROR, std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return fail(QGRU_STATUS_INTERNAL_ERROR, std::string(what) + ": " + e.what());
  } catch (...) {
    return fail(QGRU_STATUS_INTERNAL_ERROR, std::string(what) + ": unknown exception");
  }
}

constexpr size_t kAlign = 64;

size_t floats_bytes(size_t count) { return (count * sizeof(float) + kAlign - 1) / kAlign * kAlign; }

// Carves aligned float regions out of the caller's workspace.
class Carver {
 public:
  explicit Carver(void* base) : next_(reinterpret_cast<uintptr_t>(base)) { next_ = (next_ + kAlign - 1) / kAlign * kAlign; }
  float* take(size_t count) {
    auto* region = reinterpret_cast<float*>(next_);
    next_ += floats_bytes(count);
    return region;
  }
 private:
  uintptr_t next_;
};

size_t quantize_workspace_bytes(const qgruQuantizeGPTQDescriptor& d) {
  return floats_bytes(static_cast<size_t>(d.K * d.M));  // a as contiguous float
}

size_t linear_workspace_bytes(const qgruQuantizeGPTQDescriptor& d) {
  size_t bytes = floats_bytes(static_cast<size_t>(d.N * std::min(d.K, qgru::gptq::kLinearTileK)));  // tile
  bytes += 2 * floats_bytes(static_cast<size_t>(d.N * d.G));                                         // s, z
  if (d.dtype == QGRU_DTYPE_F16) {
    bytes += floats_bytes(static_cast<size_t>(d.K * d.M)) + floats_bytes(static_cast<size_t>(d.N * d.M));
  }
  return bytes;
}

size_t workspace_bytes(const qgruQuantizeGPTQDescriptor& d) {
#ifdef QGRU_CAPI_WITH_CUDA
  if (d.device == QGRU_DEVICE_CUDA) return qgru::capi::cuda_linear_workspace_bytes(d);
#endif
  return kAlign + std::max(quantize_workspace_bytes(d), linear_workspace_bytes(d));
}

float load(qgruDtype_t dtype, const void* base, int64_t index) {
  if (dtype == QGRU_DTYPE_F32) return static_cast<const float*>(base)[index];
  return qgru::half_bits_to_float(static_cast<const uint16_t*>(base)[index]);
}

void store(qgruDtype_t dtype, void* base, int64_t index, float value) {
  if (dtype == QGRU_DTYPE_F32) static_cast<float*>(base)[index] = value;
  else static_cast<uint16_t*>(base)[index] = qgru::float_to_half_bits(value);
}

const char* dtype_text(qgruDtype_t dtype) {
  switch (dtype) {
    case QGRU_DTYPE_F16: return "F16";
    case QGRU_DTYPE_F32: return "F32";
    case QGRU_DTYPE_I32: return "I32";
  }
  return "?";
}

std::string shape_text(const qgruTensorDescriptor& t) {
  std::string text = "[";
  for (size_t i = 0; i < t.shape.size(); ++i) text += (i ? ", " : "") + std::to_string(t.shape[i]);
  return text + "]";
}

// A rank-2 tensor: last dimension contiguous, rows not overlapping.
qgruStatus_t check_strides(const qgruTensorDescriptor& t, const std::string& name) {
  if (t.strides[1] != 1 || t.strides[0] < t.shape[1]) {
    return fail(QGRU_STATUS_BAD_TENSOR_STRIDES,
                name + " has strides [" + std::to_string(t.strides[0]) + ", " + std::to_string(t.strides[1]) +
                    "], expected [>= " + std::to_string(t.shape[1]) + ", 1] (rows contiguous, not overlapping)");
  }
  return QGRU_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

const char* qgruStatusString(qgruStatus_t status) {
  switch (status) {
    case QGRU_STATUS_SUCCESS: return "QGRU_STATUS_SUCCESS";
    case QGRU_STATUS_BAD_PARAM: return "QGRU_STATUS_BAD_PARAM";
    case QGRU_STATUS_BAD_TENSOR_SHAPE: return "QGRU_STATUS_BAD_TENSOR_SHAPE";
    case QGRU_STATUS_BAD_TENSOR_DTYPE: return "QGRU_STATUS_BAD_TENSOR_DTYPE";
    case QGRU_STATUS_BAD_TENSOR_STRIDES: return "QGRU_STATUS_BAD_TENSOR_STRIDES";
    case QGRU_STATUS_NULL_POINTER: return "QGRU_STATUS_NULL_POINTER";
    case QGRU_STATUS_INSUFFICIENT_WORKSPACE: return "QGRU_STATUS_INSUFFICIENT_WORKSPACE";
    case QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED: return "QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED";
    case QGRU_STATUS_INTERNAL_ERROR: return "QGRU_STATUS_INTERNAL_ERROR";
    case QGRU_STATUS_DEVICE_UNAVAILABLE: return "QGRU_STATUS_DEVICE_UNAVAILABLE";
    case QGRU_STATUS_NOT_SUPPORTED: return "QGRU_STATUS_NOT_SUPPORTED";
    case QGRU_STATUS_EXECUTION_FAILED: return "QGRU_STATUS_EXECUTION_FAILED";
  }
  return "QGRU_STATUS_UNKNOWN";
}

const char* qgruGetLastErrorMessage(void) { return last_error.c_str(); }

qgruStatus_t qgruGetDeviceCount(qgruDevice_t device, int* count) {
  if (!count) return fail(QGRU_STATUS_NULL_POINTER, "qgruGetDeviceCount: count is NULL");
  *count = 0;
  if (device == QGRU_DEVICE_CPU) {
    *count = 1;
    return ok();
  }
  if (device != QGRU_DEVICE_CUDA) {
    return fail(QGRU_STATUS_BAD_PARAM, "qgruGetDeviceCount: unknown device type " + std::to_string(static_cast<int>(device)));
  }
#ifdef QGRU_CAPI_WITH_CUDA
  return guarded("qgruGetDeviceCount", [&] { return answer("qgruGetDeviceCount", qgru::capi::cuda_device_count(count)); });
#else
  return fail(QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED, std::string("qgruGetDeviceCount: ") + kNoCudaBuilt);
#endif
}

qgruStatus_t qgruCreateHandle(qgruHandle_t* handle, qgruDevice_t device, int device_id) {
  if (!handle) return fail(QGRU_STATUS_NULL_POINTER, "qgruCreateHandle: handle is NULL");
  if (device != QGRU_DEVICE_CPU && device != QGRU_DEVICE_CUDA) {
    return fail(QGRU_STATUS_BAD_PARAM, "qgruCreateHandle: unknown device type " + std::to_string(static_cast<int>(device)));
  }
  if (device == QGRU_DEVICE_CUDA && device_id < 0) {
    return fail(QGRU_STATUS_BAD_PARAM, "qgruCreateHandle: CUDA device_id " + std::to_string(device_id) + ", expected >= 0");
  }
  return guarded("qgruCreateHandle", [&] {
    *handle = new qgruHandle{device, device_id};
    return ok();
  });
}

qgruStatus_t qgruDestroyHandle(qgruHandle_t handle) {
  if (!handle) return fail(QGRU_STATUS_NULL_POINTER, "qgruDestroyHandle: handle is NULL");
  delete handle;
  return ok();
}

qgruStatus_t qgruCreateTensorDescriptor(qgruTensorDescriptor_t* desc, qgruDtype_t dtype, size_t ndim,
                                        const int64_t* shape, const int64_t* strides) {
  if (!desc || !shape) return fail(QGRU_STATUS_NULL_POINTER, "qgruCreateTensorDescriptor: desc or shape is NULL");
  if (ndim == 0 || ndim > 8) {
    return fail(QGRU_STATUS_BAD_PARAM, "qgruCreateTensorDescriptor: ndim " + std::to_string(ndim) + ", expected 1..8");
  }
  if (dtype != QGRU_DTYPE_F16 && dtype != QGRU_DTYPE_F32 && dtype != QGRU_DTYPE_I32) {
    return fail(QGRU_STATUS_BAD_TENSOR_DTYPE,
                "qgruCreateTensorDescriptor: unknown dtype " + std::to_string(static_cast<int>(dtype)));
  }
  for (size_t i = 0; i < ndim; ++i) {
    if (shape[i] <= 0) {
      return fail(QGRU_STATUS_BAD_TENSOR_SHAPE, "qgruCreateTensorDescriptor: shape[" + std::to_string(i) +
                                                    "] = " + std::to_string(shape[i]) + ", expected > 0");
    }
    if (strides && strides[i] <= 0) {
      return fail(QGRU_STATUS_BAD_TENSOR_STRIDES, "qgruCreateTensorDescriptor: strides[" + std::to_string(i) +
                                                      "] = " + std::to_string(strides[i]) + ", expected > 0");
    }
  }
  return guarded("qgruCreateTensorDescriptor", [&] {
    auto* tensor = new qgruTensorDescriptor{dtype, std::vector<int64_t>(shape, shape + ndim), {}};
    if (strides) {
      tensor->strides.assign(strides, strides + ndim);
    } else {
      tensor->strides.assign(ndim, 1);
      for (size_t i = ndim - 1; i > 0; --i) tensor->strides[i - 1] = tensor->strides[i] * shape[i];
    }
    *desc = tensor;
    return ok();
  });
}

qgruStatus_t qgruDestroyTensorDescriptor(qgruTensorDescriptor_t desc) {
  if (!desc) return fail(QGRU_STATUS_NULL_POINTER, "qgruDestroyTensorDescriptor: desc is NULL");
  delete desc;
  return ok();
}

qgruStatus_t qgruCreateQuantizeGPTQDescriptor(qgruHandle_t handle, qgruQuantizeGPTQDescriptor_t* desc_ptr,
                                              qgruTensorDescriptor_t c_desc, qgruTensorDescriptor_t a_desc,
                                              qgruTensorDescriptor_t packed_weights_desc,
                                              qgruTensorDescriptor_t b_scale_desc, qgruTensorDescriptor_t zero_desc) {
  const char* fn = "qgruCreateQuantizeGPTQDescriptor: ";
  if (!handle || !desc_ptr || !c_desc || !a_desc || !packed_weights_desc || !b_scale_desc || !zero_desc) {
    return fail(QGRU_STATUS_NULL_POINTER, std::string(fn) + "a handle, descriptor or desc_ptr is NULL");
  }
  const qgruDtype_t dtype = a_desc->dtype;
  if (dtype != QGRU_DTYPE_F16 && dtype != QGRU_DTYPE_F32) {
    return fail(QGRU_STATUS_BAD_TENSOR_DTYPE, std::string(fn) + "a is " + dtype_text(dtype) + ", expected F16 or F32");
  }
  const std::pair<qgruTensorDescriptor_t, const char*> same[] = {{c_desc, "c"}, {b_scale_desc, "b_scale"}, {zero_desc, "zero"}};
  for (const auto& [tensor, name] : same) {
    if (tensor->dtype != dtype) {
      return fail(QGRU_STATUS_BAD_TENSOR_DTYPE, std::string(fn) + name + " is " + dtype_text(tensor->dtype) +
                                                    ", expected " + dtype_text(dtype) + " like a");
    }
  }
  if (packed_weights_desc->dtype != QGRU_DTYPE_I32) {
    return fail(QGRU_STATUS_BAD_TENSOR_DTYPE, std::string(fn) + "packed_weights is " +
                                                  dtype_text(packed_weights_desc->dtype) + ", expected I32 (8 int4 per word)");
  }
  const std::pair<qgruTensorDescriptor_t, const char*> all[] = {
      {c_desc, "c"}, {a_desc, "a"}, {packed_weights_desc, "packed_weights"}, {b_scale_desc, "b_scale"}, {zero_desc, "zero"}};
  for (const auto& [tensor, name] : all) {
    if (tensor->shape.size() != 2) {
      return fail(QGRU_STATUS_BAD_TENSOR_SHAPE, std::string(fn) + name + " has shape " + shape_text(*tensor) + ", expected rank 2");
    }
  }
  const int64_t K = a_desc->shape[0], M = a_desc->shape[1], N = c_desc->shape[0], G = b_scale_desc->shape[1];
  auto shape_error = [&](const char* name, const qgruTensorDescriptor& t, const std::string& want) {
    return fail(QGRU_STATUS_BAD_TENSOR_SHAPE, std::string(fn) + name + " has shape " + shape_text(t) + ", expected " + want +
                                                  " (N = " + std::to_string(N) + ", K = " + std::to_string(K) +
                                                  ", M = " + std::to_string(M) + ")");
  };
  if (c_desc->shape[1] != M) return shape_error("c", *c_desc, "[N, M]");
  if (K % 8 != 0) return shape_error("a", *a_desc, "[K, M] with K a multiple of 8");
  if (packed_weights_desc->shape[0] != N || packed_weights_desc->shape[1] != K / 8) {
    return shape_error("packed_weights", *packed_weights_desc, "[N, K/8]");
  }
  if (b_scale_desc->shape[0] != N || K % G != 0) {
    return shape_error("b_scale", *b_scale_desc, "[N, num_groups] with num_groups dividing K");
  }
  if (zero_desc->shape != b_scale_desc->shape) return shape_error("zero", *zero_desc, "the shape of b_scale");
  for (const auto& [tensor, name] : all) {
    const qgruStatus_t strides = check_strides(*tensor, std::string(fn) + name);
    if (strides != QGRU_STATUS_SUCCESS) return strides;
  }
  return guarded("qgruCreateQuantizeGPTQDescriptor", [&] {
    qgruQuantizeGPTQDescriptor d{handle->device,
                                 handle->device_id,
                                 dtype,
                                 N,
                                 K,
                                 M,
                                 G,
                                 a_desc->strides[0],
                                 c_desc->strides[0],
                                 packed_weights_desc->strides[0],
                                 b_scale_desc->strides[0],
                                 zero_desc->strides[0]};
    if (d.device == QGRU_DEVICE_CUDA) {
#ifdef QGRU_CAPI_WITH_CUDA
      const qgru::capi::Outcome cuda = qgru::capi::cuda_check_descriptor(d);
      if (!cuda.ok()) return fail(cuda.status, fn + cuda.message);
#else
      return fail(QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED, fn + std::string(kNoCudaBuilt));
#endif
    }
    *desc_ptr = new qgruQuantizeGPTQDescriptor(d);
    return ok();
  });
}

qgruStatus_t qgruGetQuantizeGPTQWorkspaceSize(qgruQuantizeGPTQDescriptor_t desc, size_t* size) {
  if (!desc || !size) return fail(QGRU_STATUS_NULL_POINTER, "qgruGetQuantizeGPTQWorkspaceSize: desc or size is NULL");
  *size = workspace_bytes(*desc);
  return ok();
}

qgruStatus_t qgruSetQuantizeGPTQActOrder(qgruQuantizeGPTQDescriptor_t desc, int act_order) {
  if (!desc) return fail(QGRU_STATUS_NULL_POINTER, "qgruSetQuantizeGPTQActOrder: desc is NULL");
  if (act_order != 0 && act_order != 1) {
    return fail(QGRU_STATUS_BAD_PARAM, "qgruSetQuantizeGPTQActOrder: act_order " + std::to_string(act_order) + ", expected 0 or 1");
  }
  desc->act_order = act_order == 1;
  return ok();
}

qgruStatus_t qgruSetQuantizeGPTQDamping(qgruQuantizeGPTQDescriptor_t desc, double damp) {
  if (!desc) return fail(QGRU_STATUS_NULL_POINTER, "qgruSetQuantizeGPTQDamping: desc is NULL");
  if (!(damp >= 0.0 && damp <= 1.0)) {  // also refuses NaN
    char text[64];
    std::snprintf(text, sizeof text, "%g", damp);
    return fail(QGRU_STATUS_BAD_PARAM, std::string("qgruSetQuantizeGPTQDamping: damp ") + text +
                                           ", expected a finite value in [0, 1] (relative to mean(diag H))");
  }
  desc->damp = damp;
  return ok();
}

namespace {

// Argument checks of a call, in this order, before any device is touched: desc, tensor pointers, workspace
// size, workspace pointer. (Both operators run on both devices.)
qgruStatus_t check_call(const char* fn, qgruQuantizeGPTQDescriptor_t desc, void* workspace, size_t workspace_size,
                        std::initializer_list<const void*> pointers) {
  if (!desc) return fail(QGRU_STATUS_NULL_POINTER, std::string(fn) + ": desc is NULL");
  for (const void* p : pointers) {
    if (!p) return fail(QGRU_STATUS_NULL_POINTER, std::string(fn) + ": a tensor pointer is NULL");
  }
  const size_t need = workspace_bytes(*desc);
  if (workspace_size < need) {
    return fail(QGRU_STATUS_INSUFFICIENT_WORKSPACE, std::string(fn) + ": workspace of " + std::to_string(workspace_size) +
                                                        " bytes, need " + std::to_string(need));
  }
  if (!workspace) return fail(QGRU_STATUS_NULL_POINTER, std::string(fn) + ": workspace is NULL");
  return QGRU_STATUS_SUCCESS;
}

}  // namespace

qgruStatus_t qgruQuantizeGPTQ(qgruQuantizeGPTQDescriptor_t desc, void* workspace, size_t workspace_size,
                              void* packed_weights, void* b_scale, void* zero, const void* a, const void* b,
                              void* stream) {
  const qgruStatus_t status =
      check_call("qgruQuantizeGPTQ", desc, workspace, workspace_size, {packed_weights, b_scale, zero, a, b});
  if (status != QGRU_STATUS_SUCCESS) return status;
  if (desc->device == QGRU_DEVICE_CUDA) {
#ifdef QGRU_CAPI_WITH_CUDA
    return guarded("qgruQuantizeGPTQ", [&] {
      return answer("qgruQuantizeGPTQ", qgru::capi::cuda_quantize(*desc, packed_weights, b_scale, zero, a, b, stream));
    });
#else
    // Unreachable: without CUDA no CUDA descriptor can be created. Kept as an answer, not a crash.
    return fail(QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED, std::string("qgruQuantizeGPTQ: ") + kNoCudaBuilt);
#endif
  }
  (void)stream;  // the CPU ignores streams
  return guarded("qgruQuantizeGPTQ", [&] {
    const auto& d = *desc;
    Carver carve(workspace);
    float* A = carve.take(static_cast<size_t>(d.K * d.M));
    for (int64_t k = 0; k < d.K; ++k)
      for (int64_t m = 0; m < d.M; ++m) A[k * d.M + m] = load(d.dtype, a, k * d.stride_a + m);
    qgru::gptq::HessianAccumulator hessian(d.K);
    hessian.add_feature_major(A, d.M);
    std::vector<double> W(static_cast<size_t>(d.N * d.K));
    for (int64_t i = 0; i < d.N * d.K; ++i) W[static_cast<size_t>(i)] = load(d.dtype, b, i);
    const auto result = qgru::gptq::gptq_quantize(W, d.N, d.K, hessian.hessian(), qgru::capi::capi_gptq_options(d));
    qgru::capi::capi_write_gptq_result(d, result, packed_weights, d.stride_packed, b_scale, d.stride_scale, zero,
                                       d.stride_zero);
    return ok();
  });
}

qgruStatus_t qgruQuantizeLinearGPTQ(qgruQuantizeGPTQDescriptor_t desc, void* workspace, size_t workspace_size,
                                    void* c, const void* a, const void* packed_weights, const void* b_scale,
                                    const void* zero, void* stream) {
  // Resident weights (qgruSetQuantizeGPTQWeights): NULL weight pointers, or the very ones they were read from.
  const bool resident = desc && desc->resident &&
                        (packed_weights == nullptr || packed_weights == desc->resident_packed) &&
                        (b_scale == nullptr || b_scale == desc->resident_scale) && (zero == nullptr || zero == desc->resident_zero);
  const qgruStatus_t status =
      resident ? check_call("qgruQuantizeLinearGPTQ", desc, workspace, workspace_size, {c, a})
               : check_call("qgruQuantizeLinearGPTQ", desc, workspace, workspace_size, {c, a, packed_weights, b_scale, zero});
  if (status != QGRU_STATUS_SUCCESS) return status;
  if (desc->device == QGRU_DEVICE_CUDA) {
#ifdef QGRU_CAPI_WITH_CUDA
    if (resident) {
      return guarded("qgruQuantizeLinearGPTQ", [&] {
        return answer("qgruQuantizeLinearGPTQ", qgru::capi::cuda_linear_resident(*desc, workspace, c, a, stream));
      });
    }
    return guarded("qgruQuantizeLinearGPTQ", [&] {
      return answer("qgruQuantizeLinearGPTQ",
                    qgru::capi::cuda_linear(*desc, workspace, c, a, packed_weights, b_scale, zero, stream));
    });
#else
    // Unreachable: without CUDA no CUDA descriptor can be created. Kept as an answer, not a crash.
    return fail(QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED, std::string("qgruQuantizeLinearGPTQ: ") + kNoCudaBuilt);
#endif
  }
  (void)stream;  // the CPU ignores streams
  return guarded("qgruQuantizeLinearGPTQ", [&] {
    const auto& d = *desc;
    Carver carve(workspace);
    float* tile = carve.take(static_cast<size_t>(d.N * std::min(d.K, qgru::gptq::kLinearTileK)));
    float* scale = carve.take(static_cast<size_t>(d.N * d.G));
    float* zero_point = carve.take(static_cast<size_t>(d.N * d.G));
    for (int64_t n = 0; n < d.N; ++n) {
      for (int64_t g = 0; g < d.G; ++g) {
        scale[n * d.G + g] = load(d.dtype, b_scale, n * d.stride_scale + g);
        zero_point[n * d.G + g] = load(d.dtype, zero, n * d.stride_zero + g);
      }
    }
    const auto codes = qgru::gptq::row_packed_codes(static_cast<const int32_t*>(packed_weights), 4, d.N, d.K, d.stride_packed);
    const qgru::gptq::GroupParamsView params{scale, zero_point, 1, d.G, nullptr, d.K / d.G};
    if (d.dtype == QGRU_DTYPE_F32) {
      qgru::gptq::linear_f32(codes, params, static_cast<const float*>(a), d.stride_a, d.M, static_cast<float*>(c),
                             d.stride_c, tile);
      return ok();
    }
    float* A = carve.take(static_cast<size_t>(d.K * d.M));
    float* C = carve.take(static_cast<size_t>(d.N * d.M));
    for (int64_t k = 0; k < d.K; ++k)
      for (int64_t m = 0; m < d.M; ++m) A[k * d.M + m] = load(d.dtype, a, k * d.stride_a + m);
    qgru::gptq::linear_f32(codes, params, A, d.M, d.M, C, d.M, tile);
    for (int64_t n = 0; n < d.N; ++n)
      for (int64_t m = 0; m < d.M; ++m) store(d.dtype, c, n * d.stride_c + m, C[n * d.M + m]);
    return ok();
  });
}

qgruStatus_t qgruSetQuantizeGPTQWeights(qgruQuantizeGPTQDescriptor_t desc, const void* packed_weights,
                                        const void* b_scale, const void* zero, void* stream) {
  if (!desc) return fail(QGRU_STATUS_NULL_POINTER, "qgruSetQuantizeGPTQWeights: desc is NULL");
  if (!packed_weights || !b_scale || !zero) {
    return fail(QGRU_STATUS_NULL_POINTER, "qgruSetQuantizeGPTQWeights: a weight pointer is NULL");
  }
  if (desc->device != QGRU_DEVICE_CUDA) {
    return fail(QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED,
                "qgruSetQuantizeGPTQWeights: resident weights are for CUDA descriptors (the CPU reads the host weights)");
  }
#ifdef QGRU_CAPI_WITH_CUDA
  return guarded("qgruSetQuantizeGPTQWeights", [&] {
    return answer("qgruSetQuantizeGPTQWeights", qgru::capi::cuda_set_weights(*desc, packed_weights, b_scale, zero, stream));
  });
#else
  (void)stream;
  return fail(QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED, std::string("qgruSetQuantizeGPTQWeights: ") + kNoCudaBuilt);
#endif
}

qgruStatus_t qgruDestroyQuantizeGPTQDescriptor(qgruQuantizeGPTQDescriptor_t desc) {
  if (!desc) return fail(QGRU_STATUS_NULL_POINTER, "qgruDestroyQuantizeGPTQDescriptor: desc is NULL");
  delete desc;
  return ok();
}

}  // extern "C"
