// The runtime C API's streaming on a CUDA context (qgru_rt_step / qgru_rt_step_codes, the state kept on the device by
// QuantGruCudaStream) against one whole reference run of the sequence: every preset, 1 and 3 layers, both cells; one
// frame, three frames and one by one; floats; reset; a state set from codes; no device allocation while stepping.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "../unit/runtime_capi/capi_test_artifact.h"
#include "gpu_checks.h"
#include "qgru/qgru_runtime.hpp"
#include "qgru/runtime/quant_executor.h"
#include "qgru_cuda/device_buffer.h"

namespace qgru::cuda_test {

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
  if (before != nullptr) {
    ::setenv("QGRU_CUDA_GRU_FLOW", saved.c_str(), 1);
  } else {
    ::unsetenv("QGRU_CUDA_GRU_FLOW");
  }
  return failures;
}

}  // namespace qgru::cuda_test
