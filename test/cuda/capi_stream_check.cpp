// The runtime C API's streaming on a CUDA context (qgru_rt_step / qgru_rt_step_codes, the state kept on the device by
// QuantGruCudaStream) against one whole reference run of the sequence: every preset, 1 and 3 layers, both cells; one
// frame, three frames and one by one; floats; reset; a state set from codes; no device allocation while stepping.
// Then several threads on one CUDA context at once (the C API's contract: runs and states of one context on several
// threads), on the device flow and on the host flow: each thread's codes equal the single-threaded reference run.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "../unit/runtime_capi/capi_test_artifact.h"
#include "gpu_checks.h"
#include "qgru/qgru_runtime.hpp"
#include "qgru/runtime/quant_executor.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda_test {

namespace {

// Four threads on one CUDA context (flow: QGRU_CUDA_GRU_FLOW as set by the caller), each streaming its own state
// frame by frame beside whole runs of the others, three rounds; every thread's codes must equal the reference.
int check_capi_threads(const char* flow) {
  const int C = 5, H = 48, L = 2, T = 12, N = 2;
  test::TestArtifact a = test::make_test_artifact(std::string("gpu_threads_") + flow, "int8", C, H, L, 1, T, N, 12u);
  const QuantGruResult want = run_quantized_gru_codes(a.c.quantized, a.q_x.data(), T, N, nullptr);
  qgru_rt::Model model(a.json_path);
  qgru_rt_context_options options = qgru_rt_context_options_default();
  options.device = QGRU_RT_DEVICE_CUDA;
  const qgru_rt::Context context(model, options);
  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, -1);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      try {
        qgru_rt::State state(context, N);
        int bad = 0;
        for (int round = 0; round < 3; ++round) {
          std::vector<int32_t> y(want.output_codes.size(), -7), whole(want.output_codes.size(), -7);
          for (int t = 0; t < T; ++t) {
            state.step_codes(a.q_x.data() + static_cast<size_t>(t) * N * C, 1, y.data() + static_cast<size_t>(t) * N * H);
          }
          bad += y != want.output_codes;
          context.run_codes(a.q_x.data(), T, N, nullptr, whole.data(), nullptr);  // whole runs beside the steps
          bad += whole != want.output_codes;
          state.reset();
        }
        mismatches[static_cast<size_t>(i)] = bad;
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(i)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  int failures = 0;
  for (int i = 0; i < kThreads; ++i) {
    const bool ok = errors[static_cast<size_t>(i)].empty() && mismatches[static_cast<size_t>(i)] == 0;
    std::printf("%s C API on CUDA, %d threads on one context (flow %s), thread %d: %d mismatching run(s)%s%s\n",
                ok ? "ok  " : "FAIL", kThreads, flow, i, mismatches[static_cast<size_t>(i)],
                errors[static_cast<size_t>(i)].empty() ? "" : "; ", errors[static_cast<size_t>(i)].c_str());
    failures += ok ? 0 : 1;
  }
  return failures;
}

}  // namespace

int check_capi_stream() {
  // The C API's CUDA states stream on the device on the device flow only (opt-in until this check has passed on a GPU);
  // the environment's value comes back at the end, for the checks after this one.
  const char* before = std::getenv("QGRU_CUDA_GRU_FLOW");
  const std::string saved = before != nullptr ? before : "";
  ::setenv("QGRU_CUDA_GRU_FLOW", "device", 1);
  int failures = 0;
  for (const char* preset : {"int8", "int16-activations", "int16"}) {
    for (const int L : {1, 3}) {
      for (const bool linear_before_reset : {true, false}) {
        const int C = 7, H = 40, T = 8, N = 3;
        test::TestArtifact a = test::make_test_artifact(std::string("gpu_stream_") + preset + std::to_string(L) +
                                                            (linear_before_reset ? "" : "_lbr0"),
                                                        preset, C, H, L, 1, T, N, 3u, linear_before_reset);
        const QuantGruResult want = run_quantized_gru_codes(a.c.quantized, a.q_x.data(), T, N, nullptr);
        const QuantGruResult want_f = run_quantized_gru(a.c.quantized, a.c.x.data(), T, N, nullptr);
        qgru_rt::Model model(a.json_path);
        qgru_rt_context_options options = qgru_rt_context_options_default();
        options.device = QGRU_RT_DEVICE_CUDA;
        qgru_rt::Context context(model, options);
        qgru_rt::State state(context, N);
        const int64_t allocations = cuda::device_allocation_count();
        const size_t frame_x = static_cast<size_t>(N) * C, frame_y = static_cast<size_t>(N) * H;
        std::vector<int32_t> y(want.output_codes.size(), -7), h(want.h_n_codes.size());
        state.step_codes(a.q_x.data(), 1, y.data());
        state.step_codes(a.q_x.data() + frame_x, 3, y.data() + frame_y);
        for (int t = 4; t < T; ++t) state.step_codes(a.q_x.data() + t * frame_x, 1, y.data() + t * frame_y);
        state.get_codes(h.data());
        bool ok = y == want.output_codes && h == want.h_n_codes;
        state.reset();
        std::vector<float> yf(want_f.output.size());
        state.step(a.c.x.data(), T, yf.data());
        state.get_codes(h.data());
        ok = ok && yf == want_f.output && h == want_f.h_n_codes;
        // From a set state: the second half from the first half's h_n.
        const QuantGruResult first = run_quantized_gru_codes(a.c.quantized, a.q_x.data(), 4, N, nullptr);
        state.set_codes(first.h_n_codes.data());
        std::vector<int32_t> y2(static_cast<size_t>(4) * frame_y);
        state.step_codes(a.q_x.data() + 4 * frame_x, 4, y2.data());
        ok = ok && std::equal(y2.begin(), y2.end(), want.output_codes.begin() + static_cast<std::ptrdiff_t>(4 * frame_y));
        const int64_t allocated = cuda::device_allocation_count() - allocations;
        ok = ok && allocated == 0;
        std::printf("%s C API streaming on CUDA %-17s L=%d lbr=%d [%s]: %lld allocation(s) while streaming\n",
                    ok ? "ok  " : "FAIL", preset, L, linear_before_reset ? 1 : 0, context.describe().c_str(),
                    static_cast<long long>(allocated));
        failures += ok ? 0 : 1;
      }
    }
  }
  failures += check_capi_threads("device");
  ::setenv("QGRU_CUDA_GRU_FLOW", "host", 1);
  failures += check_capi_threads("host");
  if (before != nullptr) {
    ::setenv("QGRU_CUDA_GRU_FLOW", saved.c_str(), 1);
  } else {
    ::unsetenv("QGRU_CUDA_GRU_FLOW");
  }
  return failures;
}

}  // namespace qgru::cuda_test
