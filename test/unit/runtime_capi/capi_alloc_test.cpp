// No allocation on the step path: every operator new of this test binary is counted (the replacements
// below), and a CPU state's steps, after qgru_rt_state_create, must add none: codes and floats, one frame
// and several, multi-layer, both executors, N = 1 and N = 4, 16-bit activations too. (The runtime's own
// code allocates through operator new only: std containers and the aligned scratch arrays.)
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "capi_test_artifact.h"
#include "qgru/qgru_runtime.h"

namespace {
std::atomic<long> allocations{0};

void* counted(std::size_t size, std::size_t align) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  if (size == 0) size = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (size + align - 1) / align * align)
                                              : std::malloc(size);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t size) { return counted(size, 0); }
void* operator new[](std::size_t size) { return counted(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) { return counted(size, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t size, std::align_val_t a) { return counted(size, static_cast<std::size_t>(a)); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  try {
    return counted(size, 0);
  } catch (...) {
    return nullptr;
  }
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace qgru {
namespace {

TEST_CASE("a step allocates memory after the state was created") {
  {  // the counter counts: a vector's allocation is seen
    const long before = allocations.load();
    std::vector<int> probe(100);
    CHECK(allocations.load() > before);
    CHECK(probe.size() == 100);
  }
  for (const char* preset : {"int8", "int16-activations", "int16"}) {
    for (int N : {1, 4}) {
      CAPTURE(preset);
      CAPTURE(N);
      const int C = 6, H = 70, L = 2, T = 6;
      test::TestArtifact a = test::make_test_artifact(std::string("alloc_") + preset + std::to_string(N), preset, C, H, L, 1, T, N, 9u);
      qgru_rt_model* model = nullptr;
      REQUIRE(qgru_rt_model_open(a.json_path.c_str(), &model) == QGRU_RT_OK);
      for (qgru_rt_executor e : {QGRU_RT_EXECUTOR_FAST, QGRU_RT_EXECUTOR_REFERENCE}) {
        qgru_rt_context_options o = qgru_rt_context_options_default();
        o.executor = e;
        qgru_rt_context* context = nullptr;
        REQUIRE(qgru_rt_context_create(model, &o, &context) == QGRU_RT_OK);
        CAPTURE(qgru_rt_context_describe(context));
        qgru_rt_state* state = nullptr;
        REQUIRE(qgru_rt_state_create(context, N, &state) == QGRU_RT_OK);
        std::vector<int32_t> y(static_cast<size_t>(T) * N * H);
        std::vector<float> yf(y.size());
        const size_t frame = static_cast<size_t>(N) * C;
        const long before = allocations.load();
        for (int t = 0; t < T; ++t) CHECK(qgru_rt_step_codes(state, a.q_x.data() + t * frame, 1, y.data()) == QGRU_RT_OK);
        CHECK(qgru_rt_step_codes(state, a.q_x.data(), T, y.data()) == QGRU_RT_OK);
        CHECK(qgru_rt_step(state, a.c.x.data(), T, yf.data()) == QGRU_RT_OK);
        CHECK(qgru_rt_state_reset(state) == QGRU_RT_OK);
        CHECK(qgru_rt_step(state, a.c.x.data(), 1, nullptr) == QGRU_RT_OK);
        CHECK(allocations.load() - before == 0);
        qgru_rt_state_destroy(state);
        qgru_rt_context_destroy(context);
      }
      qgru_rt_model_close(model);
    }
  }
}

}  // namespace
}  // namespace qgru
