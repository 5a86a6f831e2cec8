// GPTQ core: see qgru/gptq/gptq.h for the steps and their source in the reference implementation.
#include "qgru/gptq/gptq.h"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <string>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/gptq/column_plan.h"
#include "qgru/gptq/quantizer.h"
#include "qgru/gptq/row_block.h"

namespace qgru::gptq {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

size_t at(int64_t row, int64_t ld, int64_t col) { return static_cast<size_t>(row * ld + col); }

}  // namespace

void check_gptq_options(const GptqOptions& options) {
  check_bits(options.bits);
  if (options.group_size != -1 && options.group_size <= 0) {
    throw Error("gptq: group size " + std::to_string(options.group_size) + " is invalid, expected -1 or > 0");
  }
  if (options.block_size <= 0) throw Error("gptq: block size must be > 0");
  if (!(options.damp >= 0.0) || !std::isfinite(options.damp)) {
    throw Error("gptq: damp " + std::to_string(options.damp) + " is invalid, expected a finite value >= 0");
  }
}

void check_gptq_weight(const std::vector<double>& W, int64_t N, int64_t K) {
  if (N <= 0 || K <= 0 || static_cast<int64_t>(W.size()) != N * K) {
    throw Error("gptq: weight holds " + std::to_string(W.size()) + " values, expected N·K = " +
                std::to_string(N) + "·" + std::to_string(K));
  }
  for (double w : W) {
    if (!std::isfinite(w)) throw Error("gptq: weight has a non-finite value");
  }
}

void check_gptq_hessian(const std::vector<double>& H, int64_t K) {
  if (static_cast<int64_t>(H.size()) != K * K) {
    throw Error("gptq: Hessian holds " + std::to_string(H.size()) + " values, expected K·K with K = " +
                std::to_string(K));
  }
  for (double h : H) {
    if (!std::isfinite(h)) throw Error("gptq: Hessian has a non-finite entry (NaN or Inf in the activations?)");
  }
}

void throw_not_positive_definite(double damp, int tries) {
  throw Error("gptq: H + damp·mean(diag H)·I is not positive definite even with damp = " + std::to_string(damp) +
              " (" + std::to_string(tries) +
              " tries); the activations are degenerate (check them for constant or repeated features)");
}

namespace {

// U = the upper Cholesky factor of H⁻¹ (H⁻¹ = Uᵀ·U), in place (row-major; the strict lower part zeroed).
// The reference computes it as cholesky(cholesky_inverse(cholesky(H)), upper=True): 4K³/3 flops. The same
// U (a Cholesky factor with positive diagonal is unique) comes from one factorization and one triangular
// inverse, 2K³/3 flops: with J the exchange matrix, J·H·J = L'·L'ᵀ gives H = V·Vᵀ for the upper
// triangular V = J·L'·J, so H⁻¹ = V⁻ᵀ·V⁻¹ and U = V⁻¹. Returns false when H is not positive definite.
bool upper_cholesky_of_inverse(std::vector<double>& Hd, int64_t K) {
  const int n = static_cast<int>(K);
  std::vector<double> R(Hd.size());
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) R[at(K - 1 - i, K, K - 1 - j)] = Hd[at(i, K, j)];  // J·H·J
  }
  if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', n, R.data(), n) != 0) return false;  // J·H·J = L'·L'ᵀ
  for (int64_t i = 0; i < K; ++i) {
    for (int64_t j = 0; j < K; ++j) Hd[at(i, K, j)] = j >= i ? R[at(K - 1 - i, K, K - 1 - j)] : 0.0;  // V
  }
  if (LAPACKE_dtrtri(LAPACK_ROW_MAJOR, 'U', 'N', n, Hd.data(), n) != 0) return false;  // U = V⁻¹
  for (int64_t i = 0; i < K; ++i) {
    if (!(Hd[at(i, K, i)] > 0.0) || !std::isfinite(Hd[at(i, K, i)])) return false;
  }
  return true;
}

}  // namespace

GptqOptions recommended_options() {
  GptqOptions options;
  options.group_aware = true;
  options.damp = 0.01;
  return options;
}

const std::vector<std::string>& column_order_names() {
  static const std::vector<std::string> names = {"group-aware", "act-order", "natural"};
  return names;
}

void set_column_order(GptqOptions& options, const std::string& order) {
  const auto& names = column_order_names();
  if (std::find(names.begin(), names.end(), order) == names.end()) {
    throw Error("gptq: column order '" + order + "' is not known, expected group-aware, act-order or natural");
  }
  options.act_order = order == "act-order";
  options.group_aware = order == "group-aware";
}

std::string column_order_name(const GptqOptions& options) {
  if (options.act_order) return "act-order";
  return options.group_aware ? "group-aware" : "natural";
}

int64_t group_count(int64_t K, int64_t group_size) {
  // A group of K columns or more is one group: so written, K + group_size - 1 cannot overflow for any size.
  return group_size == -1 || group_size >= K ? 1 : (K + group_size - 1) / group_size;
}

GptqResult gptq_quantize(const std::vector<double>& W_in, int64_t N, int64_t K, std::vector<double> H,
                         const GptqOptions& options) {
  check_gptq_options(options);
  check_gptq_weight(W_in, N, K);
  check_gptq_hessian(H, K);
  auto start = std::chrono::steady_clock::now();
  const int64_t maxq = max_code(options.bits);
  const bool grouped = options.group_size != -1;
  // A group wider than K is K wide for the parameters (one group, g_idx all 0): clamped so that g·gs and
  // col + gs stay in range.
  const int64_t gs = grouped ? std::min(options.group_size, K) : K;

  GptqResult result;
  result.N = N;
  result.K = K;
  result.bits = options.bits;
  result.G = group_count(K, options.group_size);
  result.codes.assign(static_cast<size_t>(N * K), 0);

  std::vector<double> W = W_in;
  // The parameter tables scale[T, N], zero[T, N] (T = G; one row without groups) that every column reads
  // through the plan's slot (column_plan.h).
  std::vector<double> scale_table(static_cast<size_t>(result.G * N)), zero_table(static_cast<size_t>(result.G * N));
  const auto fill_table = [&](int64_t row, const RowParams& p) {
    std::copy(p.scale.begin(), p.scale.end(), scale_table.begin() + row * N);
    std::copy(p.zero.begin(), p.zero.end(), zero_table.begin() + row * N);
  };
  // 1. Per-row parameters from the original W (before dead columns are zeroed, as the reference).
  if (!grouped) fill_table(0, find_params(W.data(), N, K, 0, K, options.bits, options.sym));

  // 2. Dead inputs.
  std::vector<double> diagonal(static_cast<size_t>(K));
  for (int64_t i = 0; i < K; ++i) {
    if (H[at(i, K, i)] == 0.0) {
      H[at(i, K, i)] = 1.0;
      for (int64_t n = 0; n < N; ++n) W[at(n, K, i)] = 0.0;
      ++result.dead_columns;
    }
    diagonal[static_cast<size_t>(i)] = H[at(i, K, i)];
  }

  // 3. Static groups: parameters from W (dead columns zeroed) before any update, in original column order.
  if (grouped && options.static_groups) {
    for (int64_t g = 0; g < result.G; ++g) {
      fill_table(g, find_params(W.data(), N, K, g * gs, (g + 1) * gs, options.bits, options.sym));
    }
  }

  // 4. Act-order (descending diag(H) over all columns) or group-aware act-order (within each storage group,
  // groups by their largest diag(H)); ties kept in column order. The plan also says which table row each
  // column quantizes with and where groups find their parameters.
  const ColumnPlan plan = plan_columns(diagonal, options);
  const std::vector<int64_t>& perm = plan.perm;
  if (options.act_order || options.group_aware) {
    std::vector<double> Wp(W.size()), Hp(H.size());
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t p = 0; p < K; ++p) Wp[at(n, K, p)] = W[at(n, K, perm[p])];
    }
    for (int64_t p = 0; p < K; ++p) {
      for (int64_t q = 0; q < K; ++q) Hp[at(p, K, q)] = H[at(perm[p], K, perm[q])];
    }
    W.swap(Wp);
    H.swap(Hp);
  }
  result.perm = perm;

  log()->debug("gptq: setup (params, dead columns, permutation) {:.3f} s", seconds_since(start));
  start = std::chrono::steady_clock::now();
  // 5. Damping and the upper Cholesky factor of the inverse.
  double mean_diag = 0.0;
  for (int64_t i = 0; i < K; ++i) mean_diag += H[at(i, K, i)];
  mean_diag /= static_cast<double>(K);
  std::vector<double> U;
  double damp = options.damp;
  for (int attempt = 0;; ++attempt) {
    U = H;
    for (int64_t i = 0; i < K; ++i) U[at(i, K, i)] += damp * mean_diag;
    if (upper_cholesky_of_inverse(U, K)) break;
    if (attempt >= options.max_damp_retries) {
      throw_not_positive_definite(damp, attempt + 1);
    }
    log()->warn("gptq: H + {}·mean(diag H)·I is not positive definite; retrying with damp = {}", damp,
                damp * 10.0);
    damp *= 10.0;
  }
  result.damp_used = damp;
  log()->debug("gptq: Cholesky of the inverse {:.3f} s", seconds_since(start));
  start = std::chrono::steady_clock::now();
  double lazy_seconds = 0.0;

  // 6. Blocks with lazy batch updates. Rows are independent inside a block: the group parameters come from
  // W (updated by earlier blocks only), so they are found at block start and each row then runs alone
  // (gptq_row_block, the arithmetic the device shares).
  // A block wider than K is K wide (one block: the same arithmetic), so the block buffer below holds at most
  // the N·K values the weight itself has, whatever --block-size asks for.
  const int64_t B = std::min(options.block_size, K);
  std::vector<double> Err1(static_cast<size_t>(N * B));
  std::vector<int32_t> codes_perm(static_cast<size_t>(N * K));
  for (const PlanBlock& block : plan_blocks(plan, B)) {
    const int64_t i1 = block.begin, i2 = block.end, count = i2 - i1;
    for (size_t f = block.find_begin; f < block.find_end; ++f) {
      const int64_t col = plan.find_at[f];
      fill_table(plan.find_slot[f], find_params(W.data(), N, K, col, col + gs, options.bits, options.sym));
    }
    for (int64_t n = 0; n < N; ++n) {
      gptq_row_block<kRowBlockTile>(&W[at(n, K, i1)], 1, &Err1[at(n, B, 0)], 1, &codes_perm[at(n, K, i1)], 1,
                                    &U[at(i1, K, i1)], K, count, &plan.slot[static_cast<size_t>(i1)],
                                    &scale_table[static_cast<size_t>(n)], &zero_table[static_cast<size_t>(n)], N,
                                    maxq);
    }
    if (i2 < K) {  // W[:, i2:] -= Err1 · U[i1:i2, i2:]
      const auto lazy_start = std::chrono::steady_clock::now();
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(N), static_cast<int>(K - i2),
                  static_cast<int>(count), -1.0, Err1.data(), static_cast<int>(B), &U[at(i1, K, i2)],
                  static_cast<int>(K), 1.0, &W[static_cast<size_t>(i2)], static_cast<int>(K));
      lazy_seconds += seconds_since(lazy_start);
    }
  }
  log()->debug("gptq: blocks {:.3f} s, of which lazy updates (dgemm) {:.3f} s", seconds_since(start), lazy_seconds);

  // Back to the original column order; g_idx as AutoGPTQ / GPTQModel write it; the tables as stored.
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t p = 0; p < K; ++p) result.codes[at(n, K, perm[p])] = codes_perm[at(n, K, p)];
  }
  result.scales = scale_table;
  result.zeros.assign(zero_table.begin(), zero_table.end());  // integral values in [0, maxq]
  result.g_idx = plan.g_idx;
  return result;
}

GptqResult rtn_quantize(const std::vector<double>& W, int64_t N, int64_t K, const GptqOptions& options) {
  check_gptq_options(options);
  check_gptq_weight(W, N, K);
  const int64_t maxq = max_code(options.bits);
  const int64_t gs = options.group_size == -1 ? K : std::min(options.group_size, K);  // as gptq_quantize
  GptqResult result;
  result.N = N;
  result.K = K;
  result.bits = options.bits;
  result.G = group_count(K, options.group_size);
  result.scales.resize(static_cast<size_t>(result.G * N));
  result.zeros.resize(static_cast<size_t>(result.G * N));
  result.g_idx.resize(static_cast<size_t>(K));
  result.codes.resize(static_cast<size_t>(N * K));
  result.perm.resize(static_cast<size_t>(K));
  std::iota(result.perm.begin(), result.perm.end(), int64_t{0});
  for (int64_t g = 0; g < result.G; ++g) {
    const RowParams p = find_params(W.data(), N, K, g * gs, (g + 1) * gs, options.bits, options.sym);
    for (int64_t n = 0; n < N; ++n) {
      result.scales[at(g, N, n)] = p.scale[static_cast<size_t>(n)];
      result.zeros[at(g, N, n)] = static_cast<int32_t>(p.zero[static_cast<size_t>(n)]);
      for (int64_t k = g * gs; k < std::min(K, (g + 1) * gs); ++k) {
        result.codes[at(n, K, k)] =
            quantize_code(W[at(n, K, k)], p.scale[static_cast<size_t>(n)], p.zero[static_cast<size_t>(n)], maxq);
      }
    }
  }
  for (int64_t k = 0; k < K; ++k) result.g_idx[static_cast<size_t>(k)] = static_cast<int32_t>(k / gs);
  return result;
}

std::vector<double> dequantize(const std::vector<int32_t>& codes, const std::vector<double>& scales,
                               const std::vector<double>& zeros, const std::vector<int32_t>& g_idx, int64_t N,
                               int64_t K) {
  std::vector<double> W(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = g_idx[static_cast<size_t>(k)];
      W[at(n, K, k)] = scales[at(g, N, n)] * (codes[at(n, K, k)] - zeros[at(g, N, n)]);
    }
  }
  return W;
}

std::vector<double> dequantize(const GptqResult& result) {
  return dequantize(result.codes, result.scales, std::vector<double>(result.zeros.begin(), result.zeros.end()),
                    result.g_idx, result.N, result.K);
}

double output_energy(const std::vector<double>& D, int64_t N, int64_t K, const std::vector<double>& H) {
  // A report figure, not part of the algorithm: float32 products (ssymm), float64 sums. H is scaled to unit
  // mean diagonal first so that float32 neither overflows nor underflows.
  double mean_diag = 0.0;
  for (int64_t i = 0; i < K; ++i) mean_diag += H[at(i, K, i)];
  mean_diag = mean_diag > 0.0 ? mean_diag / static_cast<double>(K) : 1.0;
  std::vector<float> Hf(H.size());
  for (size_t i = 0; i < H.size(); ++i) Hf[i] = static_cast<float>(H[i] / mean_diag);
  constexpr int64_t kRows = 256;
  std::vector<float> Df(static_cast<size_t>(kRows * K)), T(static_cast<size_t>(kRows * K));
  double total = 0.0;
  for (int64_t r0 = 0; r0 < N; r0 += kRows) {
    const int64_t rows = std::min(kRows, N - r0);
    double row_scale = 0.0;  // the chunk scaled to unit max magnitude, for the same reason
    for (int64_t i = 0; i < rows * K; ++i) row_scale = std::max(row_scale, std::fabs(D[static_cast<size_t>(r0 * K + i)]));
    if (row_scale == 0.0) continue;
    for (int64_t i = 0; i < rows * K; ++i) Df[static_cast<size_t>(i)] = static_cast<float>(D[static_cast<size_t>(r0 * K + i)] / row_scale);
    cblas_ssymm(CblasRowMajor, CblasRight, CblasUpper, static_cast<int>(rows), static_cast<int>(K), 1.0f, Hf.data(),
                static_cast<int>(K), Df.data(), static_cast<int>(K), 0.0f, T.data(), static_cast<int>(K));
    double chunk = 0.0;
    for (int64_t i = 0; i < rows * K; ++i) chunk += static_cast<double>(T[static_cast<size_t>(i)]) * Df[static_cast<size_t>(i)];
    total += chunk * row_scale * row_scale;
  }
  return 0.5 * total * mean_diag;
}

}  // namespace qgru::gptq
