// Several contexts and states on several threads at once: each thread streams its own sequences through
// its own state (two contexts, both executors, one shared model) while the others do, and every thread's
// codes equal the single-threaded whole run. Run under the sanitizers (docs/HARDENING.md) this is the test
// that finds shared mutable state on the step and run paths.
#include <doctest/doctest.h>

#include <thread>
#include <vector>

#include "capi_test_artifact.h"
#include "qgru/qgru_runtime.hpp"

namespace qgru {
namespace {

TEST_CASE("streams on several threads disturb each other's codes") {
  const int C = 5, H = 48, L = 2, T = 12, N = 2;
  test::TestArtifact a = test::make_test_artifact("threads", "int8", C, H, L, 1, T, N, 12u);
  const QuantGruResult want = run_quantized_gru_codes(a.c.quantized, a.q_x.data(), T, N, nullptr);
  qgru_rt::Model model(a.json_path);
  qgru_rt_context_options reference = qgru_rt_context_options_default();
  reference.executor = QGRU_RT_EXECUTOR_REFERENCE;
  qgru_rt::Context fast(model), slow(model, reference);
  constexpr int kThreads = 4;
  std::vector<int> mismatches(kThreads, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      const qgru_rt::Context& context = i % 2 ? slow : fast;
      qgru_rt::State state(context, N);
      int bad = 0;
      for (int round = 0; round < 3; ++round) {
        std::vector<int32_t> y(want.output_codes.size());
        for (int t = 0; t < T; ++t) {
          state.step_codes(a.q_x.data() + static_cast<size_t>(t) * N * C, 1, y.data() + static_cast<size_t>(t) * N * H);
        }
        bad += y != want.output_codes;
        std::vector<int32_t> whole(want.output_codes.size());
        context.run_codes(a.q_x.data(), T, N, nullptr, whole.data(), nullptr);  // whole runs beside the steps
        bad += whole != want.output_codes;
        state.reset();
      }
      mismatches[static_cast<size_t>(i)] = bad;
    });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    CAPTURE(i);
    CHECK(mismatches[static_cast<size_t>(i)] == 0);
  }
}

}  // namespace
}  // namespace qgru
