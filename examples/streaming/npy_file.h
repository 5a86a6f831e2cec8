/* A small reader of NumPy .npy files for the streaming example and the install test: version 1 or 2
 * headers, little-endian float32 ('<f4'), int64 ('<i8') or integer codes of up to 32 bits ('|i1', '|u1',
 * '<i2', '<u2', '<i4': `qgru run --codes` writes the narrowest that holds them), read as int32 ("i4"), in
 * C order, up to four dimensions. Header-only C99; one error line on stderr and NULL on anything else. */
#ifndef QGRU_EXAMPLE_NPY_FILE_H_
#define QGRU_EXAMPLE_NPY_FILE_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct npy_array {
  char dtype[4];  /* "f4", "i4" (every integer dtype of up to 32 bits, widened) or "i8" */
  int ndim;
  long shape[4];
  long count;     /* product of the shape */
  void* data;     /* count elements, free() it */
} npy_array;

static int npy_fail(const char* path, const char* what) {
  fprintf(stderr, "%s: %s\n", path, what);
  return 0;
}

/* Reads `path` into *out; returns 1, or 0 after printing why not. */
static int npy_read(const char* path, npy_array* out) {
  FILE* f = fopen(path, "rb");
  unsigned char pre[10];
  char header[4096];
  unsigned long header_len;
  const char *descr, *shape;
  size_t elem, header_bytes;
  int ok = 0;
  memset(out, 0, sizeof *out);
  if (!f) return npy_fail(path, "cannot open");
  if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) goto done;
  header_bytes = pre[6] == 1 ? 2 : 4;
  if (fread(pre, 1, header_bytes, f) != header_bytes) goto done;
  header_len = header_bytes == 2 ? (unsigned long)(pre[0] | pre[1] << 8)
                                 : (unsigned long)pre[0] | (unsigned long)pre[1] << 8 | (unsigned long)pre[2] << 16 |
                                       (unsigned long)pre[3] << 24;
  if (header_len >= sizeof header || fread(header, 1, header_len, f) != header_len) goto done;
  header[header_len] = '\0';
  descr = strstr(header, "'descr': '");
  shape = strstr(header, "'shape': (");
  if (!descr || !shape || !strstr(header, "'fortran_order': False")) goto done;
  descr += 10;
  if (descr[0] != '<' && descr[0] != '|') goto done;
  memcpy(out->dtype, descr + 1, 2);
  out->dtype[2] = '\0';
  if (strcmp(out->dtype, "f4") == 0 || strcmp(out->dtype, "i4") == 0) {
    elem = 4;
  } else if (strcmp(out->dtype, "i8") == 0) {
    elem = 8;
  } else if (strcmp(out->dtype, "i2") == 0 || strcmp(out->dtype, "u2") == 0) {
    elem = 2;
  } else if (strcmp(out->dtype, "i1") == 0 || strcmp(out->dtype, "u1") == 0) {
    elem = 1;
  } else {
    goto done;
  }
  shape += 10;
  out->count = 1;
  while (*shape != ')') {
    char* end;
    long n = strtol(shape, &end, 10);
    if (end == shape || out->ndim == 4 || n < 0) goto done;
    out->shape[out->ndim++] = n;
    out->count *= n;
    shape = end;
    while (*shape == ',' || *shape == ' ') ++shape;
  }
  out->data = malloc((size_t)out->count * (elem < 4 ? 4 : elem) + 1);
  if (out->data && fread(out->data, elem, (size_t)out->count, f) == (size_t)out->count) ok = 1;
  if (ok && elem < 4) { /* widen in place, from the last element down (little-endian bytes as read) */
    const unsigned char* bytes = (const unsigned char*)out->data;
    int32_t* wide = (int32_t*)out->data;
    long i;
    for (i = out->count - 1; i >= 0; --i) {
      const unsigned char* b = bytes + (size_t)i * elem;
      wide[i] = strcmp(out->dtype, "i1") == 0   ? (int32_t)(signed char)b[0]
                : strcmp(out->dtype, "u1") == 0 ? (int32_t)b[0]
                : strcmp(out->dtype, "i2") == 0 ? (int32_t)(int16_t)(uint16_t)(b[0] | b[1] << 8)
                                                : (int32_t)(b[0] | b[1] << 8);
    }
    strcpy(out->dtype, "i4");
  }
done:
  fclose(f);
  if (!ok) {
    free(out->data);
    out->data = NULL;
    return npy_fail(path, "not a C-order little-endian f4/i8 or integer-code .npy of at most 4 dimensions");
  }
  return 1;
}

#endif /* QGRU_EXAMPLE_NPY_FILE_H_ */
