// Benchmark: the GPU quantized linear (W4A16 / W8A16, group 128) against cuBLAS fp16 GEMM (fp32 compute) of the
// dequantized weight, at HBM figures: every engine cycles through enough copies of its weights that their
// total exceeds twice the L2 cache (each call reads weights the previous calls did not leave in L2), the
// engines alternate within each round (one sample of each per round), and a device-to-device copy measured in
// the same run gives the practical ceiling.
//
// A sample is `--iters` calls, each on the next copy, between two CUDA events: its time / iters is one call.
// Reported: the median over `--rounds` rounds. Weight GB/s = the engine's weight bytes (K·N·bits/8 for qgru,
// K·N·2 for cuBLAS fp16) / time; HBM fraction = that / the card's nominal bandwidth (--hbm-gbps, else known
// for the H200: 4800 GB/s; otherwise not given). The copy's GB/s counts bytes read + bytes written.
// Markdown on stdout; with --json FILE, one JSON row per figure:
//   {"bits","K","N","M","engine","us","weight_gb_per_s","hbm_fraction","card","date","commit"}
// engine: "qgru" (the engine QGRU_CUDA_LINEAR_KERNEL=auto picks: stripes or dequant-gemm), "qgru-legacy" (the WMMA
// tile kernel), "qgru-stripes" (stripes forced; timed only where auto picks another engine), "qgru-wgmma" (the
// wgmma kernel forced: QGRU_CUDA_LINEAR_KERNEL=wgmma; on a device that cannot run it the row says stripes),
// "cublas-fp16", "d2d-copy" (bits, K, N, M = 0).
// Without a GPU it prints "no usable GPU: <reason>" and exits 1.
// Usage: bench_cuda_linear [--bits 4[,8]] [--shapes KxN[,KxN...]] [--ms M[,M...]] [--iters N] [--rounds R]
//   [--engines qgru,qgru-legacy,qgru-stripes,qgru-wgmma,cublas-fp16] [--blocks-per-sm B[,B...]]
//   [--configs NAME[,NAME...]] [--wgmma-rows R[,R...]] [--hbm-gbps G] [--commit SHA] [--json FILE]
//   --blocks-per-sm / --configs: the split-K targets / tile configurations of qgru-legacy and the stripes
//   block target of qgru, qgru-stripes and qgru-wgmma (kernels::LinearTuning; 0 and "default": the library's own);
//   --wgmma-rows: qgru-wgmma's row block, 64 or 128 (0: the library's choice by M).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "qgru/base/atomic_file.h"
#include "qgru/kernels/gptq_layout.h"
#include "qgru/half.h"
#include "qgru_cuda/check.h"
#include "qgru_cuda/cublas_library.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/quant_linear.h"

namespace {

using qgru::cuda::DeviceBuffer;
using qgru::cuda::bench::utc_date;
namespace blas = qgru::cuda::blas;
namespace k = qgru::kernels;

struct Options {
  std::vector<int> bits = {4};
  std::vector<std::pair<int64_t, int64_t>> shapes = {{4096, 4096}, {4096, 11008}, {11008, 4096}, {8192, 8192}};
  std::vector<int64_t> ms = {1, 4, 16, 64, 256};
  int iters = 20, rounds = 7;
  // qgru-stripes only where auto picks another engine (M > 64): below, its rows would repeat qgru's
  // qgru-wgmma only when asked for: a kernel no GPU has run yet times in a process of its own (gpu_session.sh)
  std::vector<std::string> engines = {"qgru", "qgru-legacy", "qgru-stripes", "cublas-fp16"};
  std::vector<int> targets = {0};
  std::vector<int> wgmma_rows = {0};
  std::vector<std::string> configs = {"default"};
  double hbm_gbps = 0;
  std::string commit = "unknown", json;
};

template <typename T, typename Parse>
std::vector<T> split(const char* text, Parse parse) {
  std::vector<T> out;
  std::stringstream list(text);
  for (std::string item; std::getline(list, item, ',');) out.push_back(parse(item));
  return out;
}

bool parse_options(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) return false;
    const char* value = argv[++i];
    if (flag == "--bits") {
      o.bits = split<int>(value, [](const std::string& s) { return std::atoi(s.c_str()); });
      for (int b : o.bits)
        if (b != 4 && b != 8) return false;
    } else if (flag == "--shapes") {
      o.shapes = split<std::pair<int64_t, int64_t>>(value, [](const std::string& s) {
        const size_t x = s.find('x');
        return x == std::string::npos ? std::pair<int64_t, int64_t>{0, 0}
                                      : std::pair<int64_t, int64_t>{std::atoll(s.substr(0, x).c_str()), std::atoll(s.substr(x + 1).c_str())};
      });
      for (const auto& [K, N] : o.shapes)
        if (K <= 0 || N <= 0 || K % 128 != 0 || N % 8 != 0) return false;
    } else if (flag == "--ms") {
      o.ms = split<int64_t>(value, [](const std::string& s) { return std::atoll(s.c_str()); });
      for (int64_t m : o.ms)
        if (m < 1) return false;
    } else if (flag == "--iters") {
      o.iters = std::max(1, std::atoi(value));
    } else if (flag == "--rounds") {
      o.rounds = std::max(1, std::atoi(value));
    } else if (flag == "--engines") {
      o.engines = split<std::string>(value, [](const std::string& s) { return s; });
      for (const auto& e : o.engines)
        if (e != "qgru" && e != "qgru-legacy" && e != "qgru-stripes" && e != "qgru-wgmma" && e != "cublas-fp16") return false;
    } else if (flag == "--blocks-per-sm") {
      o.targets = split<int>(value, [](const std::string& s) { return std::max(0, std::atoi(s.c_str())); });
    } else if (flag == "--wgmma-rows") {
      o.wgmma_rows = split<int>(value, [](const std::string& s) { return std::atoi(s.c_str()); });
      for (int r : o.wgmma_rows)
        if (r != 0 && r != 64 && r != 128) return false;
    } else if (flag == "--configs") {
      o.configs = split<std::string>(value, [](const std::string& s) { return s; });
    } else if (flag == "--hbm-gbps") {
      o.hbm_gbps = std::atof(value);
    } else if (flag == "--commit") {
      o.commit = value;
    } else if (flag == "--json") {
      o.json = value;
    } else {
      return false;
    }
  }
  return true;
}

qgru::cuda::GptqLinearWeights random_layer(int64_t K, int64_t N, int bits, std::mt19937& rng) {
  qgru::cuda::GptqLinearWeights w;
  w.K = K;
  w.N = N;
  w.bits = bits;
  w.group_size = 128;
  const int64_t G = K / 128;
  w.qweight.resize(static_cast<size_t>(K * bits / 32 * N));
  w.qzeros.resize(static_cast<size_t>(G * N * bits / 32));
  w.scales.resize(static_cast<size_t>(G * N));
  for (auto& v : w.qweight) v = static_cast<int32_t>(static_cast<uint32_t>(rng()));
  for (auto& v : w.qzeros) v = static_cast<int32_t>(static_cast<uint32_t>(rng()));
  for (auto& v : w.scales) v = qgru::float_to_half_bits(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.0f);
  return w;
}

std::vector<uint16_t> dequantize(const qgru::cuda::GptqLinearWeights& w) {  // [K, N] fp16 bits
  std::vector<uint16_t> out(static_cast<size_t>(w.K * w.N));
  const auto* qw = reinterpret_cast<const uint32_t*>(w.qweight.data());
  const auto* qz = reinterpret_cast<const uint32_t*>(w.qzeros.data());
  for (int64_t kk = 0; kk < w.K; ++kk) {
    const int64_t g = kk / w.group_size;
    for (int64_t n = 0; n < w.N; ++n) {
      out[static_cast<size_t>(kk * w.N + n)] = k::gptq_dequant_reference(
          k::gptq_weight_code(qw, w.N, w.bits, kk, n), k::gptq_zero(qz, w.N, w.bits, g, n, 0), w.scales[static_cast<size_t>(g * w.N + n)]);
    }
  }
  return out;
}

// Copies needed so that `copies · bytes` exceeds twice the L2 (at least 2).
int copies_for(double bytes, double l2_bytes) { return std::max(2, static_cast<int>(2.0 * l2_bytes / bytes) + 1); }

// One sample: `iters` calls of fn(i) between two events; microseconds per call.
double sample_us(const std::function<void(int)>& fn, int iters) {
  cudaEvent_t start, stop;
  QGRU_CUDA_CHECK(cudaEventCreate(&start));
  QGRU_CUDA_CHECK(cudaEventCreate(&stop));
  QGRU_CUDA_CHECK(cudaEventRecord(start));
  for (int i = 0; i < iters; ++i) fn(i);
  QGRU_CUDA_CHECK(cudaEventRecord(stop));
  QGRU_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  QGRU_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  QGRU_CUDA_CHECK(cudaEventDestroy(start));
  QGRU_CUDA_CHECK(cudaEventDestroy(stop));
  return 1000.0 * ms / iters;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Row {
  int bits;
  int64_t K, N, M;
  std::string engine, detail;
  double us, weight_gbps, hbm_fraction;  // hbm_fraction < 0: not known
};

// An engine timed at one (shape, M): its sample function and weight bytes.
struct Timed {
  std::string engine, detail;
  double weight_bytes;
  std::function<void(int)> call;
  std::vector<double> samples;
};


}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_options(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: %s [--bits 4[,8]] [--shapes KxN[,...]] [--ms M[,...]] [--iters N] [--rounds R] "
                 "[--engines qgru,qgru-legacy,qgru-stripes,qgru-wgmma,cublas-fp16] [--blocks-per-sm B[,...]] [--configs NAME[,...]] "
                 "[--wgmma-rows R[,...]] "
                 "[--hbm-gbps G] [--commit SHA] [--json FILE]  (K a multiple of 128, N of 8)\n",
                 argv[0]);
    return 2;
  }
  const qgru::cuda::DeviceProbe probe = qgru::cuda::probe_devices();
  if (probe.device_count == 0) {
    std::printf("no usable GPU: %s\nbenchmark NOT RUN\n", probe.reason.c_str());
    return 1;
  }
  try {
    const std::string card = qgru::cuda::device_name();
    if (o.hbm_gbps <= 0 && card.find("H200") != std::string::npos) o.hbm_gbps = 4800;
    int device = 0, l2 = 0;
    QGRU_CUDA_CHECK(cudaGetDevice(&device));
    QGRU_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    const double l2_bytes = l2;
    std::vector<Row> rows;

    // The practical ceiling: a device-to-device copy of 8x the L2 (at least 256 MiB), same rounds.
    {
      const size_t bytes = std::max<size_t>(size_t{256} << 20, static_cast<size_t>(8 * l2_bytes));
      DeviceBuffer src(bytes), dst(bytes);
      src.zero();
      std::vector<double> us;
      for (int r = 0; r < o.rounds; ++r) {
        us.push_back(sample_us([&](int) { QGRU_CUDA_CHECK(cudaMemcpyAsync(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice)); },
                               std::max(1, o.iters / 10)));
      }
      const double t = median(us), gbps = 2.0 * static_cast<double>(bytes) / (t * 1e3);
      rows.push_back({0, 0, 0, 0, "d2d-copy", std::to_string(bytes >> 20) + " MiB, read + write", t, gbps,
                      o.hbm_gbps > 0 ? gbps / o.hbm_gbps : -1});
    }
    const double copy_gbps = rows.front().weight_gbps;
    std::printf("GPU: %s, L2 %.0f MiB, device-to-device copy %.0f GB/s (read + write)%s; group 128, %d rounds of %d calls, "
                "engines alternating, weights rotated over > 2x L2\n\n",
                card.c_str(), l2_bytes / (1 << 20), copy_gbps,
                o.hbm_gbps > 0 ? (", nominal HBM " + std::to_string(static_cast<int>(o.hbm_gbps)) + " GB/s").c_str() : "",
                o.rounds, o.iters);

    // Rows are printed and the JSON file rewritten after every shape, so a run cut short (a session's time limit)
    // keeps what it measured.
    std::printf("| bits | K x N | M | engine | detail | µs | weight GB/s | of nominal HBM | of measured copy |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
    size_t printed = 0;
    const std::string date = utc_date();
    const auto flush = [&]() {
      for (; printed < rows.size(); ++printed) {
        const Row& r = rows[printed];
        char nominal[32] = "n/a";
        if (r.hbm_fraction >= 0) std::snprintf(nominal, sizeof nominal, "%.0f%%", 100.0 * r.hbm_fraction);
        std::printf("| %d | %lldx%lld | %lld | %s | %s | %.1f | %.0f | %s | %.0f%% |\n", r.bits, static_cast<long long>(r.K),
                    static_cast<long long>(r.N), static_cast<long long>(r.M), r.engine.c_str(), r.detail.c_str(), r.us,
                    r.weight_gbps, nominal, 100.0 * r.weight_gbps / copy_gbps);
      }
      std::fflush(stdout);
      if (o.json.empty()) return true;
      // Through the atomic writer: a run killed while the file is rewritten leaves the previous shape's whole file.
      std::string text = "[\n";
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        char fraction[32] = "null";
        if (r.hbm_fraction >= 0) std::snprintf(fraction, sizeof fraction, "%.4f", r.hbm_fraction);
        char line[1024];
        const int length = std::snprintf(line, sizeof line,
                      "  {\"bits\": %d, \"K\": %lld, \"N\": %lld, \"M\": %lld, \"engine\": \"%s\", \"detail\": \"%s\", \"us\": %.3f, "
                      "\"weight_gb_per_s\": %.1f, \"hbm_fraction\": %s, \"card\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}%s\n",
                      r.bits, static_cast<long long>(r.K), static_cast<long long>(r.N), static_cast<long long>(r.M), r.engine.c_str(),
                      r.detail.c_str(), r.us, r.weight_gbps, fraction, card.c_str(), date.c_str(), o.commit.c_str(),
                      i + 1 < rows.size() ? "," : "");
        if (length < 0 || length >= static_cast<int>(sizeof line)) {
          std::printf("FAILED: --json %s: a row longer than %zu bytes\n", o.json.c_str(), sizeof line);
          return false;
        }
        text += line;
      }
      text += "]\n";
      try {
        qgru::write_file_atomic(o.json, text);
      } catch (const std::exception& e) {
        std::printf("FAILED: cannot write --json %s: %s\n", o.json.c_str(), e.what());
        return false;
      }
      return true;
    };
    cublasHandle_t handle;
    QGRU_CUBLAS_CHECK(blas::cublasCreate(&handle));
    std::mt19937 rng(42);
    const auto has = [&](const char* e) { return std::find(o.engines.begin(), o.engines.end(), e) != o.engines.end(); };
    // qgru-stripes' copies of the layers are built only where a row times them: some M at which auto (qgru) takes
    // another engine, or no qgru rows at all (the uploads cost the session time).
    const bool stripes_timed =
        has("qgru-stripes") && (!has("qgru") || std::any_of(o.ms.begin(), o.ms.end(), [](int64_t M) {
          return k::choose_engine(M, k::LinearKernelSetting::Auto, "").engine != k::LinearEngine::Stripes;
        }));
    for (const int bits : o.bits) {
      std::vector<int> config_indices;  // -1: the plan's choice
      for (const std::string& name : o.configs) {
        int index = -1;
        for (int c = 0; c < k::kTileConfigCount; ++c)
          if (name == k::kTileConfigs[c].name) index = c;
        if (name != "default" && (index < 0 || k::kTileConfigs[index].bits != bits)) {
          std::printf("FAILED: --configs: '%s' is not a %d-bit tile configuration\n", name.c_str(), bits);
          return 2;
        }
        config_indices.push_back(index);
      }
      for (const auto& [K, N] : o.shapes) {
        const auto w = random_layer(K, N, bits, rng);
        const double q_bytes = static_cast<double>(K) * static_cast<double>(N) * bits / 8.0, f_bytes = 2.0 * static_cast<double>(K) * static_cast<double>(N);
        // Copies of every layout that is timed; all built from the same host weights.
        std::vector<std::unique_ptr<qgru::cuda::QuantLinear>> legacy, automatic, stripes, wgmma;
        std::vector<DeviceBuffer> w16;
        const int q_copies = copies_for(q_bytes, l2_bytes), f_copies = copies_for(f_bytes, l2_bytes);
        for (int c = 0; c < q_copies; ++c) {
          if (has("qgru-legacy")) legacy.push_back(std::make_unique<qgru::cuda::QuantLinear>(w, k::LinearKernelSetting::Legacy));
          if (has("qgru")) automatic.push_back(std::make_unique<qgru::cuda::QuantLinear>(w, k::LinearKernelSetting::Auto));
          if (stripes_timed) stripes.push_back(std::make_unique<qgru::cuda::QuantLinear>(w, k::LinearKernelSetting::Stripes));
          if (has("qgru-wgmma")) wgmma.push_back(std::make_unique<qgru::cuda::QuantLinear>(w, k::LinearKernelSetting::Wgmma));
        }
        if (has("cublas-fp16")) {
          const std::vector<uint16_t> host16 = dequantize(w);
          for (int c = 0; c < f_copies; ++c) w16.push_back(DeviceBuffer::from(host16));
        }
        for (const int64_t M : o.ms) {
          std::vector<uint16_t> a(static_cast<size_t>(M * K));
          for (auto& v : a) v = qgru::float_to_half_bits(static_cast<float>(rng() % 2001) / 1000.0f - 1.0f);
          const DeviceBuffer a_dev = DeviceBuffer::from(a);
          DeviceBuffer c_dev(static_cast<size_t>(M * N) * 2);
          std::vector<Timed> timed;
          std::vector<std::unique_ptr<DeviceBuffer>> workspaces;
          const auto add_layers = [&](const std::string& engine, std::vector<std::unique_ptr<qgru::cuda::QuantLinear>>& layers,
                                      int config_index, int target, int wgmma_rows) {
            if (layers.empty()) return;
            const k::LinearTuning tuning{target, config_index, wgmma_rows};
            for (auto& l : layers) l->set_tuning(tuning);
            const k::EngineChoice choice = layers.front()->engine(M);
            std::string detail = k::engine_name(choice.engine);
            if (choice.engine == k::LinearEngine::Tiles) {
              const k::LinearPlan plan = layers.front()->plan(M);
              detail = std::string(k::kTileConfigs[plan.config_index].name) + ", split " + std::to_string(plan.grid_z);
            } else if (choice.engine == k::LinearEngine::Stripes) {
              // The grid of one launch: stripes x row blocks (one row block up to 64 rows), not the stripes alone.
              const k::StripePlan sp = layers.front()->stripe_plan(M);
              detail += ", " + std::to_string(sp.blocks) + " stripes x " + std::to_string(sp.m_blocks) + " row blocks of " +
                        std::to_string(k::kStripeTileM * sp.m_frags) + " rows";
              if (M > k::kStripeMaxRows) detail += " per launch of " + std::to_string(k::kStripeMaxRows) + " rows";
            } else if (choice.engine == k::LinearEngine::Wgmma) {
              const k::StripePlan sp = layers.front()->wgmma_plan(M);
              detail += ", " + std::to_string(sp.blocks) + " stripes x " + std::to_string(sp.m_blocks) + " row blocks of " +
                        std::to_string(k::kStripeTileM * sp.m_frags) + " rows";
              if (M > k::kStripeMaxRows) detail += " per launch of " + std::to_string(k::kStripeMaxRows) + " rows";
            }
            if (target != 0) detail += " (target " + std::to_string(target) + "/SM)";
            int64_t ws = 0;
            for (auto& l : layers) ws = std::max(ws, l->workspace_bytes(M));
            workspaces.push_back(std::make_unique<DeviceBuffer>(static_cast<size_t>(ws)));
            void* ws_ptr = workspaces.back()->data();
            auto* list = &layers;
            timed.push_back({engine, detail, q_bytes,
                             [list, ws_ptr, tuning, &a_dev, &c_dev, M](int i) {
                               qgru::cuda::QuantLinear& layer = *(*list)[static_cast<size_t>(i) % list->size()];
                               layer.set_tuning(tuning);  // the layers are shared by the rows of several tunings
                               layer.run(a_dev.data(), M, c_dev.data(), ws_ptr, nullptr);
                             },
                             {}});
          };
          for (const int target : o.targets) {
            add_layers("qgru", automatic, -1, target, 0);
            const bool same_as_auto = !automatic.empty() && automatic.front()->engine(M).engine == k::LinearEngine::Stripes;
            if (!same_as_auto) add_layers("qgru-stripes", stripes, -1, target, 0);
            for (const int block_rows : o.wgmma_rows) add_layers("qgru-wgmma", wgmma, -1, target, block_rows);
            for (const int config_index : config_indices) add_layers("qgru-legacy", legacy, config_index, target, 0);
          }
          if (!w16.empty()) {
            // Row-major C[M,N] = A[M,K]·W[K,N] is column-major C^T[N,M] = W^T[N,K]·A^T[K,M]: no transposes.
            timed.push_back({"cublas-fp16", "cublasGemmEx fp16, fp32 compute", f_bytes,
                             [&, M, K = K, N = N](int i) {
                               const float alpha = 1.0f, beta = 0.0f;
                               QGRU_CUBLAS_CHECK(blas::cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(N), static_cast<int>(M),
                                                                    static_cast<int>(K), &alpha, w16[static_cast<size_t>(i) % w16.size()].data(),
                                                                    CUDA_R_16F, static_cast<int>(N), a_dev.data(), CUDA_R_16F, static_cast<int>(K),
                                                                    &beta, c_dev.data(), CUDA_R_16F, static_cast<int>(N), CUBLAS_COMPUTE_32F,
                                                                    CUBLAS_GEMM_DEFAULT));
                             },
                             {}});
          }
          for (auto& t : timed) sample_us(t.call, 3);  // warm-up: first launches, cuBLAS heuristics
          for (int r = 0; r < o.rounds; ++r)
            for (auto& t : timed) t.samples.push_back(sample_us(t.call, o.iters));
          for (const auto& t : timed) {
            const double us = median(t.samples), gbps = t.weight_bytes / (us * 1e3);
            rows.push_back({bits, K, N, M, t.engine, t.detail, us, gbps, o.hbm_gbps > 0 ? gbps / o.hbm_gbps : -1});
          }
        }
        if (!flush()) return 1;
      }
    }
    QGRU_CUBLAS_CHECK(blas::cublasDestroy(handle));

    if (!flush()) return 1;
    return 0;
  } catch (const std::exception& e) {
    std::printf("FAILED: %s\n", e.what());
    return 1;
  }
}
