/* An embedder's use of the qgru GPTQ C API, in plain C11: quantize a layer, run the quantized linear, check
 * the output against the float layer, again with act-order and a stronger damping, and exercise the
 * statuses that only C can reach (enum values that are not in the header) and the CUDA device type's answer
 * for this build (QGRU_CAPI_EXPECT_CUDA, from test/CMakeLists.txt). Exit 0 when everything holds, 1 with a
 * message otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qgru/capi/qgru_gptq.h"

#define CHECK_STATUS(call, want)                                                                    \
  do {                                                                                              \
    qgruStatus_t got_ = (call);                                                                     \
    if (got_ != (want)) {                                                                           \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__, #call,       \
              qgruStatusString(got_), qgruStatusString(want), qgruGetLastErrorMessage());           \
      return 1;                                                                                     \
    }                                                                                               \
  } while (0)

#ifndef QGRU_CAPI_EXPECT_CUDA
#error "test/CMakeLists.txt defines QGRU_CAPI_EXPECT_CUDA (1 when qgru is built with CUDA)"
#endif

enum { N = 32, K = 128, M = 64, G = 4 };

static unsigned long long rng_state = 12345u;
static float uniform(void) { /* xorshift64*, in [-1, 1) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (float)((double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* ||c - b.a||^2 / ||b.a||^2 over the whole output. */
static double relative_error(const float* a, const float* b, const float* c) {
  double err = 0.0, ref = 0.0;
  int n, m, k;
  for (n = 0; n < N; ++n) {
    for (m = 0; m < M; ++m) {
      double y = 0.0;
      for (k = 0; k < K; ++k) y += (double)b[n * K + k] * a[k * M + m];
      err += (y - c[n * M + m]) * (y - c[n * M + m]);
      ref += y * y;
    }
  }
  return ref > 0.0 ? err / ref : -1.0; /* -1: a zero reference, which the caller refuses */
}

static int contains(const char* text, const char* part) { return strstr(text, part) != NULL; }

/* The CUDA device type answers what this build and machine allow, by status and message; never a crash. */
static int check_cuda_device_type(qgruTensorDescriptor_t c_desc, qgruTensorDescriptor_t a_desc,
                                  qgruTensorDescriptor_t p_desc, qgruTensorDescriptor_t s_desc,
                                  qgruTensorDescriptor_t z_desc) {
  qgruHandle_t cuda = NULL;
  qgruQuantizeGPTQDescriptor_t desc = NULL;
  int count = -1;
  static float scratch[1];
  qgruStatus_t available = qgruGetDeviceCount(QGRU_DEVICE_CUDA, &count), created;
  CHECK_STATUS(qgruCreateHandle(&cuda, QGRU_DEVICE_CUDA, -1), QGRU_STATUS_BAD_PARAM);
  CHECK_STATUS(qgruCreateHandle(&cuda, QGRU_DEVICE_CUDA, 0), QGRU_STATUS_SUCCESS);
  created = qgruCreateQuantizeGPTQDescriptor(cuda, &desc, c_desc, a_desc, p_desc, s_desc, z_desc);
  if (!QGRU_CAPI_EXPECT_CUDA) {
    CHECK_STATUS(available, QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
    CHECK_STATUS(created, QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
    if (!contains(qgruGetLastErrorMessage(), "not built into this qgru")) {
      fprintf(stderr, "gptq_embed: unexpected message for a CUDA descriptor: %s\n", qgruGetLastErrorMessage());
      return 1;
    }
    printf("gptq_embed: CUDA device type: not built in (%s)\n", qgruGetLastErrorMessage());
  } else if (available == QGRU_STATUS_SUCCESS) {
    CHECK_STATUS(created, QGRU_STATUS_SUCCESS);
    /* GPTQ runs on a CUDA descriptor too; its arguments are checked before any device work: a 1-byte
       workspace is refused (the numbers: test_cuda_gpu's capi_linear and gptq checks). */
    CHECK_STATUS(qgruQuantizeGPTQ(desc, scratch, 1, scratch, scratch, scratch, scratch, scratch, NULL),
                 QGRU_STATUS_INSUFFICIENT_WORKSPACE);
    CHECK_STATUS(qgruDestroyQuantizeGPTQDescriptor(desc), QGRU_STATUS_SUCCESS);
    printf("gptq_embed: CUDA device type: %d GPU(s); descriptor created (numbers: test_cuda_gpu)\n", count);
  } else {
    CHECK_STATUS(available, QGRU_STATUS_DEVICE_UNAVAILABLE);
    CHECK_STATUS(created, QGRU_STATUS_DEVICE_UNAVAILABLE);
    if (count != 0 || !contains(qgruGetLastErrorMessage(), "no CUDA device: ")) {
      fprintf(stderr, "gptq_embed: count %d, message %s\n", count, qgruGetLastErrorMessage());
      return 1;
    }
    printf("gptq_embed: CUDA device type: no GPU present (%s)\n", qgruGetLastErrorMessage());
  }
  CHECK_STATUS(qgruDestroyHandle(cuda), QGRU_STATUS_SUCCESS);
  return 0;
}

int main(void) {
  static float a[K * M], b[N * K], scale[N * G], zero[N * G], c[N * M];
  static int packed[N * K / 8];
  qgruHandle_t handle = NULL, bad_handle = NULL;
  qgruTensorDescriptor_t c_desc, a_desc, p_desc, s_desc, z_desc, bad_desc = NULL;
  qgruQuantizeGPTQDescriptor_t desc = NULL;
  const int64_t c_shape[2] = {N, M}, a_shape[2] = {K, M}, p_shape[2] = {N, K / 8}, s_shape[2] = {N, G};
  size_t workspace_size = 0;
  void* workspace;
  double rel_plain, rel_options;
  int i, m, k, changed = 0;
  static int packed_plain[N * K / 8];

  /* Correlated inputs: 8 latent factors per token; weights uniform. */
  for (m = 0; m < M; ++m) {
    float latent[8];
    for (i = 0; i < 8; ++i) latent[i] = uniform();
    for (k = 0; k < K; ++k) a[k * M + m] = latent[k % 8] + 0.1f * uniform();
  }
  for (i = 0; i < N * K; ++i) b[i] = 0.05f * uniform();

  CHECK_STATUS(qgruCreateHandle(&bad_handle, (qgruDevice_t)42, 0), QGRU_STATUS_BAD_PARAM);
  CHECK_STATUS(qgruCreateTensorDescriptor(&bad_desc, (qgruDtype_t)42, 2, c_shape, NULL), QGRU_STATUS_BAD_TENSOR_DTYPE);

  CHECK_STATUS(qgruCreateHandle(&handle, QGRU_DEVICE_CPU, 0), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruCreateTensorDescriptor(&c_desc, QGRU_DTYPE_F32, 2, c_shape, NULL), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruCreateTensorDescriptor(&a_desc, QGRU_DTYPE_F32, 2, a_shape, NULL), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruCreateTensorDescriptor(&p_desc, QGRU_DTYPE_I32, 2, p_shape, NULL), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruCreateTensorDescriptor(&s_desc, QGRU_DTYPE_F32, 2, s_shape, NULL), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruCreateTensorDescriptor(&z_desc, QGRU_DTYPE_F32, 2, s_shape, NULL), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruCreateQuantizeGPTQDescriptor(handle, &desc, c_desc, a_desc, p_desc, s_desc, z_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruGetQuantizeGPTQWorkspaceSize(desc, &workspace_size), QGRU_STATUS_SUCCESS);
  workspace = malloc(workspace_size);
  if (!workspace) return 1;
  CHECK_STATUS(qgruQuantizeGPTQ(desc, workspace, workspace_size, packed, scale, zero, a, b, NULL), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruQuantizeLinearGPTQ(desc, workspace, workspace_size, c, a, packed, scale, zero, NULL), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruQuantizeLinearGPTQ(desc, workspace, workspace_size / 2, c, a, packed, scale, zero, NULL),
               QGRU_STATUS_INSUFFICIENT_WORKSPACE);

  /* The quantized layer's output against the float layer's: GPTQ keeps it close. */
  rel_plain = relative_error(a, b, c);
  printf("gptq_embed: N=%d K=%d M=%d groups=%d workspace=%zu bytes, ||C - W.A||^2 / ||W.A||^2 = %.3g\n", N, K, M, G,
         workspace_size, rel_plain);
  if (!(rel_plain >= 0.0 && rel_plain < 0.01)) {
    fprintf(stderr, "gptq_embed: relative output error %.3g, expected in [0, 0.01)\n", rel_plain);
    return 1;
  }

  /* Act-order and damping: bad values are refused, good ones change the codes and keep the layer close. */
  CHECK_STATUS(qgruSetQuantizeGPTQActOrder(desc, 7), QGRU_STATUS_BAD_PARAM);
  CHECK_STATUS(qgruSetQuantizeGPTQDamping(desc, -0.5), QGRU_STATUS_BAD_PARAM);
  CHECK_STATUS(qgruSetQuantizeGPTQDamping(desc, nan("")), QGRU_STATUS_BAD_PARAM);
  CHECK_STATUS(qgruSetQuantizeGPTQDamping(desc, 1.5), QGRU_STATUS_BAD_PARAM);
  if (!contains(qgruGetLastErrorMessage(), "damp 1.5, expected a finite value in [0, 1]")) {
    fprintf(stderr, "gptq_embed: unexpected damping message: %s\n", qgruGetLastErrorMessage());
    return 1;
  }
  CHECK_STATUS(qgruSetQuantizeGPTQActOrder(NULL, 1), QGRU_STATUS_NULL_POINTER);
  CHECK_STATUS(qgruSetQuantizeGPTQActOrder(desc, 1), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruSetQuantizeGPTQDamping(desc, 0.05), QGRU_STATUS_SUCCESS);
  memcpy(packed_plain, packed, sizeof packed);
  CHECK_STATUS(qgruQuantizeGPTQ(desc, workspace, workspace_size, packed, scale, zero, a, b, NULL), QGRU_STATUS_SUCCESS);
  for (i = 0; i < N * K / 8; ++i) changed += packed[i] != packed_plain[i];
  CHECK_STATUS(qgruQuantizeLinearGPTQ(desc, workspace, workspace_size, c, a, packed, scale, zero, NULL), QGRU_STATUS_SUCCESS);
  rel_options = relative_error(a, b, c);
  printf("gptq_embed: act-order, damp 0.05: %d of %d words changed, relative output error %.3g\n", changed, N * K / 8,
         rel_options);
  if (changed == 0 || !(rel_options >= 0.0 && rel_options < 0.01)) {
    fprintf(stderr, "gptq_embed: act-order/damping changed %d words, relative error %.3g (expected > 0 and < 0.01)\n",
            changed, rel_options);
    return 1;
  }
  free(workspace);

  /* Resident weights are for CUDA descriptors: a CPU descriptor reads the host weights on every call. */
  CHECK_STATUS(qgruSetQuantizeGPTQWeights(desc, packed, scale, zero, NULL), QGRU_STATUS_DEVICE_TYPE_NOT_SUPPORTED);
  CHECK_STATUS(qgruSetQuantizeGPTQWeights(NULL, packed, scale, zero, NULL), QGRU_STATUS_NULL_POINTER);

  if (check_cuda_device_type(c_desc, a_desc, p_desc, s_desc, z_desc) != 0) return 1;
  CHECK_STATUS(qgruDestroyQuantizeGPTQDescriptor(desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(c_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(a_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(p_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(s_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(z_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyHandle(handle), QGRU_STATUS_SUCCESS);
  return 0;
}
