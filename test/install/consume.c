/* Built against the INSTALLED runtime with plain cc + pkg-config --static (test/install/consume.sh): streams
 * x [T, N, C] (float32 .npy) through one state of N streams, a frame at a time, quantizing each frame itself
 * with the model's x parameters as the header states the rule, and compares every output code with
 * `qgru run --codes` ([T, N, H] int32 .npy). Exit 0 when all are equal. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <qgru/qgru_runtime.h>

#include "npy_file.h"

static int fail(const char* what, qgru_rt_status status) {
  fprintf(stderr, "consume.c: %s: %s: %s\n", what, qgru_rt_status_name(status), qgru_rt_last_error());
  return 1;
}

int main(int argc, char** argv) {
  npy_array x, want;
  qgru_rt_model* model = NULL;
  qgru_rt_context* context = NULL;
  qgru_rt_state* state = NULL;
  qgru_rt_shape shape;
  qgru_rt_quant xq;
  qgru_rt_status st;
  int32_t *frame_codes, *y;
  long T, N, C, H, t, i, mismatches = 0;
  if (argc != 4) return 2;
  if (!QGRU_RT_VERSION_COMPATIBLE()) return 1;
  if (!npy_read(argv[2], &x) || !npy_read(argv[3], &want)) return 1;
  if ((st = qgru_rt_model_open(argv[1], &model)) != QGRU_RT_OK) return fail("open", st);
  if ((st = qgru_rt_model_shape(model, &shape)) != QGRU_RT_OK) return fail("shape", st);
  if ((st = qgru_rt_model_quant(model, QGRU_RT_TENSOR_X, 0, 0, &xq)) != QGRU_RT_OK) return fail("quant", st);
  T = x.shape[0];
  N = x.shape[1];
  C = shape.input_size;
  H = shape.hidden_size;
  if (x.ndim != 3 || x.shape[2] != C || want.ndim != 3 || want.shape[0] != T || want.shape[1] != N || want.shape[2] != H) {
    fprintf(stderr, "consume.c: shapes do not match the model\n");
    return 1;
  }
  if ((st = qgru_rt_context_create(model, NULL, &context)) != QGRU_RT_OK) return fail("context", st);
  if ((st = qgru_rt_state_create(context, (int)N, &state)) != QGRU_RT_OK) return fail("state", st);
  frame_codes = malloc(sizeof(int32_t) * (size_t)(N * C));
  y = malloc(sizeof(int32_t) * (size_t)(N * H));
  for (t = 0; t < T; ++t) {
    for (i = 0; i < N * C; ++i) {  /* code = clamp(round(x * 2^shift) + zp), round half away from zero */
      double q = round(ldexp(((const float*)x.data)[t * N * C + i], xq.shift)) + xq.zero_point;
      frame_codes[i] = (int32_t)(q < xq.code_min ? xq.code_min : q > xq.code_max ? xq.code_max : q);
    }
    if ((st = qgru_rt_step_codes(state, frame_codes, 1, y)) != QGRU_RT_OK) return fail("step", st);
    for (i = 0; i < N * H; ++i) mismatches += y[i] != ((const int32_t*)want.data)[t * N * H + i];
  }
  printf("consume.c (%s): %ld frames x %ld streams streamed, %ld codes differ from qgru run --codes\n",
         qgru_rt_context_describe(context), T, N, mismatches);
  qgru_rt_state_destroy(state);
  qgru_rt_context_destroy(context);
  qgru_rt_model_close(model);
  free(frame_codes);
  free(y);
  free(x.data);
  free(want.data);
  return mismatches == 0 && T > 0 ? 0 : 1;
}
