#pragma once
// Test helpers for the float GRU: random PyTorch nn.GRU state dicts built in memory, and an independent
// float64 GRU written from PyTorch's documented equations on PyTorch's own layout (gates r, z, n):
//   r = σ(W_ir x + b_ir + W_hr h + b_hr)     z = σ(W_iz x + b_iz + W_hz h + b_hz)
//   n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn))     h' = (1 − z) ⊙ n + z ⊙ h
// and, with reset_after = false, Keras's classic GRU (GRU(reset_after=False); ONNX linear_before_reset = 0), whose
// candidate applies r to the state before its recurrent kernel: n = tanh(W_in x + b_in + W_hn (r ⊙ h) + b_hn)
// (Keras has one bias per gate there; b_in + b_hn is that bias).
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru_test {

struct GruShape {
  int C = 1, H = 1, L = 1, D = 1;
};

inline std::string pt_name(const std::string& prefix, const char* role, int layer, int direction) {
  return prefix + role + "_l" + std::to_string(layer) + (direction ? "_reverse" : "");
}

// A state dict with uniform(-k, k) weights, k = 1/sqrt(H) (nn.GRU's initialisation).
inline std::map<std::string, qgru::Tensor> random_pytorch_gru(const GruShape& s, unsigned seed,
                                                              const std::string& prefix = "", bool biases = true) {
  std::mt19937 rng(seed);
  const float k = 1.0f / std::sqrt(static_cast<float>(s.H));
  std::uniform_real_distribution<float> dist(-k, k);
  auto random_tensor = [&](std::vector<int64_t> shape) {
    std::vector<float> values(static_cast<size_t>(qgru::shape_numel(shape)));
    for (auto& v : values) v = dist(rng);
    return qgru::Tensor::from_vector<float>(shape, values);
  };
  std::map<std::string, qgru::Tensor> tensors;
  for (int layer = 0; layer < s.L; ++layer) {
    const int64_t C = layer == 0 ? s.C : s.D * s.H;
    for (int d = 0; d < s.D; ++d) {
      tensors[pt_name(prefix, "weight_ih", layer, d)] = random_tensor({3 * s.H, C});
      tensors[pt_name(prefix, "weight_hh", layer, d)] = random_tensor({3 * s.H, s.H});
      if (biases) {
        tensors[pt_name(prefix, "bias_ih", layer, d)] = random_tensor({3 * s.H});
        tensors[pt_name(prefix, "bias_hh", layer, d)] = random_tensor({3 * s.H});
      }
    }
  }
  return tensors;
}

inline std::vector<float> random_values(size_t count, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> values(count);
  for (auto& v : values) v = dist(rng);
  return values;
}

struct ReferenceResult {
  std::vector<double> output;  // [T, N, D*H]
  std::vector<double> h_n;     // [L*D, N, H]
};

// The float64 GRU on a PyTorch state dict (no prefix; missing biases are zeros). x [T, N, C], h0 [L*D, N, H]
// or empty. reset_after: PyTorch's cell (true) or Keras's reset_after=False cell.
inline ReferenceResult reference_pytorch_gru(const std::map<std::string, qgru::Tensor>& sd, const GruShape& s,
                                             const std::vector<float>& x, int T, int N,
                                             const std::vector<float>& h0, bool reset_after = true) {
  const int H = s.H;
  auto values = [&](const std::string& name, size_t count) {
    auto it = sd.find(name);
    if (it == sd.end()) return std::vector<double>(count, 0.0);
    return qgru::tensor_to_f64(it->second);
  };
  auto sigmoid = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  std::vector<double> input(x.begin(), x.end());
  int C = s.C;
  ReferenceResult result;
  result.h_n.assign(static_cast<size_t>(s.L * s.D * N * H), 0.0);
  for (int layer = 0; layer < s.L; ++layer) {
    std::vector<double> output(static_cast<size_t>(T * N * s.D * H));
    for (int d = 0; d < s.D; ++d) {
      const auto W = values(pt_name("", "weight_ih", layer, d), 0);
      const auto U = values(pt_name("", "weight_hh", layer, d), 0);
      const auto bi = values(pt_name("", "bias_ih", layer, d), static_cast<size_t>(3 * H));
      const auto bh = values(pt_name("", "bias_hh", layer, d), static_cast<size_t>(3 * H));
      const int cell = layer * s.D + d;
      for (int n = 0; n < N; ++n) {
        std::vector<double> h(static_cast<size_t>(H), 0.0);
        if (!h0.empty()) {
          for (int j = 0; j < H; ++j) h[j] = h0[static_cast<size_t>((cell * N + n) * H + j)];
        }
        for (int step = 0; step < T; ++step) {
          const int t = d == 0 ? step : T - 1 - step;
          const double* xt = input.data() + (t * N + n) * C;
          std::vector<double> gi(static_cast<size_t>(3 * H)), gh(static_cast<size_t>(3 * H));
          for (int g = 0; g < 3 * H; ++g) {
            double a = bi[g], b = bh[g];
            for (int c = 0; c < C; ++c) a += W[static_cast<size_t>(g * C + c)] * xt[c];
            for (int k = 0; k < H; ++k) b += U[static_cast<size_t>(g * H + k)] * h[k];
            gi[g] = a;
            gh[g] = b;
          }
          std::vector<double> h_new(static_cast<size_t>(H)), rh(static_cast<size_t>(H));
          for (int j = 0; j < H; ++j) rh[j] = sigmoid(gi[j] + gh[j]) * h[j];  // Keras: r ⊙ h_tm1
          for (int j = 0; j < H; ++j) {
            const double r = sigmoid(gi[j] + gh[j]);
            const double z = sigmoid(gi[H + j] + gh[H + j]);
            double recurrent_n = r * gh[2 * H + j];
            if (!reset_after) {
              recurrent_n = bh[2 * H + j];
              for (int k = 0; k < H; ++k) recurrent_n += U[static_cast<size_t>((2 * H + j) * H + k)] * rh[k];
            }
            const double nn = std::tanh(gi[2 * H + j] + recurrent_n);
            h_new[j] = (1.0 - z) * nn + z * h[j];
          }
          h = h_new;
          for (int j = 0; j < H; ++j) output[static_cast<size_t>((t * N + n) * s.D * H + d * H + j)] = h[j];
        }
        for (int j = 0; j < H; ++j) result.h_n[static_cast<size_t>((cell * N + n) * H + j)] = h[j];
      }
    }
    input = output;
    C = s.D * H;
  }
  result.output = input;
  return result;
}

template <class A, class B>
double max_abs_diff(const std::vector<A>& a, const std::vector<B>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    worst = std::max(worst, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
  }
  return worst;
}

// "" when every |a[i] - b[i]| <= tolerance; otherwise the first index beyond it, as coordinates of `shape`
// (e.g. "[t, n, channel]"), with both values: the message a failing comparison prints.
template <class A, class B>
std::string first_mismatch(const std::vector<A>& a, const std::vector<B>& b, double tolerance,
                           const std::vector<int64_t>& shape, const std::string& axes) {
  if (a.size() != b.size()) return "sizes differ: " + std::to_string(a.size()) + " vs " + std::to_string(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (std::fabs(x - y) <= tolerance) continue;
    std::string where;
    int64_t rest = static_cast<int64_t>(i);
    for (size_t d = shape.size(); d-- > 0;) {
      where = std::to_string(rest % shape[d]) + (where.empty() ? "" : ", ") + where;
      rest /= shape[d];
    }
    return "first mismatch at " + axes + " = [" + where + "]: " + std::to_string(x) + " vs " + std::to_string(y);
  }
  return "";
}

}  // namespace qgru_test
