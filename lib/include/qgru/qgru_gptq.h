/* qgru GPTQ C API: the GPTQ operator (InfiniOp-style QuantizeGPTQ; docs/GPTQ.md, "C API") for programs that embed qgru.
 *
 *   W  = b              [N, K]   dT   float weights (contiguous)
 *   X  = a              [K, M]   dT   calibration inputs for qgruQuantizeGPTQ, the input of qgruQuantizeLinearGPTQ
 *   Q  = packed_weights [N, K/8] int32: 8 four-bit codes along K per word, lowest code in the lowest bits
 *   s  = b_scale        [N, G]   dT   G = num_groups, group_size = K / G (G = 1: per row)
 *   z  = zero           [N, G]   dT   zero points (integral values in [0, 15])
 *   c                   [N, M]   dT   c = Ŵ·a, Ŵ[n, k] = s[n, g]·(q[n, k] − z[n, g]), g = k / group_size
 * dT is F16 or F32 (one dtype for a, b, c, s, z). qgruQuantizeGPTQ runs GPTQ (H = 2·X·Xᵀ, blocks of 128,
 * asymmetric 4-bit) as `qgru gptq` does; damping 0.01 and no act-order unless set on the descriptor
 * (qgruSetQuantizeGPTQDamping, qgruSetQuantizeGPTQActOrder); see docs/GPTQ.md.
 *
 * Strides are in elements; the last dimension must be contiguous (stride 1) and rows may be padded
 * (row stride >= number of columns). No exception crosses this boundary: every failure is a status, and
 * qgruGetLastErrorMessage() says what was wrong (thread-local, valid until the next call on the thread).
 *
 * Devices. QGRU_DEVICE_CPU: every pointer is host memory; `stream` is accepted and ignored.
 * QGRU_DEVICE_CUDA (device_id = the CUDA device ordinal): qgruQuantizeLinearGPTQ runs on the W4A16 GPU kernels
 * (docs/CUDA.md); qgruQuantizeGPTQ runs GPTQ on the GPU (docs/GPTQ.md, "On the GPU": the Hessian, the Cholesky
 * factors and the column loop on the device, the CPU path's algorithm and options; a and b are read through the
 * host, the call returns after synchronizing `stream`; it allocates its own device memory for H and its
 * factors, about 4·K²·8 bytes besides the weight's copies, and frees it before returning; codes equal the CPU
 * descriptor's except where a value sits within rounding noise of a rounding boundary). On a CUDA descriptor b, c, a, packed_weights,
 * b_scale, zero and the workspace are device memory of that device and `stream` is a cudaStream_t (NULL:
 * the default stream); the call returns when c is written (it synchronizes `stream`: the weights and a are
 * re-laid out through the host on every call), unless the weights are resident (qgruSetQuantizeGPTQWeights
 * below: then nothing goes through the host and the call only enqueues). F32 a and b_scale are rounded to fp16, each weight is
 * RN_fp16(s·(q − z)), sums are fp32 and c is rounded once to fp16; zero must hold integers in [0, 15]
 * (else BAD_PARAM). The workspace size needs no device. Which status says what:
 *   DEVICE_TYPE_NOT_SUPPORTED  qgru was built without CUDA, or the operator has no CUDA implementation;
 *   DEVICE_UNAVAILABLE         built with CUDA, but no usable device (none, or device_id out of range);
 *   NOT_SUPPORTED              the shape has no GPU kernel (K a multiple of 32, N of 8, K / num_groups of 8,
 *                              see kTileConfigs in qgru/kernels/linear_plan.h); the message names M, N, K;
 *   EXECUTION_FAILED           a CUDA runtime call failed (the message names the call).
 * Arguments (NULL pointers, shapes, dtypes, strides, workspace size) are validated before any device call. */
#ifndef QGRU_CAPI_QGRU_GPTQ_H_
#define QGRU_CAPI_QGRU_GPTQ_H_

#include <stddef.h>
#include <stdint.h>

// The enums below have the underlying type int in C++ as in C: a caller may pass any int (an out-of-range
// value is answered with a status), and reading it is then defined behaviour on both sides.
#ifdef __cplusplus
#define QGRU_CAPI_ENUM_BASE : int
#else
#define QGRU_CAPI_ENUM_BASE
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum QGRU_CAPI_ENUM_BASE {
  QGRU_STATUS_SUCCESS = 0,
  QGRU_STATUS_BAD_PARAM = 1,
  QGRU_STATUS_BAD_TENSOR_SHAPE = 2,
  QGRU_STATUS_BAD_TENSOR_DTYPE = 3,
  QGRU_STATUS_BAD_TENSOR_STRIDES = 4,
  QGRU_STATUS_NULL_POINTER = 5,
  QGRU_STATUS_INSUFFICIENT_WORKSPACE = 6,
  QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED = 7,
  QGRU_STATUS_INTERNAL_ERROR = 8,
  QGRU_STATUS_DEVICE_UNAVAILABLE = 9, /* the device type is built in, but no usable device is present */
  QGRU_STATUS_NOT_SUPPORTED = 10,     /* valid request with no kernel for it (the message names the shape) */
  QGRU_STATUS_EXECUTION_FAILED = 11   /* a device runtime call failed */
} qgruStatus_t;

typedef enum QGRU_CAPI_ENUM_BASE { QGRU_DEVICE_CPU = 0, QGRU_DEVICE_CUDA = 1 } qgruDevice_t;

typedef enum QGRU_CAPI_ENUM_BASE { QGRU_DTYPE_F16 = 0, QGRU_DTYPE_F32 = 1, QGRU_DTYPE_I32 = 2 } qgruDtype_t;

typedef struct qgruHandle* qgruHandle_t;
typedef struct qgruTensorDescriptor* qgruTensorDescriptor_t;
typedef struct qgruQuantizeGPTQDescriptor* qgruQuantizeGPTQDescriptor_t;

/* Name of a status ("QGRU_STATUS_SUCCESS", ...); never NULL. */
const char* qgruStatusString(qgruStatus_t status);
/* Detail of the last failure on this thread ("" after a success). */
const char* qgruGetLastErrorMessage(void);

/* Devices of a type this process can use: CPU: 1. CUDA: SUCCESS with the number of GPUs; DEVICE_UNAVAILABLE
 * (count 0, the message says why) when built with CUDA but none is usable; DEVICE_TYPE_NOT_SUPPORTED
 * (count 0) when qgru was built without CUDA. NULL_POINTER, BAD_PARAM for an unknown device type. */
qgruStatus_t qgruGetDeviceCount(qgruDevice_t device, int* count);

/* device: QGRU_DEVICE_CPU or QGRU_DEVICE_CUDA (anything else: BAD_PARAM); device_id >= 0 for CUDA (else
 * BAD_PARAM). No device is touched here: the CUDA device is checked when a descriptor is created. */
qgruStatus_t qgruCreateHandle(qgruHandle_t* handle, qgruDevice_t device, int device_id);
qgruStatus_t qgruDestroyHandle(qgruHandle_t handle);

/* ndim in 1..8; shape entries > 0; strides NULL means contiguous row-major. The descriptor copies both. */
qgruStatus_t qgruCreateTensorDescriptor(qgruTensorDescriptor_t* desc, qgruDtype_t dtype, size_t ndim,
                                        const int64_t* shape, const int64_t* strides);
qgruStatus_t qgruDestroyTensorDescriptor(qgruTensorDescriptor_t desc);

/* SUCCESS, NULL_POINTER, BAD_PARAM, BAD_TENSOR_SHAPE, BAD_TENSOR_DTYPE, BAD_TENSOR_STRIDES,
 * DEVICE_TYPE_NOT_SUPPORTED, and on a CUDA handle NOT_SUPPORTED (no kernel for the shape, checked before
 * the device) and DEVICE_UNAVAILABLE. The tensor descriptors may be destroyed after this call. */
qgruStatus_t qgruCreateQuantizeGPTQDescriptor(qgruHandle_t handle, qgruQuantizeGPTQDescriptor_t* desc_ptr,
                                              qgruTensorDescriptor_t c_desc, qgruTensorDescriptor_t a_desc,
                                              qgruTensorDescriptor_t packed_weights_desc,
                                              qgruTensorDescriptor_t b_scale_desc, qgruTensorDescriptor_t zero_desc);

/* Bytes of workspace both qgruQuantizeGPTQ and qgruQuantizeLinearGPTQ need (device memory on CUDA). */
qgruStatus_t qgruGetQuantizeGPTQWorkspaceSize(qgruQuantizeGPTQDescriptor_t desc, size_t* size);

/* Options of qgruQuantizeGPTQ on this descriptor (they apply to later calls; the linear ignores them).
 * Act-order (desc_act): columns are quantized in descending diag(H) order; the group parameters are then
 * taken from the original W before any update (AutoGPTQ's static_groups), so group g still covers the
 * inputs [g·group_size, (g+1)·group_size) and the [N, G] layout needs no g_idx. act_order 0 or 1, else
 * BAD_PARAM. Damping: H += damp·mean(diag H)·I (AutoGPTQ's damp_percent, default 0.01); damp finite in
 * [0, 1], else BAD_PARAM. NULL_POINTER for a NULL desc. */
qgruStatus_t qgruSetQuantizeGPTQActOrder(qgruQuantizeGPTQDescriptor_t desc, int act_order);
qgruStatus_t qgruSetQuantizeGPTQDamping(qgruQuantizeGPTQDescriptor_t desc, double damp);

/* GPTQ of b [N, K] with calibration inputs a [K, M]: writes packed_weights, b_scale, zero.
 * SUCCESS, NULL_POINTER, INSUFFICIENT_WORKSPACE, DEVICE_TYPE_NOT_SUPPORTED, INTERNAL_ERROR (e.g. non-finite
 * inputs, or H not positive definite even after raising the damping); on CUDA also DEVICE_UNAVAILABLE and
 * EXECUTION_FAILED. */
qgruStatus_t qgruQuantizeGPTQ(qgruQuantizeGPTQDescriptor_t desc, void* workspace, size_t workspace_size,
                              void* packed_weights, void* b_scale, void* zero, const void* a, const void* b,
                              void* stream);

/* c = Ŵ·a from the packed codes (dequantized a tile at a time, never whole; on CUDA by the GPU kernels).
 * SUCCESS, NULL_POINTER, INSUFFICIENT_WORKSPACE, INTERNAL_ERROR; on CUDA also BAD_PARAM (a zero point that
 * is not an integer in [0, 15]), DEVICE_UNAVAILABLE, NOT_SUPPORTED, EXECUTION_FAILED. */
qgruStatus_t qgruQuantizeLinearGPTQ(qgruQuantizeGPTQDescriptor_t desc, void* workspace, size_t workspace_size,
                                    void* c, const void* a, const void* packed_weights, const void* b_scale,
                                    const void* zero, void* stream);

/* Device-resident weights for a CUDA descriptor. Reads packed_weights, b_scale and zero (device memory of the
 * descriptor's device, the layouts above) once on `stream`, repacks them for the GPU kernels and keeps them on
 * the device until the descriptor is destroyed or this is called again; returns after synchronizing `stream`.
 * From then on qgruQuantizeLinearGPTQ on this descriptor, given NULL for packed_weights, b_scale and zero (or
 * the very pointers passed here), reads the resident copy: it enqueues its GPU work on `stream` (a's and c's
 * layout changes included) and returns without synchronizing and without copying anything between host and
 * device. Changing the weights behind those pointers needs another call of this function. Query
 * qgruGetQuantizeGPTQWorkspaceSize again after this call: the resident path's workspace depends on the GPU
 * engine (QGRU_CUDA_LINEAR_KERNEL, docs/CUDA.md). Calls on one descriptor must not overlap in time (issue them
 * on one stream, or order them). SUCCESS, NULL_POINTER, DEVICE_TYPE_NOT_SUPPORTED (a CPU descriptor, or no
 * CUDA built in), BAD_PARAM (a zero point that is not an integer in [0, 15]), DEVICE_UNAVAILABLE,
 * NOT_SUPPORTED, EXECUTION_FAILED. */
qgruStatus_t qgruSetQuantizeGPTQWeights(qgruQuantizeGPTQDescriptor_t desc, const void* packed_weights,
                                        const void* b_scale, const void* zero, void* stream);

/* SUCCESS; NULL_POINTER for NULL. */
qgruStatus_t qgruDestroyQuantizeGPTQDescriptor(qgruQuantizeGPTQDescriptor_t desc);

#ifdef __cplusplus
}
#endif

#endif /* QGRU_CAPI_QGRU_GPTQ_H_ */
