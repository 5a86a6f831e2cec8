// The GPU driver of GPTQ (qgru/gptq/device_driver.h) run on the CPU through EmulatedOps (emulated_ops.h): its
// layouts, kernel order and cuBLAS / cuSOLVER arguments against the CPU path (gptq_quantize, HessianAccumulator)
// on iso and correlated layers, every column order, static groups, symmetric 3-bit, one group per row and dead
// columns. The emulation's BLAS sums in another order than OpenBLAS / LAPACK, as the GPU's does, so codes are
// judged as the GPU check judges them (test/cuda/gptq_check.cpp): each row's first differing code in processing
// order must be a near-tie by the driver's rounding margin; errors within 1%.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>

#include "emulated_ops.h"
#include "gptq_test_util.h"
#include "qgru/base/error.h"
#include "qgru/gptq/device_driver.h"
#include "qgru/gptq/device_plan.h"
#include "qgru/gptq/gptq.h"
#include "qgru/gptq/hessian.h"
#include "qgru/gptq/job.h"
#include "qgru/gptq/pack.h"

namespace {

using gptq_test::activations_kmajor;
using gptq_test::EmulatedOps;
using gptq_test::normal_values;

constexpr double kNearTie = 1e-6;

std::vector<float> to_rows(const std::vector<double>& X_kmajor, int64_t K, int64_t M) {  // [K, M] → [M, K]
  std::vector<float> rows(static_cast<size_t>(M * K));
  for (int64_t k = 0; k < K; ++k)
    for (int64_t t = 0; t < M; ++t) rows[static_cast<size_t>(t * K + k)] = static_cast<float>(X_kmajor[static_cast<size_t>(k * M + t)]);
  return rows;
}

double relative_error(const std::vector<double>& W, const qgru::gptq::GptqResult& r, const std::vector<double>& H) {
  const auto W_hat = qgru::gptq::dequantize(r);
  std::vector<double> D(W.size());
  for (size_t i = 0; i < D.size(); ++i) D[i] = W[i] - W_hat[i];
  return qgru::gptq::output_energy(D, r.N, r.K, H) / qgru::gptq::output_energy(W, r.N, r.K, H);
}

// Device driver on `ops` against the CPU path on the same H; returns the rows that parted at a near-tie.
int64_t check_driver(EmulatedOps& ops, const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                     const qgru::gptq::GptqOptions& options) {
  double* device_H = static_cast<double*>(ops.allocate(H.size() * sizeof(double)));
  ops.upload(device_H, H.data(), H.size() * sizeof(double));
  qgru::gptq::DeviceGptqRequest request;
  request.want_tie_margin = true;
  const auto out = qgru::gptq::device_gptq(ops, W, N, K, device_H, options, request);
  ops.release(device_H);
  CHECK(ops.live.empty());  // every device buffer released
  const auto cpu = qgru::gptq::gptq_quantize(W, N, K, H, options);
  const auto& dev = out.result;
  CHECK(dev.perm == cpu.perm);
  CHECK(dev.g_idx == cpu.g_idx);
  CHECK(dev.G == cpu.G);
  CHECK(dev.damp_used == cpu.damp_used);
  CHECK(dev.dead_columns == cpu.dead_columns);
  if (K * options.bits % 32 == 0 && N * options.bits % 32 == 0) {
    CHECK(out.qweight == qgru::gptq::pack_qweight(dev.codes, N, K, options.bits, "device"));
  }
  int64_t parted = 0, bad = 0;
  for (int64_t n = 0; n < N; ++n) {
    int64_t first = K;
    for (int64_t p = 0; p < K && first == K; ++p) {
      const size_t at = static_cast<size_t>(n * K + cpu.perm[static_cast<size_t>(p)]);
      if (dev.codes[at] != cpu.codes[at]) first = p;
    }
    if (first == K) {
      for (int64_t g = 0; g < cpu.G; ++g) {
        const size_t at = static_cast<size_t>(g * N + n);
        CHECK(dev.zeros[at] == cpu.zeros[at]);
        CHECK(std::fabs(dev.scales[at] - cpu.scales[at]) <= 1e-9 * cpu.scales[at]);
      }
      continue;
    }
    ++parted;
    const size_t at = static_cast<size_t>(n * K + cpu.perm[static_cast<size_t>(first)]);
    bad += !(out.tie_margin[at] < kNearTie);
  }
  CHECK(bad == 0);
  const double dev_err = relative_error(W, dev, H), cpu_err = relative_error(W, cpu, H);
  CHECK(std::fabs(dev_err - cpu_err) <= 0.01 * cpu_err);
  return parted;
}

}  // namespace

TEST_CASE("gptq_device_hessian_on_emulated_ops_matches_the_cpu_accumulator") {
  const int64_t K = 48, M = 100;
  const auto X = activations_kmajor(K, M, 6, 3);
  const auto rows = to_rows(X, K, M);
  std::vector<float> kmajor(X.begin(), X.end());
  qgru::gptq::HessianAccumulator cpu(K);
  cpu.add_token_major(rows.data(), M);
  const auto H = cpu.hessian();
  EmulatedOps ops;
  for (const char* product : {"syrk", "gemm"}) {
    CAPTURE(product);
    // 7 rows per chunk (12 bytes per value): chunks, a short last chunk, and both host layouts.
    qgru::gptq::DeviceHessianSum sum(ops, K, 12 * K * 7, qgru::gptq::parse_hessian_product(product, "test"));
    sum.add_token_major(rows.data(), 60);
    std::vector<float> rest(static_cast<size_t>(K * (M - 60)));  // tokens 60.. as [K, M − 60]
    for (int64_t k = 0; k < K; ++k)
      for (int64_t t = 60; t < M; ++t) rest[static_cast<size_t>(k * (M - 60) + t - 60)] = rows[static_cast<size_t>(t * K + k)];
    sum.add_feature_major(rest.data(), M - 60);
    CHECK(sum.tokens() == M);
    const auto Hd = sum.hessian();
    double max_h = 0.0, max_diff = 0.0;
    for (size_t i = 0; i < H.size(); ++i) {
      max_h = std::max(max_h, std::fabs(H[i]));
      max_diff = std::max(max_diff, std::fabs(H[i] - Hd[i]));
    }
    CHECK(max_diff <= 1e-12 * max_h);
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < i; ++j) CHECK(Hd[static_cast<size_t>(i * K + j)] == Hd[static_cast<size_t>(j * K + i)]);
  }
  CHECK(ops.live.empty());
  CHECK_THROWS_WITH_AS(qgru::gptq::parse_hessian_product("herk", "--hessian"),
                       "--hessian: 'herk' is not a Hessian product, expected syrk or gemm", qgru::Error);
}

TEST_CASE("gptq_device_driver_on_emulated_ops_matches_the_cpu_path_up_to_near_ties") {
  int64_t parted = 0;
  for (int rank : {0, 8}) {
    const int64_t N = 32, K = 128, M = 256;
    const auto X = activations_kmajor(K, M, rank, 41);
    auto H = gptq_test::hessian_plain(X, K, M);
    const auto W = normal_values(static_cast<size_t>(N * K), 17, 0.02);
    struct Case {
      const char* order;
      bool static_groups, sym;
      int bits;
      int64_t group_size, block_size;
    };
    const Case cases[] = {{"natural", false, false, 4, 32, 32},   {"act-order", false, false, 4, 32, 48},
                          {"group-aware", false, false, 4, 32, 40}, {"act-order", true, false, 4, 32, 32},
                          {"group-aware", false, true, 3, 64, 128}, {"act-order", false, false, 2, -1, 24},
                          {"natural", false, false, 8, 128, 1024}};
    for (const Case& c : cases) {
      CAPTURE(rank); CAPTURE(c.order); CAPTURE(c.static_groups); CAPTURE(c.bits); CAPTURE(c.group_size);
      qgru::gptq::GptqOptions options;
      qgru::gptq::set_column_order(options, c.order);
      options.static_groups = c.static_groups;
      options.sym = c.sym;
      options.bits = c.bits;
      options.group_size = c.group_size;
      options.block_size = c.block_size;
      EmulatedOps ops;
      parted += check_driver(ops, W, N, K, H, options);
    }
  }
  MESSAGE("rows parted at a near-tie: " << parted);
  // Dead columns: inputs 3 and 77 never active.
  const int64_t N = 16, K = 96, M = 200;
  auto X = activations_kmajor(K, M, 4, 5);
  for (int64_t t = 0; t < M; ++t) X[static_cast<size_t>(3 * M + t)] = X[static_cast<size_t>(77 * M + t)] = 0.0;
  const auto H = gptq_test::hessian_plain(X, K, M);
  const auto W = normal_values(static_cast<size_t>(N * K), 23, 0.02);
  EmulatedOps ops;
  qgru::gptq::GptqOptions options = qgru::gptq::recommended_options();
  check_driver(ops, W, N, K, H, options);
}

TEST_CASE("gptq_device_driver_refuses_as_the_cpu_path_and_releases_its_memory") {
  const int64_t N = 8, K = 16;
  const auto W = normal_values(static_cast<size_t>(N * K), 2, 0.02);
  std::vector<double> H(static_cast<size_t>(K * K), 0.0);
  for (int64_t i = 0; i < K; ++i) H[static_cast<size_t>(i * K + i)] = -1.0;  // negative definite
  qgru::gptq::GptqOptions options;
  options.group_size = 8;
  EmulatedOps ops;
  double* device_H = static_cast<double*>(ops.allocate(H.size() * sizeof(double)));
  ops.upload(device_H, H.data(), H.size() * sizeof(double));
  std::string cpu_message, device_message;
  try {
    qgru::gptq::gptq_quantize(W, N, K, H, options);
  } catch (const qgru::Error& e) {
    cpu_message = e.what();
  }
  try {
    qgru::gptq::device_gptq(ops, W, N, K, device_H, options);
  } catch (const qgru::Error& e) {
    device_message = e.what();
  }
  CHECK(!cpu_message.empty());
  CHECK(device_message == cpu_message);
  H[5] = NAN;
  ops.upload(device_H, H.data(), H.size() * sizeof(double));
  CHECK_THROWS_WITH_AS(qgru::gptq::device_gptq(ops, W, N, K, device_H, options), "gptq: Hessian has a non-finite entry (NaN or Inf in the activations?)", qgru::Error);
  ops.free = qgru::gptq::device_gptq_bytes(N, K, 128, 2, 4, false).total - 1;
  CHECK_THROWS_WITH_AS(qgru::gptq::device_gptq(ops, W, N, K, device_H, options),
                       doctest::Contains("gptq --device cuda: a [8, 16] layer needs"), qgru::Error);
  ops.release(device_H);
  CHECK(ops.live.empty());
}

// run_job with a JobDevice (what `qgru gptq --device cuda` sets) whose Hessian and GPTQ run on the emulated ops:
// the job takes its tokens, Hessian and result from the device, and the report agrees with the CPU job's.
TEST_CASE("gptq_job_on_a_device_reports_as_the_cpu_job") {
  const int64_t N = 32, K = 64, M = 300;
  const auto X = activations_kmajor(K, M, 4, 9);
  const auto rows = to_rows(X, K, M);
  std::vector<float> weight(static_cast<size_t>(N * K));
  const auto w = normal_values(weight.size(), 4, 0.02);
  for (size_t i = 0; i < w.size(); ++i) weight[i] = static_cast<float>(w[i]);
  qgru::SafetensorsFile input;
  input.tensors["fc.weight"] = qgru::Tensor::from_vector<float>({N, K}, weight);
  const auto job_for = [&](qgru::SafetensorsFile* checkpoint) {
    qgru::gptq::JobOptions job;
    job.weights_path = "weights (in memory)";
    job.weights = &input;
    job.layers.push_back({"fc.weight", {}, ""});
    job.activation_arrays["fc.weight"].emplace_back("x0", qgru::Tensor::from_vector<float>({200, K}, std::vector<float>(rows.begin(), rows.begin() + 200 * K)));
    job.activation_arrays["fc.weight"].emplace_back("x1", qgru::Tensor::from_vector<float>({M - 200, K}, std::vector<float>(rows.begin() + 200 * K, rows.end())));
    job.checkpoint = checkpoint;
    return job;
  };
  qgru::SafetensorsFile cpu_checkpoint, device_checkpoint;
  const auto cpu = qgru::gptq::run_job(job_for(&cpu_checkpoint));

  EmulatedOps ops;
  struct EmulatedHessian : qgru::gptq::JobDevice::Hessian {
    EmulatedHessian(EmulatedOps& o, int64_t K) : sum(o, K, 12 * K * 64) {}
    void add(const std::vector<float>& values, int64_t count, bool feature_major) override {
      if (feature_major) sum.add_feature_major(values.data(), count);
      else sum.add_token_major(values.data(), count);
    }
    std::vector<double> finish() override { return sum.hessian(); }
    qgru::gptq::DeviceHessianSum sum;
  };
  int hessians = 0, quantizations = 0;
  auto job = job_for(&device_checkpoint);
  job.device.name = "emulated";
  job.device.hessian = [&](int64_t k) {
    ++hessians;
    return std::make_unique<EmulatedHessian>(ops, k);
  };
  job.device.quantize = [&](const std::vector<double>& W, int64_t n, int64_t k, const std::vector<double>& H,
                            const qgru::gptq::GptqOptions& options) {
    ++quantizations;
    double* device_H = static_cast<double*>(ops.allocate(H.size() * sizeof(double)));
    ops.upload(device_H, H.data(), H.size() * sizeof(double));
    auto out = qgru::gptq::device_gptq(ops, W, n, k, device_H, options);
    ops.release(device_H);
    return out.result;
  };
  const auto device = qgru::gptq::run_job(job);
  CHECK(hessians == 1);
  CHECK(quantizations == 1);
  REQUIRE(device.size() == 1);
  CHECK(device[0].tokens == M);
  CHECK(device[0].tokens == cpu[0].tokens);
  CHECK(std::fabs(device[0].gptq_error - cpu[0].gptq_error) <= 0.01 * cpu[0].gptq_error);
  CHECK(device[0].rtn_error == cpu[0].rtn_error);
  CHECK(device_checkpoint.tensors.count("fc.qweight") == 1);
  CHECK(device_checkpoint.tensors.at("fc.g_idx").bytes == cpu_checkpoint.tensors.at("fc.g_idx").bytes);
  CHECK(ops.live.empty());
}

// Rows a framework left in device memory (qgru.Hessian.add of a CUDA tensor): read in place with their row stride,
// the same H bit for bit as the host rows (the same chunks in the same order); a row with NaN or ±Inf refuses the
// whole call before anything is accumulated, as the host paths refuse it.
TEST_CASE("gptq_device_hessian_reads_device_rows_in_place_and_refuses_nonfinite_ones_whole") {
  const int64_t K = 40, M = 90, ld = K + 3;
  const auto rows = to_rows(activations_kmajor(K, M, 5, 11), K, M);
  // Padded rows: the padding is NaN, so reading past K features would be refused or would poison H.
  std::vector<float> padded(static_cast<size_t>(M * ld), std::nanf(""));
  for (int64_t t = 0; t < M; ++t) std::copy_n(rows.begin() + t * K, K, padded.begin() + t * ld);
  EmulatedOps ops;
  const uint64_t staging = 12 * K * 16;  // 16 rows per chunk: several chunks, a short last one
  qgru::gptq::DeviceHessianSum host(ops, K, staging), device(ops, K, staging);
  host.add_token_major(rows.data(), M);

  std::vector<float> bad = padded;
  bad[static_cast<size_t>(70 * ld + 7)] = INFINITY;  // a row in the fifth chunk
  CHECK_THROWS_WITH_AS(device.add_checked_device_rows(bad.data(), M, ld, "layer.0 rows"),
                       "layer.0 rows: an element is NaN or infinite (as float32); activations must be finite",
                       qgru::Error);
  CHECK(device.tokens() == 0);
  CHECK_THROWS_WITH_AS(device.add_checked_device_rows(padded.data(), M, K - 1, "layer.0 rows"),
                       "layer.0 rows: 90 rows of stride 39, expected rows of 40 features (stride >= 40)", qgru::Error);
  device.add_checked_device_rows(padded.data(), 0, ld, "layer.0 rows");  // nothing to add
  device.add_checked_device_rows(padded.data(), 50, ld, "layer.0 rows");
  device.add_checked_device_rows(padded.data() + 50 * ld, M - 50, ld, "layer.0 rows");
  CHECK(device.tokens() == M);
  // 50 is not a multiple of the chunk, so the chunks differ from the host's: equal up to summation order.
  const auto H = host.hessian(), Hd = device.hessian();
  double max_h = 0.0, max_diff = 0.0;
  for (size_t i = 0; i < H.size(); ++i) {
    max_h = std::max(max_h, std::fabs(H[i]));
    max_diff = std::max(max_diff, std::fabs(H[i] - Hd[i]));
  }
  CHECK(max_diff <= 1e-12 * max_h);
  qgru::gptq::DeviceHessianSum whole(ops, K, staging);  // one call, the host's chunks: bit for bit
  whole.add_checked_device_rows(padded.data(), M, ld, "layer.0 rows");
  CHECK(whole.hessian() == H);
}

TEST_CASE("gptq_job_device_without_device_memory_refuses_device_rows") {
  struct HostOnly : qgru::gptq::JobDevice::Hessian {
    void add(const std::vector<float>&, int64_t, bool) override {}
    std::vector<double> finish() override { return {}; }
  } hessian;
  CHECK_THROWS_WITH_AS(hessian.add_device_rows(0x1000, 4, 8, 0, "x rows"),
                       "x rows: rows in GPU memory need a Hessian accumulated on the GPU (device cuda)", qgru::Error);
}
