/* Streaming example: classify the bundled handwritten digits (examples/digits) with the quantized GRU, one
 * image row (frame) at a time, as a product that receives its input frame by frame would. One stream: a
 * state is created once, stepped through the 8 rows of an image, read, and reset for the next image. The
 * classifier head (a float linear layer on the last h) is read from the float model's safetensors file.
 *
 *   stream_digits <model.qgru.json> <examples/digits folder>
 *
 * Prints the accuracy on the 597 held-out images and the time per step. C99, the runtime's C API only. */
#define _POSIX_C_SOURCE 199309L /* clock_gettime */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <qgru/qgru_runtime.h>

#include "npy_file.h"

#define CHECK_RT(call)                                                                           \
  do {                                                                                           \
    qgru_rt_status status_ = (call);                                                             \
    if (status_ != QGRU_RT_OK) {                                                                 \
      fprintf(stderr, "%s: %s\n", qgru_rt_status_name(status_), qgru_rt_last_error());         \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

/* One F32 tensor of a safetensors file (8-byte header length, JSON header, data) into a malloc'd array. */
static float* read_f32_tensor(const char* path, const char* name, long expected_count) {
  FILE* f = fopen(path, "rb");
  unsigned char len_bytes[8];
  unsigned long long header_len = 0;
  char key[128];
  char* header = NULL;
  const char *entry, *offsets;
  long begin, end;
  float* values = NULL;
  int i;
  if (!f || fread(len_bytes, 1, 8, f) != 8) goto fail;
  for (i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  if (header_len > 100000000ULL || !(header = malloc((size_t)header_len + 1))) goto fail;
  if (fread(header, 1, (size_t)header_len, f) != header_len) goto fail;
  header[header_len] = '\0';
  snprintf(key, sizeof key, "\"%s\"", name);
  if (!(entry = strstr(header, key)) || !(offsets = strstr(entry, "\"data_offsets\""))) goto fail;
  offsets += strlen("\"data_offsets\"");
  while (*offsets && (*offsets < '0' || *offsets > '9')) ++offsets;
  begin = strtol(offsets, (char**)&offsets, 10);
  while (*offsets && (*offsets < '0' || *offsets > '9')) ++offsets;
  end = strtol(offsets, NULL, 10);
  if (end - begin != expected_count * 4 || !(values = malloc((size_t)(end - begin)))) goto fail;
  if (fseek(f, (long)(8 + header_len) + begin, SEEK_SET) != 0 || fread(values, 4, (size_t)expected_count, f) != (size_t)expected_count) goto fail;
  free(header);
  fclose(f);
  return values;
fail:
  fprintf(stderr, "%s: cannot read the F32 tensor %s of %ld values\n", path, name, expected_count);
  exit(1);
}

static double seconds_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char** argv) {
  char path[4096];
  npy_array images, labels;
  qgru_rt_model* model = NULL;
  qgru_rt_context* context = NULL;
  qgru_rt_state* state = NULL;
  qgru_rt_shape shape;
  float *head_w, *head_b, *h;
  long T, N, n, t;
  int correct = 0, k, j;
  double elapsed = 0.0;
  if (argc != 3) {
    fprintf(stderr, "usage: %s <model.qgru.json> <examples/digits folder>\n", argv[0]);
    return 2;
  }
  if (!QGRU_RT_VERSION_COMPATIBLE()) {
    fprintf(stderr, "libqgru_runtime API %d does not implement this header's %d\n", qgru_rt_api_version(), QGRU_RT_API_VERSION);
    return 1;
  }
  CHECK_RT(qgru_rt_model_open(argv[1], &model));
  CHECK_RT(qgru_rt_model_shape(model, &shape));
  CHECK_RT(qgru_rt_context_create(model, NULL, &context));  /* CPU, the fast executor */
  CHECK_RT(qgru_rt_state_create(context, 1, &state));       /* one stream */

  snprintf(path, sizeof path, "%s/test.npy", argv[2]);
  if (!npy_read(path, &images) || strcmp(images.dtype, "f4") != 0 || images.ndim != 3 || images.shape[2] != shape.input_size) return 1;
  snprintf(path, sizeof path, "%s/test_labels.npy", argv[2]);
  if (!npy_read(path, &labels) || strcmp(labels.dtype, "i8") != 0 || labels.ndim != 1 || labels.shape[0] != images.shape[1]) return 1;
  snprintf(path, sizeof path, "%s/gru.safetensors", argv[2]);
  head_w = read_f32_tensor(path, "head.weight", 10L * shape.hidden_size);
  head_b = read_f32_tensor(path, "head.bias", 10);
  h = malloc(sizeof(float) * (size_t)shape.hidden_size);

  T = images.shape[0];
  N = images.shape[1];
  for (n = 0; n < N; ++n) {
    int best = 0;
    double best_logit = -INFINITY;
    CHECK_RT(qgru_rt_state_reset(state));
    for (t = 0; t < T; ++t) {  /* the frames arrive one at a time: row t of image n */
      const float* frame = (const float*)images.data + (t * N + n) * shape.input_size;
      const double start = seconds_now();
      CHECK_RT(qgru_rt_step(state, frame, 1, h));
      elapsed += seconds_now() - start;
    }
    for (k = 0; k < 10; ++k) {  /* the head on the last h */
      double logit = head_b[k];
      for (j = 0; j < shape.hidden_size; ++j) logit += (double)head_w[k * shape.hidden_size + j] * h[j];
      if (logit > best_logit) {
        best_logit = logit;
        best = k;
      }
    }
    correct += best == ((const int64_t*)labels.data)[n];
  }
  printf("streamed %ld images x %ld frames (%s): accuracy %.4f (%d/%ld), %.2f us per step\n", N, T,
         qgru_rt_context_describe(context), (double)correct / (double)N, correct, N, 1e6 * elapsed / (double)(N * T));
  qgru_rt_state_destroy(state);
  qgru_rt_context_destroy(context);
  qgru_rt_model_close(model);
  free(images.data);
  free(labels.data);
  free(head_w);
  free(head_b);
  free(h);
  return 0;
}
