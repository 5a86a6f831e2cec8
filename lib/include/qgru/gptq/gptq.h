#pragma once
// GPTQ (Frantar et al. 2022) as the reference implementation IST-DASLab/gptq (gptq.py, fasterquant) computes
// it, with the act-order / static-groups / g_idx conventions of AutoGPTQ and GPTQModel:
//   1. per-row quantizer parameters from the original W (used when group_size = -1);
//   2. dead inputs (H[i,i] = 0): H[i,i] = 1, W[:, i] = 0;
//   3. static groups: parameters of every group from this W, before any update;
//   4. act-order: columns in descending diag(H) (stable), W and H permuted; or group-aware act-order
//      (GPTQModel's act_group_aware, after Gafni et al. 2025, "GAR"): the groups stay the storage groups
//      [g·size, (g+1)·size), each is processed in descending diag(H) order, and the groups in descending
//      order of their largest diag(H) (both stable; a last, shorter group stays last in column order), so
//      g_idx stays k / size and the scales stay in storage order;
//   5. H += damp · mean(diag H) · I; U = upper Cholesky factor of H⁻¹ (one dpotrf of the reversed H and
//      one dtrtri: the same U as the reference's cholesky → cholesky_inverse → cholesky(upper), half the flops);
//      not positive definite: damping × 10 and retry, at most max_damp_retries times, then qgru::Error;
//   6. blocks of block_size columns: per column i, at a group start take the group's parameters from the
//      columns [i, i + group_size) of W as it stands after the previous blocks' updates (the reference's
//      W, not its in-block copy W1), quantize, err = (w - q) / U[i,i], W1[:, i:] -= err · U[i, i:];
//      after the block, W[:, end:] -= Err1 · U[block, end:] (dgemm).
// Codes, scales and zeros are returned in the checkpoint's terms (see GptqResult).
#include <cstdint>
#include <string>
#include <vector>

namespace qgru::gptq {

// Field defaults are the reference implementation's (damp 0.01, natural column order), which the C API
// documents as its own; `qgru gptq` starts from recommended_options().
struct GptqOptions {
  int bits = 4;                 // 2, 3, 4 or 8
  int64_t group_size = 128;     // -1: one group per row (no groups); a group wider than K is K wide
  bool act_order = false;       // desc_act; takes precedence over group_aware
  bool group_aware = false;     // group-aware act-order (act_group_aware); ignored when act_order
  bool static_groups = false;   // group parameters from the original W
  bool sym = false;
  double damp = 0.01;           // damp_percent
  int64_t block_size = 128;     // lazy-batch block; a block wider than K is K wide (buffers stay N·K)
  int max_damp_retries = 4;     // damping × 10 each time H is not positive definite
};

// What `qgru gptq` uses unless told otherwise: group-aware act-order, damp 0.01 (docs/GPTQ.md, "Defaults",
// has the measurements behind both).
GptqOptions recommended_options();

// The column orders by the names `qgru gptq --order` takes: "group-aware" (group_aware: act-order inside each
// group, g_idx k / group size), "act-order" (act_order, desc_act: descending diag(H) over all columns) and
// "natural" (neither).
const std::vector<std::string>& column_order_names();
// Sets act_order and group_aware for `order`; throws qgru::Error for another name, listing the names.
void set_column_order(GptqOptions& options, const std::string& order);
// The name of the order `options` give (act_order takes precedence over group_aware, as in gptq_quantize).
std::string column_order_name(const GptqOptions& options);

struct GptqResult {
  int64_t N = 0, K = 0, G = 0;  // output rows, input columns, groups
  int bits = 4;
  std::vector<int32_t> codes;   // [N, K], original column order, in [0, 2^bits - 1]
  std::vector<double> scales;   // [G, N]
  std::vector<int32_t> zeros;   // [G, N], in [0, 2^bits - 1]
  std::vector<int32_t> g_idx;   // [K], group of each original column
  std::vector<int64_t> perm;    // [K], processing order (identity without act-order)
  double damp_used = 0.0;       // relative damping that made H positive definite
  int64_t dead_columns = 0;
};

// W: [N, K] row-major; H: [K, K] symmetric (2·X·Xᵀ, undamped). Throws qgru::Error on bad options or when H
// stays not positive definite.
GptqResult gptq_quantize(const std::vector<double>& W, int64_t N, int64_t K, std::vector<double> H,
                         const GptqOptions& options);

// gptq_quantize's checks, shared with the CUDA path (qgru_cuda/gptq_device.h): options (bits, group size, block
// size, damp), the weight's size and finiteness, the Hessian's size and finiteness. Each throws qgru::Error.
void check_gptq_options(const GptqOptions& options);
void check_gptq_weight(const std::vector<double>& W, int64_t N, int64_t K);
void check_gptq_hessian(const std::vector<double>& H, int64_t K);
// The error gptq_quantize throws after `tries` damping attempts, the last with `damp`.
[[noreturn]] void throw_not_positive_definite(double damp, int tries);

// Round-to-nearest with the same grid choices (bits, group size, sym), parameters from the original W per
// group of consecutive columns: the baseline GPTQ is compared with.
GptqResult rtn_quantize(const std::vector<double>& W, int64_t N, int64_t K, const GptqOptions& options);

// Number of groups for K columns (group_size -1: one).
int64_t group_count(int64_t K, int64_t group_size);

// Ŵ[n, k] = scale[g, n] · (code[n, k] − zero[g, n]), g = g_idx[k]; scales given as stored ([G, N]).
std::vector<double> dequantize(const std::vector<int32_t>& codes, const std::vector<double>& scales,
                               const std::vector<double>& zeros, const std::vector<int32_t>& g_idx, int64_t N,
                               int64_t K);
std::vector<double> dequantize(const GptqResult& result);

// ‖D·X‖² = ½ Σ_n D[n]·H·D[n]ᵀ for H = 2·X·Xᵀ (undamped), D [N, K]; computed in row chunks.
double output_energy(const std::vector<double>& D, int64_t N, int64_t K, const std::vector<double>& H);

}  // namespace qgru::gptq
