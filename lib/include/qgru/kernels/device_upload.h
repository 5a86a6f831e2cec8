#pragma once
// What the CUDA executors upload at construction, and in which order (cuda/src: GruCellCuda, QuantLinear,
// FloatGruCuda). Plain C++ over an Uploader, so the CPU tests run the very sequence the constructors run with a
// recording uploader (test/unit/kernels/device_upload_test.cpp).
//
// The ordering rule. Every upload of a constructor is a cudaMemcpyAsync on ONE stream (the executor's own
// stream; the legacy default stream for QuantLinear, whose run() takes the caller's stream), and the upload
// sequence ENDS with one cudaStreamSynchronize of that stream (Uploader::finish). When the constructor
// returns, every byte is on the device, so a kernel on any stream — the executor's cudaStreamNonBlocking stream
// (which does not wait for the legacy stream), a caller's stream — reads the weights and never what the
// allocation held before. (A plain cudaMemcpy from pageable memory may return before its DMA has finished, and
// a non-blocking stream is not ordered after it: the race this rule closes.) No upload may follow finish().
// Host memory passed to put() must stay valid until finish(); vectors passed by value are kept by the uploader.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "qgru/fixed/activation_buckets.h"
#include "qgru/fixed/gru_cell.h"
#include "qgru/kernels/gru_step.h"
#include "qgru/kernels/stripe_linear.h"

namespace qgru::kernels {

class Uploader {
 public:
  virtual ~Uploader() = default;
  // Allocates `bytes` on the device and issues the copy from `host`; returns the device address.
  virtual const void* put_bytes(const void* host, size_t bytes) = 0;
  // As put_bytes, keeping `host` alive until finish().
  virtual const void* put_kept(std::vector<char> host) = 0;
  // Waits until every copy issued so far has landed on the device. The last call of an upload sequence.
  virtual void finish() = 0;

  template <typename T>
  const T* put(const T* host, int64_t count) {
    return static_cast<const T*>(put_bytes(host, static_cast<size_t>(count) * sizeof(T)));
  }
  template <typename T>
  const T* put(const std::vector<T>& host) {
    const char* first = reinterpret_cast<const char*>(host.data());
    return static_cast<const T*>(put_kept(std::vector<char>(first, first + host.size() * sizeof(T))));
  }
};

// The device copy of one activation (table, or piecewise-linear segments with their bucket index).
inline ActivationView upload_activation(const ActivationView& a, Uploader& up) {
  ActivationView d = a;
  if (a.impl == ActivationImpl::Table) {
    d.table = up.put(a.table, static_cast<int64_t>(a.q_in_max) - a.q_in_min + 1);
  } else {
    d.pwl_threshold = up.put(a.pwl_threshold, a.num_segments);
    d.pwl_q_b = up.put(a.pwl_q_b, a.num_segments);
    d.pwl_term_c = up.put(a.pwl_term_c, a.num_segments);
    d.pwl_shift = up.put(a.pwl_shift, a.num_segments);
    // The bucket index (qgru/fixed/activation_buckets.h): the same segments, fewer dependent loads.
    const PwlBuckets buckets = pwl_buckets(a);
    d.pwl_bucket = up.put(buckets.first_segment);
    d.pwl_bucket_shift = buckets.shift;
  }
  return d;
}

// One GRU cell on the device: the parameter view with every array pointer replaced by its device copy, and the
// packed weights of the cell's GEMM path (int8 [rows_p, C_p] / [rows_p, H_p] for the cuBLAS path, int16 for the
// wide kernel; layouts from plan_gru_gemm / plan_gru_wide), and for the linear_before_reset = 0 cell R's n rows
// packed again ([rows_n_p, H_p], the second GEMM's weights), in the same upload right after the packed R.
struct GruCellUpload {
  GruCellParamsView view{};
  const void* W = nullptr;
  const void* R = nullptr;
  const void* Rn = nullptr;  // null for the linear_before_reset = 1 cell
};

// The whole upload of GruCellCuda's constructor, ending with up.finish().
inline GruCellUpload upload_gru_cell(const GruCellParamsView& v, const int32_t* q_W, const int32_t* q_R, int64_t C,
                                     GruGemmPath path, Uploader& up) {
  const int64_t H = v.hidden_size, rows = 3 * H;
  GruCellUpload u;
  u.view = v;
  u.view.W_sum = up.put(v.W_sum, rows);
  u.view.q_bw = up.put(v.q_bw, rows);
  u.view.shift_bw_to_gemm_x = up.put(v.shift_bw_to_gemm_x, rows);
  u.view.shift_gemm_x_to_weight_ih_linear = up.put(v.shift_gemm_x_to_weight_ih_linear, rows);
  u.view.R_sum = up.put(v.R_sum, rows);
  u.view.q_br = up.put(v.q_br, rows);
  u.view.shift_br_to_gemm_h = up.put(v.shift_br_to_gemm_h, rows);
  u.view.shift_gemm_h_to_weight_hh_linear = up.put(v.shift_gemm_h_to_weight_hh_linear, rows);
  if (v.multiplier_scales) {  // the per-channel multipliers of a multiplier-scale cell (null, never read, otherwise)
    u.view.multiplier_bw_to_gemm_x = up.put(v.multiplier_bw_to_gemm_x, rows);
    u.view.multiplier_gemm_x_to_weight_ih_linear = up.put(v.multiplier_gemm_x_to_weight_ih_linear, rows);
    u.view.multiplier_br_to_gemm_h = up.put(v.multiplier_br_to_gemm_h, rows);
    u.view.multiplier_gemm_h_to_weight_hh_linear = up.put(v.multiplier_gemm_h_to_weight_hh_linear, rows);
  }
  u.view.update_gate = upload_activation(v.update_gate, up);
  u.view.reset_gate = upload_activation(v.reset_gate, up);
  u.view.new_gate = upload_activation(v.new_gate, up);
  if (path == GruGemmPath::Wide16) {
    const GruGemmLayout l = plan_gru_wide(H, C, 1, 1);
    u.W = up.put(pack_int16_rows(q_W, rows, C, l.rows_p, l.C_p, 0, "q_W"));
    std::vector<int16_t> R16 = pack_int16_rows(q_R, rows, H, l.rows_p, l.H_p, 0, "q_R");
    if (v.reset_before_linear) {
      const std::vector<int16_t> Rn16 = pack_int16_rows(q_R + 2 * H * H, H, H, l.rows_n_p, l.H_p, 0, "q_R (n rows)");
      R16.insert(R16.end(), Rn16.begin(), Rn16.end());
    }
    u.R = up.put(R16);
    if (v.reset_before_linear) u.Rn = static_cast<const int16_t*>(u.R) + l.rows_p * l.H_p;
  } else {
    const GruGemmLayout l = plan_gru_gemm(H, C, 1, 1);
    u.W = up.put(pack_int8_rows(q_W, rows, C, l.rows_p, l.C_p, 0, "q_W"));
    std::vector<int8_t> R8 = pack_int8_rows(q_R, rows, H, l.rows_p, l.H_p, 0, "q_R");
    if (v.reset_before_linear) {  // at a multiple of 256 bytes from R: rows_p and H_p are multiples of 16
      const std::vector<int8_t> Rn8 = pack_int8_rows(q_R + 2 * H * H, H, H, l.rows_n_p, l.H_p, 0, "q_R (n rows)");
      R8.insert(R8.end(), Rn8.begin(), Rn8.end());
    }
    u.R = up.put(R8);
    if (v.reset_before_linear) u.Rn = static_cast<const int8_t*>(u.R) + l.rows_p * l.H_p;
  }
  up.finish();
  return u;
}

// One GPTQ layer on the device (QuantLinear's constructor): qweight (rows already in act-order), qzeros, scales
// and, for act-order, the permutation; ends with up.finish().
struct GptqLayerUpload {
  const uint32_t* qweight = nullptr;
  const uint32_t* qzeros = nullptr;
  const uint16_t* scales = nullptr;
  const int32_t* perm = nullptr;  // null without act-order
};

inline GptqLayerUpload upload_gptq_layer(const std::vector<int32_t>& qweight, const std::vector<int32_t>& qzeros,
                                         const std::vector<uint16_t>& scales, const std::vector<int32_t>* perm,
                                         Uploader& up) {
  GptqLayerUpload u;
  u.qweight = reinterpret_cast<const uint32_t*>(up.put(qweight.data(), static_cast<int64_t>(qweight.size())));
  u.qzeros = reinterpret_cast<const uint32_t*>(up.put(qzeros.data(), static_cast<int64_t>(qzeros.size())));
  u.scales = up.put(scales.data(), static_cast<int64_t>(scales.size()));
  if (perm != nullptr) u.perm = up.put(perm->data(), static_cast<int64_t>(perm->size()));
  up.finish();
  return u;
}

// One GPTQ layer in the stripes layout (qgru/kernels/stripe_linear.h) on the device: the repacked tiles, the
// group parameters, for act-order the permutation of the activations, and the kernel's column counters
// (stripe_counter_count, all 0: the kernel requires 0 before its first launch); ends with up.finish(). The
// counters are uploaded zeros rather than a cudaMemset after the sequence: a memset of device memory returns
// before it has run, and a kernel on a caller's non-blocking stream is not ordered after the legacy stream, so
// only an upload covered by finish() is certainly 0 when the first launch reads it. The layer's per-call path
// copies nothing more.
struct StripeLayerUpload {
  const uint32_t* words = nullptr;
  const uint32_t* params = nullptr;
  const int32_t* perm = nullptr;  // null without act-order
  uint32_t* counters = nullptr;   // [kStripeMaxMTiles, n_tiles], written by the kernel
};
inline StripeLayerUpload upload_stripe_layer(const StripeWeights& s, Uploader& up) {
  StripeLayerUpload u;
  u.words = up.put(s.words);
  u.params = up.put(s.params);
  if (!s.perm.empty()) u.perm = up.put(s.perm);
  // put() hands uploads out read-only; this allocation is the layer's own and the kernel writes it.
  u.counters = const_cast<uint32_t*>(up.put(std::vector<uint32_t>(static_cast<size_t>(stripe_counter_count(s.n_padded)), 0u)));
  up.finish();
  return u;
}

}  // namespace qgru::kernels
