/* qgru GPTQ C API: the operator of seed 004 (InfiniOp QuantizeGPTQ) for programs that embed qgru.
 *
 *   W  = b              [N, K]   dT   float weights (contiguous)
 *   X  = a              [K, M]   dT   calibration inputs for qgruQuantizeGPTQ, the input of qgruQuantizeLinearGPTQ
 *   Q  = packed_weights [N, K/8] int32: 8 four-bit codes along K per word, lowest code in the lowest bits
 *   s  = b_scale        [N, G]   dT   G = num_groups, group_size = K / G (G = 1: per row)
 *   z  = zero           [N, G]   dT   zero points (integral values in [0, 15])
 *   c                   [N, M]   dT   c = Ŵ·a, Ŵ[n, k] = s[n, g]·(q[n, k] − z[n, g]), g = k / group_size
 * dT is F16 or F32 (one dtype for a, b, c, s, z). qgruQuantizeGPTQ runs GPTQ (H = 2·X·Xᵀ, damping 0.01,
 * blocks of 128, asymmetric 4-bit, no act-order) as `qgru gptq` does; see docs/GPTQ.md.
 *
 * Strides are in elements; the last dimension must be contiguous (stride 1) and rows may be padded
 * (row stride >= number of columns). No exception crosses this boundary: every failure is a status, and
 * qgruGetLastErrorMessage() says what was wrong (thread-local, valid until the next call on the thread).
 * CPU only in this build: a CUDA handle can be created, operators on it return
 * QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED. The `stream` arguments are accepted and ignored on the CPU. */
#ifndef QGRU_CAPI_QGRU_GPTQ_H_
#define QGRU_CAPI_QGRU_GPTQ_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  QGRU_STATUS_SUCCESS = 0,
  QGRU_STATUS_BAD_PARAM = 1,
  QGRU_STATUS_BAD_TENSOR_SHAPE = 2,
  QGRU_STATUS_BAD_TENSOR_DTYPE = 3,
  QGRU_STATUS_BAD_TENSOR_STRIDES = 4,
  QGRU_STATUS_NULL_POINTER = 5,
  QGRU_STATUS_INSUFFICIENT_WORKSPACE = 6,
  QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED = 7,
  QGRU_STATUS_INTERNAL_ERROR = 8
} qgruStatus_t;

typedef enum { QGRU_DEVICE_CPU = 0, QGRU_DEVICE_CUDA = 1 } qgruDevice_t;

typedef enum { QGRU_DTYPE_F16 = 0, QGRU_DTYPE_F32 = 1, QGRU_DTYPE_I32 = 2 } qgruDtype_t;

typedef struct qgruHandle* qgruHandle_t;
typedef struct qgruTensorDescriptor* qgruTensorDescriptor_t;
typedef struct qgruQuantizeGPTQDescriptor* qgruQuantizeGPTQDescriptor_t;

/* Name of a status ("QGRU_STATUS_SUCCESS", ...); never NULL. */
const char* qgruStatusString(qgruStatus_t status);
/* Detail of the last failure on this thread ("" after a success). */
const char* qgruGetLastErrorMessage(void);

/* device: QGRU_DEVICE_CPU or QGRU_DEVICE_CUDA (anything else: BAD_PARAM). */
qgruStatus_t qgruCreateHandle(qgruHandle_t* handle, qgruDevice_t device, int device_id);
qgruStatus_t qgruDestroyHandle(qgruHandle_t handle);

/* ndim in 1..8; shape entries > 0; strides NULL means contiguous row-major. The descriptor copies both. */
qgruStatus_t qgruCreateTensorDescriptor(qgruTensorDescriptor_t* desc, qgruDtype_t dtype, size_t ndim,
                                        const int64_t* shape, const int64_t* strides);
qgruStatus_t qgruDestroyTensorDescriptor(qgruTensorDescriptor_t desc);

/* SUCCESS, NULL_POINTER, BAD_PARAM, BAD_TENSOR_SHAPE, BAD_TENSOR_DTYPE, BAD_TENSOR_STRIDES,
 * DEVICE_TYPE_NOT_SUPPORTED. The descriptors may be destroyed after this call. */
qgruStatus_t qgruCreateQuantizeGPTQDescriptor(qgruHandle_t handle, qgruQuantizeGPTQDescriptor_t* desc_ptr,
                                              qgruTensorDescriptor_t c_desc, qgruTensorDescriptor_t a_desc,
                                              qgruTensorDescriptor_t packed_weights_desc,
                                              qgruTensorDescriptor_t b_scale_desc, qgruTensorDescriptor_t zero_desc);

/* Bytes of workspace both qgruQuantizeGPTQ and qgruQuantizeLinearGPTQ need. */
qgruStatus_t qgruGetQuantizeGPTQWorkspaceSize(qgruQuantizeGPTQDescriptor_t desc, size_t* size);

/* GPTQ of b [N, K] with calibration inputs a [K, M]: writes packed_weights, b_scale, zero.
 * SUCCESS, NULL_POINTER, INSUFFICIENT_WORKSPACE, DEVICE_TYPE_NOT_SUPPORTED, INTERNAL_ERROR (e.g. non-finite
 * inputs, or H not positive definite even after raising the damping). */
qgruStatus_t qgruQuantizeGPTQ(qgruQuantizeGPTQDescriptor_t desc, void* workspace, size_t workspace_size,
                              void* packed_weights, void* b_scale, void* zero, const void* a, const void* b,
                              void* stream);

/* c = Ŵ·a from the packed codes (dequantized a tile at a time, never whole).
 * SUCCESS, NULL_POINTER, INSUFFICIENT_WORKSPACE, DEVICE_TYPE_NOT_SUPPORTED, INTERNAL_ERROR. */
qgruStatus_t qgruQuantizeLinearGPTQ(qgruQuantizeGPTQDescriptor_t desc, void* workspace, size_t workspace_size,
                                    void* c, const void* a, const void* packed_weights, const void* b_scale,
                                    const void* zero, void* stream);

/* SUCCESS; NULL_POINTER for NULL. */
qgruStatus_t qgruDestroyQuantizeGPTQDescriptor(qgruQuantizeGPTQDescriptor_t desc);

#ifdef __cplusplus
}
#endif

#endif /* QGRU_CAPI_QGRU_GPTQ_H_ */
