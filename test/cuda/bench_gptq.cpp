// Benchmark: GPTQ on the GPU from activation rows to packed words (qgru_cuda/gptq_device.h), per layer shape:
//   hessian   `rows` activation rows generated on the device (gptq_rows.cu; their generation timed apart and
//             not counted), widened and accumulated by DeviceHessian (cublasDsyrk);
//   gptq      gptq_quantize_device on that H, with `qgru gptq`'s defaults (4 bits, group 128, group-aware
//             order, damp 0.01, block 128): W uploaded, plan, Cholesky, blocks, packing, qweight, scales and
//             zero points downloaded (DeviceGptqOutput::seconds).
//   seconds = hessian + gptq, host wall clock around synchronized work, after one small warm-up layer.
// rel_err = ‖(W − Ŵ)X‖² / ‖WX‖² through H (gptq::output_energy), Ŵ from the device's codes and scales; cpu_rel_err
// the same for the CPU path (gptq_quantize) run on the same H downloaded (so the two differ only by the GPTQ
// steps), unless --no-cpu. W ~ N(0, 0.02²) (seeded, host).
// Each shape runs once per Hessian product (--hessian: dsyrk on one triangle, dgemm on the whole matrix), the CPU
// reference with the first only. Markdown on stdout; with --json FILE, a JSON array of rows
//   {"K","N","rows","device","hessian_product","seconds","hessian_seconds","gptq_seconds","rel_err",
//    "cpu_rel_err","cpu_seconds","card","date","commit"}  (cpu_rel_err, cpu_seconds null where not run).
// Without a GPU it prints "no usable GPU: <reason>" and exits 1.
// Usage: bench_cuda_gptq [--shapes NxK[,NxK...]] [--rows M] [--hessian syrk,gemm] [--no-cpu] [--commit SHA]
//   [--json FILE]      defaults: --shapes 4096x4096,4096x11008 --rows 262144 --hessian syrk,gemm
#include <cuda_runtime.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "bench_timing.h"
#include "gptq_rows.h"
#include "qgru/gptq/gptq.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/gptq_device.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

struct Row {
  std::string hessian_product;
  int64_t N, K, rows;
  double seconds, hessian_seconds, gptq_seconds, generate_seconds, rel_err, cpu_rel_err, cpu_seconds;
};

double relative_error(const std::vector<double>& W, const qgru::gptq::GptqResult& result, const std::vector<double>& H) {
  const std::vector<double> W_hat = qgru::gptq::dequantize(result);
  std::vector<double> D(W.size());
  for (size_t i = 0; i < D.size(); ++i) D[i] = W[i] - W_hat[i];
  return qgru::gptq::output_energy(D, result.N, result.K, H) / qgru::gptq::output_energy(W, result.N, result.K, H);
}

Row run_shape(int64_t N, int64_t K, int64_t M, qgru::gptq::HessianProduct product, bool cpu, bool report) {
  std::mt19937 rng(static_cast<uint32_t>(N * 31 + K));
  std::normal_distribution<double> normal(0.0, 0.02);
  std::vector<double> W(static_cast<size_t>(N * K));
  for (double& w : W) w = normal(rng);
  const int64_t chunk = 16384;
  qgru::cuda::DeviceBuffer rows(static_cast<size_t>(chunk * K) * sizeof(float));
  // Generation alone, to report (not counted).
  auto start = Clock::now();
  for (int64_t t0 = 0; t0 < M; t0 += chunk) {
    qgru::cuda_test::generate_rows(static_cast<float*>(rows.data()), t0, std::min(chunk, M - t0), K, 7, nullptr);
  }
  cudaDeviceSynchronize();
  const double generate_seconds = seconds_since(start);
  // Hessian: generation and accumulation interleaved on one stream; the generation time is taken off.
  start = Clock::now();
  qgru::cuda::DeviceHessian hessian(K, nullptr, product);
  for (int64_t t0 = 0; t0 < M; t0 += chunk) {
    const int64_t count = std::min(chunk, M - t0);
    qgru::cuda_test::generate_rows(static_cast<float*>(rows.data()), t0, count, K, 7, nullptr);
    hessian.add_device_rows(static_cast<const float*>(rows.data()), count, K);
  }
  const double* H = hessian.device_hessian();
  cudaDeviceSynchronize();
  const double hessian_seconds = std::max(0.0, seconds_since(start) - generate_seconds);
  qgru::cuda::DeviceGptqRequest request;
  request.want_codes = report;
  const qgru::cuda::DeviceGptqOutput out =
      qgru::cuda::gptq_quantize_device(W, N, K, H, qgru::gptq::recommended_options(), request);
  // The driver's own clock: from its first step to the packed words, scales and zero points on the host (the
  // codes the error below needs are downloaded after it stops).
  const double gptq_seconds = out.seconds;
  Row row{qgru::gptq::hessian_product_name(product), N, K, M, hessian_seconds + gptq_seconds, hessian_seconds, gptq_seconds, generate_seconds, NAN, NAN, NAN};
  if (!report) return row;
  const std::vector<double> H_host = hessian.hessian();
  row.rel_err = relative_error(W, out.result, H_host);
  if (cpu) {
    start = Clock::now();
    const qgru::gptq::GptqResult cpu_result = qgru::gptq::gptq_quantize(W, N, K, H_host, qgru::gptq::recommended_options());
    row.cpu_seconds = seconds_since(start);
    row.cpu_rel_err = relative_error(W, cpu_result, H_host);
  }
  return row;
}

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  size_t at = 0;
  while (at <= list.size()) {
    const size_t comma = list.find(',', at);
    const size_t end = comma == std::string::npos ? list.size() : comma;
    if (end > at) items.push_back(list.substr(at, end - at));
    at = end + 1;
  }
  return items;
}

std::string number_or_null(double value) {
  if (std::isnan(value)) return "null";
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::string shapes = "4096x4096,4096x11008", products = "syrk,gemm", json, commit = "unknown";
  int64_t M = 262144;
  bool cpu = true;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--shapes" && i + 1 < argc) shapes = argv[++i];
    else if (arg == "--rows" && i + 1 < argc) M = std::atoll(argv[++i]);
    else if (arg == "--hessian" && i + 1 < argc) products = argv[++i];
    else if (arg == "--no-cpu") cpu = false;
    else if (arg == "--commit" && i + 1 < argc) commit = argv[++i];
    else if (arg == "--json" && i + 1 < argc) json = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--shapes NxK[,NxK...]] [--rows M] [--hessian syrk,gemm] [--no-cpu] [--commit SHA] "
                   "[--json FILE]\n", argv[0]);
      return 2;
    }
  }
  const qgru::cuda::DeviceProbe probe = qgru::cuda::probe_devices();
  if (probe.device_count == 0) {
    std::printf("no usable GPU: %s\n", probe.reason.c_str());
    return 1;
  }
  try {
    const std::string card = qgru::cuda::device_name();
    const std::string date = qgru::cuda::bench::utc_date();
    std::vector<qgru::gptq::HessianProduct> hessian_products;
    for (const std::string& name : split(products)) {
      hessian_products.push_back(qgru::gptq::parse_hessian_product(name, "--hessian"));
    }
    for (qgru::gptq::HessianProduct product : hessian_products) {
      run_shape(256, 512, 4096, product, false, false);  // warm-up: module loading, cuBLAS and cuSOLVER handles
    }
    std::vector<Row> rows;
    std::printf("| N×K | rows | Hessian product | seconds | Hessian s | GPTQ s | rel_err | CPU rel_err | CPU s | "
                "(row generation s) |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const std::string& shape : split(shapes)) {
      const size_t x = shape.find('x');
      const int64_t N = std::atoll(shape.substr(0, x).c_str()), K = std::atoll(shape.substr(x + 1).c_str());
      bool first = true;
      for (qgru::gptq::HessianProduct product : hessian_products) {
        const Row r = run_shape(N, K, M, product, cpu && first, true);  // the CPU reference once per shape
        first = false;
        rows.push_back(r);
        std::printf("| %lld×%lld | %lld | %s | %.3f | %.3f | %.3f | %s | %s | %s | %.3f |\n", static_cast<long long>(N),
                    static_cast<long long>(K), static_cast<long long>(M), r.hessian_product.c_str(), r.seconds,
                    r.hessian_seconds, r.gptq_seconds, number_or_null(r.rel_err).c_str(),
                    number_or_null(r.cpu_rel_err).c_str(), number_or_null(r.cpu_seconds).c_str(), r.generate_seconds);
        std::fflush(stdout);
      }
    }
    if (!json.empty()) {
      FILE* file = std::fopen(json.c_str(), "w");
      if (file == nullptr) {
        std::fprintf(stderr, "%s: cannot write\n", json.c_str());
        return 1;
      }
      std::fprintf(file, "[\n");
      for (size_t i = 0; i < rows.size(); ++i) {
        const Row& r = rows[i];
        std::fprintf(file,
                     "  {\"K\": %lld, \"N\": %lld, \"rows\": %lld, \"device\": \"cuda\", \"hessian_product\": \"%s\", "
                     "\"seconds\": %.4f, "
                     "\"hessian_seconds\": %.4f, \"gptq_seconds\": %.4f, \"rel_err\": %s, \"cpu_rel_err\": %s, "
                     "\"cpu_seconds\": %s, \"card\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}%s\n",
                     static_cast<long long>(r.K), static_cast<long long>(r.N), static_cast<long long>(r.rows),
                     r.hessian_product.c_str(), r.seconds,
                     r.hessian_seconds, r.gptq_seconds, number_or_null(r.rel_err).c_str(),
                     number_or_null(r.cpu_rel_err).c_str(), number_or_null(r.cpu_seconds).c_str(), card.c_str(), date.c_str(),
                     commit.c_str(), i + 1 < rows.size() ? "," : "");
      }
      std::fprintf(file, "]\n");
      std::fclose(file);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_gptq: %s\n", e.what());
    return 1;
  }
  return 0;
}
