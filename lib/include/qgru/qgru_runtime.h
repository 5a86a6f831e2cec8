/* qgru runtime C API: run a quantized GRU artifact (made by `qgru quantize`) in a product, whole sequences or
 * streamed frame by frame with the state kept by the caller. C99; every integer result is the code the
 * reference integer executor computes (docs/FIXED_POINT.md), whichever executor and device run it.
 * docs/RUNTIME.md shows it in use; include it as <qgru/qgru_runtime.h>, link qgru::runtime (CMake) or
 * `pkg-config --libs qgru-runtime`.
 *
 * Objects (opaque handles):
 *   qgru_rt_model    an artifact, read and checked (immutable; share it between threads freely)
 *   qgru_rt_context  a model prepared for one device and executor (weights packed once); run and state
 *                    creation may be called on one context from several threads at once
 *   qgru_rt_state    the h codes of every layer of N streams, and the working memory of step: one thread
 *                    at a time per state; any number of states per context, each on its own thread
 * Handles keep what they were made from alive: a model may be closed while contexts made from it exist, a
 * context destroyed while its states exist (the last handle frees them).
 *
 * Shapes, all arrays dense and row-major, host memory for every device:
 *   x      [T, N, C] float values, or codes in layer 0's x space (qgru_rt_model_quant(X, 0, 0))
 *   y      [T, N, D*H] the last layer's h, direction d at columns [d*H, (d+1)*H), codes in cell (L-1, d)'s
 *          h space, or their dequantized values
 *   h0/h_n [L*D, N, H] one block per cell (layer l, direction d) at l*D + d, codes in that cell's h space
 *   state  [L, N, H] (unidirectional models), layer l's codes in cell (l, 0)'s h space: the h_n of the
 *          frames streamed so far
 * C = input_size, H = hidden_size, L = num_layers, D = num_directions, T frames, N independent sequences.
 *
 * Streaming. qgru_rt_step_codes advances a state by F >= 1 frames and gives the same codes as running the
 * concatenation of all frames streamed since the last reset as one sequence from that state's start
 * (tested on every preset, multi-layer). Bidirectional models cannot stream (a reverse direction reads its
 * sequence from the end): qgru_rt_state_create answers QGRU_RT_NOT_SUPPORTED. On a CPU context stepping
 * allocates no memory: everything it needs is allocated by qgru_rt_state_create. It runs on the calling
 * thread (the context's thread count applies to whole-sequence runs).
 *
 * Errors. Every function returns a status; no C++ exception crosses this boundary. qgru_rt_last_error()
 * says what was wrong in one line (the file, the tensor or argument, the value and what was expected),
 * thread-local, valid until the next call of this API on the same thread. A failed call leaves every handle
 * as it was (a refused step leaves its state unchanged); its output arrays may have been partly written.
 *
 * Versions. QGRU_RT_API_VERSION is this header's; qgru_rt_api_version() the library's. Within one major
 * version the functions, structs and enum values of this header stay as they are; minor versions only add
 * (new functions, new enum values). QGRU_RT_VERSION_COMPATIBLE() checks a library against the header. */
#ifndef QGRU_QGRU_RUNTIME_H_
#define QGRU_QGRU_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#define QGRU_RT_API_VERSION_MAJOR 1
#define QGRU_RT_API_VERSION_MINOR 1
#define QGRU_RT_API_VERSION (QGRU_RT_API_VERSION_MAJOR * 1000 + QGRU_RT_API_VERSION_MINOR)
/* True when the linked library implements this header: the same major version, a minor one at least as new. */
#define QGRU_RT_VERSION_COMPATIBLE()                                        \
  (qgru_rt_api_version() / 1000 == QGRU_RT_API_VERSION_MAJOR &&            \
   qgru_rt_api_version() % 1000 >= QGRU_RT_API_VERSION_MINOR)

/* The enums have the underlying type int in C++ as in C, so that a value read from C is defined in C++. */
#ifdef __cplusplus
#define QGRU_RT_ENUM_BASE : int
extern "C" {
#else
#define QGRU_RT_ENUM_BASE
#endif

typedef enum QGRU_RT_ENUM_BASE {
  QGRU_RT_OK = 0,
  QGRU_RT_INVALID_ARGUMENT = 1,   /* a NULL pointer, a size <= 0, an unknown enum value, a layer out of range */
  QGRU_RT_BAD_ARTIFACT = 2,       /* the artifact cannot be read or fails a check (the message names the file
                                     and the key or tensor) */
  QGRU_RT_CODE_OUT_OF_RANGE = 3,  /* an input or state code outside its tensor's code range */
  QGRU_RT_NOT_SUPPORTED = 4,      /* a valid request this model or device cannot do (streaming a bidirectional
                                     model; a cell the CUDA kernels do not cover) */
  QGRU_RT_DEVICE_NOT_BUILT = 5,   /* the device type is not built into this library (CUDA without nvcc) */
  QGRU_RT_DEVICE_UNAVAILABLE = 6, /* built in, but no usable device (none, or device_id out of range) */
  QGRU_RT_EXECUTION_FAILED = 7,   /* a device call failed (the message names it) */
  QGRU_RT_OUT_OF_MEMORY = 8,
  QGRU_RT_INTERNAL_ERROR = 9
} qgru_rt_status;

typedef enum QGRU_RT_ENUM_BASE { QGRU_RT_DEVICE_CPU = 0, QGRU_RT_DEVICE_CUDA = 1 } qgru_rt_device;

typedef enum QGRU_RT_ENUM_BASE {
  QGRU_RT_EXECUTOR_FAST = 0,     /* CPU: the SIMD executor (AVX2 / AVX-512 VNNI) where the CPU and the model allow
                                    it, else the reference (qgru_rt_context_describe says which and why) */
  QGRU_RT_EXECUTOR_REFERENCE = 1 /* CPU: the obviously-right integer executor (the specification; slower) */
} qgru_rt_executor;

typedef enum QGRU_RT_ENUM_BASE {
  QGRU_RT_TENSOR_X = 0, /* a cell's input codes (layer 0's: the model's input) */
  QGRU_RT_TENSOR_H = 1  /* a cell's state and output codes */
} qgru_rt_tensor;

typedef struct qgru_rt_model qgru_rt_model;
typedef struct qgru_rt_context qgru_rt_context;
typedef struct qgru_rt_state qgru_rt_state;

typedef struct qgru_rt_shape {
  int input_size;     /* C */
  int hidden_size;    /* H */
  int num_layers;     /* L */
  int num_directions; /* D: 1, or 2 for a bidirectional model */
  int output_size;    /* D*H, a row of y */
} qgru_rt_shape;

/* A tensor's quantization: value = (code - zero_point) * 2^-shift; code = clamp(round(value * 2^shift) +
 * zero_point, code_min, code_max), rounding half away from zero. */
typedef struct qgru_rt_quant {
  int bits;        /* 2..16 */
  int is_unsigned; /* 1: codes in [0, 2^bits - 1]; 0: [-2^(bits-1), 2^(bits-1) - 1] */
  int shift;       /* scale = 2^-shift */
  int32_t zero_point;
  int32_t code_min, code_max;
  double scale;    /* 2^-shift */
} qgru_rt_quant;

typedef struct qgru_rt_context_options {
  qgru_rt_device device;     /* default QGRU_RT_DEVICE_CPU */
  int device_id;             /* CUDA device ordinal (default 0; ignored on the CPU) */
  int threads;               /* CPU whole-sequence runs: 0 (default) = the hardware's thread count; step
                                always runs on the calling thread */
  qgru_rt_executor executor; /* default QGRU_RT_EXECUTOR_FAST (CPU only; CUDA runs its own kernels) */
} qgru_rt_context_options;

/* ---- versions and errors ---------------------------------------------------------------------------- */
int qgru_rt_api_version(void);             /* QGRU_RT_API_VERSION of the library */
const char* qgru_rt_library_version(void); /* qgru's version, e.g. "0.1.0" */
const char* qgru_rt_status_name(qgru_rt_status status); /* "QGRU_RT_OK", ...; never NULL */
const char* qgru_rt_last_error(void);      /* this thread's last failure ("" after a success); never NULL */

/* ---- models ------------------------------------------------------------------------------------------ */
/* Reads model.qgru.json and the tensor file it names (beside it), with every check `qgru run` makes (schema
 * version, sha256 of the tensor file, shapes, dtypes, code ranges, the overflow proof). BAD_ARTIFACT. */
qgru_rt_status qgru_rt_model_open(const char* json_path, qgru_rt_model** model);
/* The same from memory: the JSON text (json_size bytes, no terminator needed) and the tensor file's bytes.
 * Both buffers may be freed after the call. */
qgru_rt_status qgru_rt_model_open_memory(const char* json, size_t json_size, const void* tensors, size_t tensors_size,
                                         qgru_rt_model** model);
void qgru_rt_model_close(qgru_rt_model* model); /* NULL: nothing */
qgru_rt_status qgru_rt_model_shape(const qgru_rt_model* model, qgru_rt_shape* shape);
/* The quantization of X or H of cell (layer, direction). Every direction of a layer shares its X. */
qgru_rt_status qgru_rt_model_quant(const qgru_rt_model* model, qgru_rt_tensor tensor, int layer, int direction,
                                   qgru_rt_quant* quant);

/* ---- contexts ---------------------------------------------------------------------------------------- */
qgru_rt_context_options qgru_rt_context_options_default(void);
/* options NULL: the defaults. CPU: packs the weights for the chosen executor. CUDA: uploads them (DEVICE_NOT_BUILT,
 * DEVICE_UNAVAILABLE, NOT_SUPPORTED naming the cell). */
qgru_rt_status qgru_rt_context_create(const qgru_rt_model* model, const qgru_rt_context_options* options,
                                      qgru_rt_context** context);
void qgru_rt_context_destroy(qgru_rt_context* context); /* NULL: nothing */
/* What runs, e.g. "cpu fast (avx512-vnni)", "cpu reference (requested)", "cuda:0 (l0.d0 int8 cuBLAS)"; valid
 * while the context lives; never NULL (the empty string for a NULL context). */
const char* qgru_rt_context_describe(const qgru_rt_context* context);

/* ---- whole sequences --------------------------------------------------------------------------------- */
/* x_codes [T, N, C] (range-checked: CODE_OUT_OF_RANGE); h0_codes [L*D, N, H] or NULL for the code of 0.0;
 * y_codes [T, N, D*H] and hn_codes [L*D, N, H] written when not NULL. T >= 0, N >= 1. */
qgru_rt_status qgru_rt_run_codes(const qgru_rt_context* context, const int32_t* x_codes, int T, int N,
                                 const int32_t* h0_codes, int32_t* y_codes, int32_t* hn_codes);
/* The same on float values: x and h0 quantized with their tensors' parameters (saturating), y and h_n dequantized. */
qgru_rt_status qgru_rt_run(const qgru_rt_context* context, const float* x, int T, int N, const float* h0, float* y,
                           float* h_n);
/* Padded batches (API 1.1): lengths [N], sequence n's frames are the steps t < lengths[n], each length in
 * [0, T] (INVALID_ARGUMENT naming the sequence otherwise). At a step t >= lengths[n] sequence n's state stays as
 * it was and its y row is the code of 0.0 (the zero point of H; 0.0 in qgru_rt_run_lengths); its h_n is its
 * state after its last frame; a reverse direction starts at its last frame. So every sequence gets the codes
 * it gets when run alone over its own frames (`qgru run --lengths`; docs/ONNX.md: ONNX's sequence_lens).
 * lengths NULL: every sequence has T frames (qgru_rt_run_codes, qgru_rt_run). */
qgru_rt_status qgru_rt_run_codes_lengths(const qgru_rt_context* context, const int32_t* x_codes, int T, int N,
                                         const int32_t* lengths, const int32_t* h0_codes, int32_t* y_codes,
                                         int32_t* hn_codes);
qgru_rt_status qgru_rt_run_lengths(const qgru_rt_context* context, const float* x, int T, int N,
                                   const int32_t* lengths, const float* h0, float* y, float* h_n);

/* ---- streaming --------------------------------------------------------------------------------------- */
/* A state for N >= 1 streams of a unidirectional model, every code that of 0.0 (NOT_SUPPORTED for a
 * bidirectional model). Allocates all the working memory the state's steps need. */
qgru_rt_status qgru_rt_state_create(const qgru_rt_context* context, int N, qgru_rt_state** state);
void qgru_rt_state_destroy(qgru_rt_state* state); /* NULL: nothing */
qgru_rt_status qgru_rt_state_reset(qgru_rt_state* state); /* every code back to that of 0.0 (zero_point of H) */
/* The state's codes [L, N, H] out, or in (range-checked against each layer's H: CODE_OUT_OF_RANGE). */
qgru_rt_status qgru_rt_state_get_codes(const qgru_rt_state* state, int32_t* h_codes);
qgru_rt_status qgru_rt_state_set_codes(qgru_rt_state* state, const int32_t* h_codes);
/* Advance by `frames` >= 1 frames: x_codes [frames, N, C] (every code checked before the state changes);
 * y_codes [frames, N, H] the last layer's codes after each frame, written when not NULL. */
qgru_rt_status qgru_rt_step_codes(qgru_rt_state* state, const int32_t* x_codes, int frames, int32_t* y_codes);
/* The same on float values: x [frames, N, C] quantized (saturating), y [frames, N, H] dequantized. */
qgru_rt_status qgru_rt_step(qgru_rt_state* state, const float* x, int frames, float* y);

#ifdef __cplusplus
}
#endif

#endif /* QGRU_QGRU_RUNTIME_H_ */
