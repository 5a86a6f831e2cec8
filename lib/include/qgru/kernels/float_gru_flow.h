#pragma once
// The CUDA float GRU's data flow (cuda/src/float_gru_cuda.cu), written once for host and device: the order of its
// operations (float_gru_flow), the cublasSgemm calls it makes, as descriptors, and the per-element bodies of its
// two kernels. test_kernels runs the same flow on the host (float_gru_flow_test.cpp: a plain GEMM in the
// descriptors' place) against run_float_gru, so the sequence and the layout arithmetic (which rows of R, which
// channels of the R·h buffer, which leading dimensions) are checked without a GPU.
//
// Buffers of one cell (floats, row-major as the CPU executor holds them):
//   W [3H, C], R [3H, H], bw / br [3H]       the cell's weights; gates z, r, n in that order
//   x [rows, C]                              the layer's input, rows = T·N time-major
//   ih [rows, 3H]                            W·x of every step, without bw
//   h [N, H]                                 the state
//   hh [N, 3H]                               R·h of the step, without br (linear_before_reset = 0: its n channels
//                                            hold R_n (r ⊙ h) instead, from reset_hidden)
//   reset_hidden [N, H]                      r ⊙ h (linear_before_reset = 0 only)
#include <cstdint>

#include "qgru/hd.h"
#include "qgru/model/float_gru_cell.h"

namespace qgru::kernels {

// One cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, 1, A + a_offset, lda, B, ldb, 0, C + c_offset, ldc) in
// the float GRU's form: for i < m, j < n, C[c_offset + i + ldc·j] = Σ_{q < k} A[a_offset + q + lda·i] · B[q + ldb·j]
// (column-major, A transposed): A is a weight matrix stored row-major [rows, k] (row i of it is weight row i),
// B holds n vectors of k values, C gets n rows of ldc values, of which columns c_offset .. c_offset + m - 1.
struct FloatGemm {
  int64_t m, n, k;
  int64_t a_offset, lda;  // into the weight matrix
  int64_t ldb;
  int64_t c_offset, ldc;  // into the output rows
};

// W·x of every step: ih [rows, 3H] = x [rows, C] · W^T.
inline FloatGemm float_gru_input_gemm(int64_t H, int64_t C, int64_t rows) { return {3 * H, rows, C, 0, C, C, 0, 3 * H}; }

// R·h of a step into hh [N, 3H]: every gate's rows, or (linear_before_reset = 0) the z and r rows only, R's first
// 2H, leaving hh's n channels to float_gru_reset_gemm.
inline FloatGemm float_gru_hidden_gemm(int64_t H, int64_t N, bool linear_before_reset) {
  return {linear_before_reset ? 3 * H : 2 * H, N, H, 0, H, H, 0, 3 * H};
}

// linear_before_reset = 0: R_n (r ⊙ h), R's last H rows applied to reset_hidden [N, H], into hh's n channels.
inline FloatGemm float_gru_reset_gemm(int64_t H, int64_t N) { return {H, N, H, 2 * H * H, H, H, 2 * H, 3 * H}; }

// A linear's value plus its bias, W x + bw or R h + br: the sum rounded to float once, as the CPU executor adds
// the bias in double.
QGRU_HD float float_gru_with_bias(float linear, float bias) {
  return static_cast<float>(static_cast<double>(linear) + static_cast<double>(bias));
}

// The step kernel's element idx = n·H + j of [N, H] (one thread each): the cell through float_gru_cell_element from
// ih_t [N, 3H] (this step's rows of ih) and hh, h[idx] replaced by the new state and out_t[n·out_stride +
// out_offset + j] (the step's row of the layer output [T, N, D·H]) written. lengths [N] or null: a row with
// t >= lengths[n] is padding (qgru::row_is_valid): its state stays and its output is 0, as in run_float_gru. Each
// element reads and writes only h[idx] and its own output: no ordering between threads.
QGRU_HD void float_gru_step_at(int64_t idx, int64_t H, const float* ih_t, const float* hh, const float* bw,
                               const float* br, float* h, float* out_t, int64_t out_stride, int64_t out_offset,
                               bool linear_before_reset, const int32_t* lengths, int64_t t) {
  const int64_t n = idx / H, j = idx % H;
  float* out = out_t + n * out_stride + out_offset + j;
  if (lengths != nullptr && t >= lengths[n]) {
    *out = 0.0f;
    return;
  }
  float ih[3], hr[3];
  for (int g = 0; g < 3; ++g) {
    const int64_t c = g * H + j;
    ih[g] = float_gru_with_bias(ih_t[n * 3 * H + c], bw[c]);
    hr[g] = float_gru_with_bias(hh[n * 3 * H + c], br[c]);
  }
  const FloatGruElement e = float_gru_cell_element(ih[0], ih[1], ih[2], hr[0], hr[1], hr[2], h[idx], linear_before_reset);
  h[idx] = e.h_new;
  *out = e.h_new;
}

// The linear_before_reset = 0 cell's first half-step, element idx = n·H + j: reset_hidden[idx] = r ⊙ h through the
// CPU executor's element (float_gru_reset_hidden), from the r channels of ih_t and hh (hh's n channels are not
// written yet). Padded rows compute it too; their state does not change and the step ignores them.
QGRU_HD void float_gru_reset_hidden_at(int64_t idx, int64_t H, const float* ih_t, const float* hh, const float* bw,
                                       const float* br, const float* h, float* reset_hidden) {
  const int64_t n = idx / H, c = H + idx % H;  // the r channel of unit j
  reset_hidden[idx] = float_gru_reset_hidden(float_gru_with_bias(ih_t[n * 3 * H + c], bw[c]),
                                             float_gru_with_bias(hh[n * 3 * H + c], br[c]), h[idx]);
}

// Where one call's buffers are (device pointers on the GPU, host ones in the test), as listed at the top.
struct FloatGruFlowBuffers {
  float* layer_in;         // [T·N, max(C, D·H)]: x, then each layer's output in turn
  float* layer_out;        // the other of the pair
  float* ih;               // [T·N, 3H]
  float* hh;               // [N, 3H]
  float* h;                // [N, H]
  float* reset_hidden;     // [N, H] (linear_before_reset = 0)
};
enum class FloatGruWeights { W, R };

// One call of the float GRU, in the order FloatGruCuda issues it on its one stream (each operation after the
// previous one has finished); `ops` carries each out, on the device or on the host:
//   ops.gemm(cell, FloatGruWeights, const FloatGemm&, const float* B, float* C)     B, C: the descriptor's operands
//   ops.load_state(cell, float* h)                 the cell's rows of h0 into h, or zeros
//   ops.reset_hidden(const float* ih_t, const float* hh, const float* h, float* reset_hidden, cell)
//                                                  float_gru_reset_hidden_at over the N·H elements
//   ops.step(const float* ih_t, const float* hh, float* h, float* out_t, int64_t out_stride, int64_t out_offset,
//            int64_t t, cell)                      float_gru_step_at over the N·H elements (with the call's lengths)
//   ops.save_state(cell, const float* h)           h into the cell's rows of h_n
// cell = layer · D + direction. Layer l reads layer_in (x for l = 0, C inputs; D·H after), writes layer_out, and the
// two swap. Returns the buffer that holds the last layer's output [T, N, D·H].
template <class Ops>
float* float_gru_flow(int64_t C, int64_t H, int64_t L, int64_t D, int64_t T, int64_t N, bool linear_before_reset,
                      FloatGruFlowBuffers b, Ops& ops) {
  const FloatGemm hidden = float_gru_hidden_gemm(H, N, linear_before_reset);
  const FloatGemm reset = float_gru_reset_gemm(H, N);
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t dir = 0; dir < D; ++dir) {
      const int64_t cell = l * D + dir;
      ops.gemm(cell, FloatGruWeights::W, float_gru_input_gemm(H, l == 0 ? C : D * H, T * N), b.layer_in, b.ih);
      ops.load_state(cell, b.h);
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = dir == 0 ? s : T - 1 - s;
        const float* ih_t = b.ih + t * N * 3 * H;
        ops.gemm(cell, FloatGruWeights::R, hidden, b.h, b.hh);  // R·h (linear_before_reset = 0: z and r only)
        if (!linear_before_reset) {
          ops.reset_hidden(ih_t, b.hh, b.h, b.reset_hidden, cell);
          ops.gemm(cell, FloatGruWeights::R, reset, b.reset_hidden, b.hh);  // R_n (r ⊙ h) into hh's n channels
        }
        ops.step(ih_t, b.hh, b.h, b.layer_out + t * N * D * H, D * H, dir * H, t, cell);
      }
      ops.save_state(cell, b.h);
    }
    float* const swap = b.layer_in;  // layer l's output is layer l + 1's input
    b.layer_in = b.layer_out;
    b.layer_out = swap;
  }
  return b.layer_in;
}

}  // namespace qgru::kernels
