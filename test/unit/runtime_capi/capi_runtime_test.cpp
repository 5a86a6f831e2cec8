// The runtime C API (qgru/qgru_runtime.h) and its C++ wrapper, as a product uses them: artifacts opened from
// files and from memory, whole runs equal to the reference executor, streaming equal to the whole run on
// every preset (multi-layer, several streams, both executors, codes and floats), and every refusal a status
// with a message that names what was wrong.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "capi_test_artifact.h"
#include "qgru/qgru_runtime.h"
#include "qgru/qgru_runtime.hpp"

namespace qgru {
namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

qgru_rt_context_options cpu(qgru_rt_executor executor) {
  qgru_rt_context_options o = qgru_rt_context_options_default();
  o.executor = executor;
  return o;
}

TEST_CASE("the API version or the shapes and quantization read through the C API drift from the artifact") {
  CHECK(QGRU_RT_VERSION_COMPATIBLE());
  CHECK(std::string(qgru_rt_library_version()).size() > 0);
  test::TestArtifact a = test::make_test_artifact("shape", "int16-activations", 5, 9, 2, 2, 3, 2, 1u);
  qgru_rt::Model model(a.json_path);
  const qgru_rt_shape s = model.shape();
  CHECK(s.input_size == 5);
  CHECK(s.hidden_size == 9);
  CHECK(s.num_layers == 2);
  CHECK(s.num_directions == 2);
  CHECK(s.output_size == 18);
  for (int l = 0; l < 2; ++l) {
    for (int d = 0; d < 2; ++d) {
      for (qgru_rt_tensor t : {QGRU_RT_TENSOR_X, QGRU_RT_TENSOR_H}) {
        const TensorQuant& want = a.c.quantized.cell(l, d).q(t == QGRU_RT_TENSOR_X ? GruTensor::x : GruTensor::h);
        const qgru_rt_quant got = model.quant(t, l, d);
        CHECK(got.bits == want.bits);
        CHECK(got.is_unsigned == (want.is_unsigned ? 1 : 0));
        CHECK(got.shift == want.shift);
        CHECK(got.zero_point == want.zp);
        CHECK(got.code_min == want.qmin());
        CHECK(got.code_max == want.qmax());
        CHECK(got.scale == want.scale());
      }
    }
  }
  qgru_rt_quant q;
  CHECK(qgru_rt_model_quant(model.get(), QGRU_RT_TENSOR_H, 2, 0, &q) == QGRU_RT_INVALID_ARGUMENT);
  CHECK(std::string(qgru_rt_last_error()).find("layer 2") != std::string::npos);
  CHECK(qgru_rt_model_quant(model.get(), static_cast<qgru_rt_tensor>(7), 0, 0, &q) == QGRU_RT_INVALID_ARGUMENT);
}

TEST_CASE("whole runs through the C API drift from the reference executor (files, memory, codes, floats)") {
  test::TestArtifact a = test::make_test_artifact("whole", "int8", 6, 33, 2, 2, 5, 3, 2u);
  const QuantizedGru& gru = a.c.quantized;
  const QuantGruResult want = run_quantized_gru_codes(gru, a.q_x.data(), a.c.T, a.c.N, nullptr);
  const std::string tensor_path = a.json_path.substr(0, a.json_path.size() - 5) + ".safetensors";
  const std::string json = read_bytes(a.json_path), tensors = read_bytes(tensor_path);
  qgru_rt::Model from_file(a.json_path);
  qgru_rt::Model from_memory(json, tensors.data(), tensors.size());
  for (const qgru_rt::Model* m : {&from_file, &from_memory}) {
    for (qgru_rt_executor e : {QGRU_RT_EXECUTOR_FAST, QGRU_RT_EXECUTOR_REFERENCE}) {
      qgru_rt::Context context(*m, cpu(e));
      CAPTURE(context.describe());
      std::vector<int32_t> y(want.output_codes.size(), -7), hn(want.h_n_codes.size(), -7);
      context.run_codes(a.q_x.data(), a.c.T, a.c.N, nullptr, y.data(), hn.data());
      CHECK(y == want.output_codes);
      CHECK(hn == want.h_n_codes);
      std::vector<float> yf(want.output.size()), hnf(want.h_n.size());
      context.run(a.c.x.data(), a.c.T, a.c.N, nullptr, yf.data(), hnf.data());
      CHECK(yf == want.output);
      CHECK(hnf == want.h_n);
    }
  }
  qgru_rt::Context reference(from_file, cpu(QGRU_RT_EXECUTOR_REFERENCE));
  CHECK(reference.describe() == "cpu reference (requested)");
}

TEST_CASE("streaming through the C API drifts from the whole run (every preset, multi-layer, both executors, both cells)") {
  for (const std::string& preset : bitwidth_preset_names()) {
   for (bool linear_before_reset : {true, false}) {
    if (!linear_before_reset && preset == "int16") continue;  // 16-bit tables: the other presets cover the cell
    CAPTURE(preset);
    CAPTURE(linear_before_reset);
    const int C = 7, H = 40, L = 3, T = 8, N = 3;
    test::TestArtifact a = test::make_test_artifact("stream_" + preset + (linear_before_reset ? "" : "_lbr0"), preset, C, H,
                                                    L, 1, T, N, 3u, linear_before_reset);
    const QuantGruResult want = run_quantized_gru_codes(a.c.quantized, a.q_x.data(), T, N, nullptr);
    qgru_rt::Model model(a.json_path);
    for (qgru_rt_executor e : {QGRU_RT_EXECUTOR_FAST, QGRU_RT_EXECUTOR_REFERENCE}) {
      qgru_rt::Context context(model, cpu(e));
      CAPTURE(context.describe());
      qgru_rt::State state(context, N);
      for (int pass = 0; pass < 2; ++pass) {  // the second pass after reset() must start from zeros again
        std::vector<int32_t> y(want.output_codes.size(), -7);
        const size_t frame_x = static_cast<size_t>(N) * C, frame_y = static_cast<size_t>(N) * H;
        state.step_codes(a.q_x.data(), 1, y.data());                          // one frame,
        state.step_codes(a.q_x.data() + frame_x, 3, y.data() + frame_y);      // three,
        for (int t = 4; t < T; ++t) state.step_codes(a.q_x.data() + t * frame_x, 1, y.data() + t * frame_y);  // one by one
        CHECK(y == want.output_codes);
        std::vector<int32_t> h(want.h_n_codes.size());
        state.get_codes(h.data());
        CHECK(h == want.h_n_codes);
        state.reset();
      }
      // Floats: step quantizes each frame as run does, and dequantizes y as it does.
      std::vector<float> yf(want.output.size());
      state.step(a.c.x.data(), T, yf.data());
      CHECK(yf == want.output);
      state.reset();
      // A state set from codes continues from them: the second half from the first half's h_n.
      const QuantGruResult first = run_quantized_gru_codes(a.c.quantized, a.q_x.data(), 4, N, nullptr);
      state.set_codes(first.h_n_codes.data());
      std::vector<int32_t> y2(static_cast<size_t>(4) * N * H);
      state.step_codes(a.q_x.data() + 4 * static_cast<size_t>(N) * C, 4, y2.data());
      CHECK(std::equal(y2.begin(), y2.end(), want.output_codes.begin() + static_cast<std::ptrdiff_t>(4 * N * H)));
    }
   }
  }
}

TEST_CASE("a padded batch through the C API drifts from each of its sequences run alone over its own frames") {
  // Bidirectional and two layers: the reverse direction must start at each sequence's own last frame.
  const int C = 5, H = 24, L = 2, D = 2, T = 7, N = 5;
  test::TestArtifact a = test::make_test_artifact("lengths", "int8", C, H, L, D, T, N, 6u);
  const QuantizedGru& gru = a.c.quantized;
  const std::vector<int32_t> lengths = {T, 0, 3, 1, T - 2};
  // The expected codes and values from the reference executor, one sequence at a time (T = its length, N = 1):
  // its rows where it has frames, the code of 0.0 (0.0) after; its h_n.
  const int Y = D * H;
  std::vector<int32_t> want_y(static_cast<size_t>(T) * N * Y), want_hn(static_cast<size_t>(L) * D * N * H);
  std::vector<float> want_yf(want_y.size()), want_hnf(want_hn.size());
  for (int n = 0; n < N; ++n) {
    const int steps = lengths[static_cast<size_t>(n)];
    const std::vector<int32_t> x_alone = test::sequence_alone(a.q_x, N, C, n, steps);
    const QuantGruResult alone = run_quantized_gru_codes(gru, x_alone.data(), steps, 1, nullptr);
    for (int t = 0; t < T; ++t) {
      for (int k = 0; k < Y; ++k) {
        const size_t at = (static_cast<size_t>(t) * N + n) * Y + k;
        const bool frame = t < steps;
        want_y[at] = frame ? alone.output_codes[static_cast<size_t>(t) * Y + k] : gru.cell(L - 1, k / H).q(GruTensor::h).zp;
        want_yf[at] = frame ? alone.output[static_cast<size_t>(t) * Y + k] : 0.0f;
      }
    }
    for (int cell = 0; cell < L * D; ++cell) {
      for (int j = 0; j < H; ++j) {
        const size_t at = (static_cast<size_t>(cell) * N + n) * H + j;
        want_hn[at] = alone.h_n_codes[static_cast<size_t>(cell) * H + j];
        want_hnf[at] = alone.h_n[static_cast<size_t>(cell) * H + j];
      }
    }
  }
  qgru_rt::Model model(a.json_path);
  for (qgru_rt_executor e : {QGRU_RT_EXECUTOR_FAST, QGRU_RT_EXECUTOR_REFERENCE}) {
    qgru_rt::Context context(model, cpu(e));
    CAPTURE(context.describe());
    std::vector<int32_t> y(want_y.size(), -7), hn(want_hn.size(), -7);
    context.run_codes(a.q_x.data(), T, N, lengths.data(), nullptr, y.data(), hn.data());
    CHECK(y == want_y);
    CHECK(hn == want_hn);
    std::vector<float> yf(want_yf.size(), -7.0f), hnf(want_hnf.size(), -7.0f);
    context.run(a.c.x.data(), T, N, lengths.data(), nullptr, yf.data(), hnf.data());
    CHECK(yf == want_yf);
    CHECK(hnf == want_hnf);
    // No lengths: the run without them.
    std::vector<int32_t> y_all(want_y.size()), y_null(want_y.size());
    context.run_codes(a.q_x.data(), T, N, nullptr, y_all.data(), nullptr);
    context.run_codes(a.q_x.data(), T, N, nullptr, nullptr, y_null.data(), nullptr);
    CHECK(y_null == y_all);
  }
  // A length outside [0, T]: refused before anything runs, the message names the sequence and the bound.
  qgru_rt::Context context(model, cpu(QGRU_RT_EXECUTOR_FAST));
  for (const int bad : {T + 1, -1}) {
    CAPTURE(bad);
    std::vector<int32_t> bad_lengths = lengths;
    bad_lengths[3] = bad;
    std::vector<int32_t> y(want_y.size(), -7);
    CHECK(qgru_rt_run_codes_lengths(context.get(), a.q_x.data(), T, N, bad_lengths.data(), nullptr, y.data(), nullptr) ==
          QGRU_RT_INVALID_ARGUMENT);
    const std::string message = qgru_rt_last_error();
    CHECK(message.find("qgru_rt_run_codes_lengths: lengths[3] = " + std::to_string(bad)) != std::string::npos);
    CHECK(message.find("[0, T = 7]") != std::string::npos);
    CHECK(std::all_of(y.begin(), y.end(), [](int32_t v) { return v == -7; }));
    std::vector<float> yf(want_yf.size(), -7.0f);
    CHECK(qgru_rt_run_lengths(context.get(), a.c.x.data(), T, N, bad_lengths.data(), nullptr, yf.data(), nullptr) ==
          QGRU_RT_INVALID_ARGUMENT);
    CHECK(std::string(qgru_rt_last_error()).find("qgru_rt_run_lengths: lengths[3]") != std::string::npos);
  }
}

TEST_CASE("a bidirectional model streams, or a bad request is accepted, instead of a status naming it") {
  test::TestArtifact a = test::make_test_artifact("refuse", "int8", 4, 8, 2, 2, 3, 2, 4u);
  qgru_rt_model* model = nullptr;
  REQUIRE(qgru_rt_model_open(a.json_path.c_str(), &model) == QGRU_RT_OK);
  CHECK(std::string(qgru_rt_last_error()).empty());
  qgru_rt_context* context = nullptr;
  REQUIRE(qgru_rt_context_create(model, nullptr, &context) == QGRU_RT_OK);
  qgru_rt_state* state = nullptr;
  CHECK(qgru_rt_state_create(context, 1, &state) == QGRU_RT_NOT_SUPPORTED);
  CHECK(state == nullptr);
  CHECK(std::string(qgru_rt_last_error()).find("2 directions") != std::string::npos);

  // Arguments.
  CHECK(qgru_rt_model_open(nullptr, &model) == QGRU_RT_INVALID_ARGUMENT);
  qgru_rt_context* unused = nullptr;
  CHECK(qgru_rt_context_create(nullptr, nullptr, &unused) == QGRU_RT_INVALID_ARGUMENT);
  std::vector<int32_t> x(static_cast<size_t>(3) * 2 * 4, a.c.quantized.input_quant().zp);
  CHECK(qgru_rt_run_codes(context, x.data(), 3, 0, nullptr, nullptr, nullptr) == QGRU_RT_INVALID_ARGUMENT);
  CHECK(std::string(qgru_rt_last_error()).find("N = 0") != std::string::npos);
  qgru_rt_context_options bad = qgru_rt_context_options_default();
  bad.executor = static_cast<qgru_rt_executor>(9);
  CHECK(qgru_rt_context_create(model, &bad, &unused) == QGRU_RT_INVALID_ARGUMENT);
  bad = qgru_rt_context_options_default();
  bad.device = static_cast<qgru_rt_device>(5);
  CHECK(qgru_rt_context_create(model, &bad, &unused) == QGRU_RT_INVALID_ARGUMENT);
  CHECK(unused == nullptr);

  // Codes outside x's range: refused before anything runs, the message names the value.
  x[5] = a.c.quantized.input_quant().qmax() + 1;
  CHECK(qgru_rt_run_codes(context, x.data(), 3, 2, nullptr, nullptr, nullptr) == QGRU_RT_CODE_OUT_OF_RANGE);
  CHECK(std::string(qgru_rt_last_error()).find(std::to_string(x[5])) != std::string::npos);

  // The CUDA device: not built, or built without a usable GPU here (or, on a GPU machine, a context).
  qgru_rt_context_options gpu = qgru_rt_context_options_default();
  gpu.device = QGRU_RT_DEVICE_CUDA;
  qgru_rt_context* cuda = nullptr;
  const qgru_rt_status st = qgru_rt_context_create(model, &gpu, &cuda);
#ifdef QGRU_RUNTIME_TEST_EXPECT_CUDA
  CHECK_MESSAGE((st == QGRU_RT_DEVICE_UNAVAILABLE || st == QGRU_RT_OK), qgru_rt_last_error());
#else
  CHECK(st == QGRU_RT_DEVICE_NOT_BUILT);
  CHECK(std::string(qgru_rt_last_error()).find("without CUDA") != std::string::npos);
#endif
  qgru_rt_context_destroy(cuda);
  qgru_rt_context_destroy(context);
  qgru_rt_model_close(model);
  CHECK(std::string(qgru_rt_status_name(QGRU_RT_CODE_OUT_OF_RANGE)) == "QGRU_RT_CODE_OUT_OF_RANGE");
}

TEST_CASE("a refused step or state changes the state, or a tampered artifact opens") {
  test::TestArtifact a = test::make_test_artifact("state", "int8", 3, 5, 2, 1, 4, 2, 5u);
  qgru_rt::Model model(a.json_path);
  qgru_rt::Context context(model);
  qgru_rt::State state(context, 2);
  state.step_codes(a.q_x.data(), 2, nullptr);
  std::vector<int32_t> before(static_cast<size_t>(2) * 2 * 5), after(before.size());
  state.get_codes(before.data());
  std::vector<int32_t> x(a.q_x.begin(), a.q_x.begin() + 2 * 2 * 3);
  x.back() = a.c.quantized.input_quant().qmin() - 1;  // the second frame's last code
  CHECK(qgru_rt_step_codes(state.get(), x.data(), 2, nullptr) == QGRU_RT_CODE_OUT_OF_RANGE);
  state.get_codes(after.data());
  CHECK(after == before);
  std::vector<int32_t> h = before;
  h[12] = a.c.quantized.cell(1, 0).q(GruTensor::h).qmax() + 1;  // in layer 1's block [10, 20)
  CHECK(qgru_rt_state_set_codes(state.get(), h.data()) == QGRU_RT_CODE_OUT_OF_RANGE);
  CHECK(std::string(qgru_rt_last_error()).find("layer 1") != std::string::npos);
  state.get_codes(after.data());
  CHECK(after == before);
  CHECK(qgru_rt_step_codes(state.get(), x.data(), 0, nullptr) == QGRU_RT_INVALID_ARGUMENT);
  try {
    state.step_codes(x.data(), 2, nullptr);
    FAIL("the wrapper did not throw");
  } catch (const qgru_rt::Error& e) {
    CHECK(e.status() == QGRU_RT_CODE_OUT_OF_RANGE);
    CHECK(std::string(e.what()).find("QGRU_RT_CODE_OUT_OF_RANGE: ") == 0);
  }

  // A tampered tensor file: BAD_ARTIFACT naming the file and its sha256 (from memory likewise).
  const std::string json = read_bytes(a.json_path);
  std::string tensors = read_bytes(a.json_path.substr(0, a.json_path.size() - 5) + ".safetensors");
  tensors[tensors.size() - 1] ^= 1;
  qgru_rt_model* raw = nullptr;
  CHECK(qgru_rt_model_open_memory(json.data(), json.size(), tensors.data(), tensors.size(), &raw) == QGRU_RT_BAD_ARTIFACT);
  CHECK(std::string(qgru_rt_last_error()).find("sha256") != std::string::npos);
  CHECK(raw == nullptr);
  CHECK(qgru_rt_model_open("/nonexistent/model.qgru.json", &raw) == QGRU_RT_BAD_ARTIFACT);
  CHECK(std::string(qgru_rt_last_error()).find("/nonexistent/model.qgru.json") != std::string::npos);
  CHECK(qgru_rt_model_open_memory(json.data(), json.size() / 2, tensors.data(), tensors.size(), &raw) == QGRU_RT_BAD_ARTIFACT);
  CHECK(std::string(qgru_rt_last_error()).find("not valid JSON") != std::string::npos);
}

TEST_CASE("closing the model or the context first leaves a state dangling") {
  test::TestArtifact a = test::make_test_artifact("lifetime", "int8", 3, 6, 1, 1, 2, 1, 6u);
  qgru_rt_model* model = nullptr;
  REQUIRE(qgru_rt_model_open(a.json_path.c_str(), &model) == QGRU_RT_OK);
  qgru_rt_context* context = nullptr;
  REQUIRE(qgru_rt_context_create(model, nullptr, &context) == QGRU_RT_OK);
  qgru_rt_state* state = nullptr;
  REQUIRE(qgru_rt_state_create(context, 1, &state) == QGRU_RT_OK);
  qgru_rt_model_close(model);
  qgru_rt_context_destroy(context);
  std::vector<int32_t> y(12);
  CHECK(qgru_rt_step_codes(state, a.q_x.data(), 2, y.data()) == QGRU_RT_OK);
  const QuantGruResult want = run_quantized_gru_codes(a.c.quantized, a.q_x.data(), 2, 1, nullptr);
  CHECK(y == want.output_codes);
  qgru_rt_state_destroy(state);
}

}  // namespace
}  // namespace qgru
