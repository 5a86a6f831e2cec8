/* An embedder's use of the qgru GPTQ C API, in plain C11: quantize a layer, run the quantized linear, check
 * the output against the float layer, and exercise the statuses that only C can reach (enum values that
 * are not in the header). Exit 0 when everything holds, 1 with a message otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

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

enum { N = 32, K = 128, M = 64, G = 4 };

static unsigned long long rng_state = 12345u;
static float uniform(void) { /* xorshift64*, in [-1, 1) */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return (float)((double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0);
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
  double err = 0.0, ref = 0.0;
  int i, n, m, k;

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
  for (n = 0; n < N; ++n) {
    for (m = 0; m < M; ++m) {
      double y = 0.0;
      for (k = 0; k < K; ++k) y += (double)b[n * K + k] * a[k * M + m];
      err += (y - c[n * M + m]) * (y - c[n * M + m]);
      ref += y * y;
    }
  }
  printf("gptq_embed: N=%d K=%d M=%d groups=%d workspace=%zu bytes, ||C - W.A||^2 / ||W.A||^2 = %.3g\n", N, K, M, G,
         workspace_size, err / ref);
  if (!(ref > 0.0) || !(err / ref < 0.01)) {
    fprintf(stderr, "gptq_embed: relative output error %.3g, expected < 0.01\n", err / ref);
    return 1;
  }
  free(workspace);
  CHECK_STATUS(qgruDestroyQuantizeGPTQDescriptor(desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(c_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(a_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(p_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(s_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyTensorDescriptor(z_desc), QGRU_STATUS_SUCCESS);
  CHECK_STATUS(qgruDestroyHandle(handle), QGRU_STATUS_SUCCESS);
  return 0;
}
