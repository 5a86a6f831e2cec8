// Per-frame latency of the runtime's streaming step (qgru_rt_step through the C API: one frame of float
// input in, its dequantized output out, the state kept in the qgru_rt_state) at N = 1, run by
// scripts/bench_stream.py. One layer, C = H, int8 preset, a random model calibrated on random input (the
// arithmetic per step does not depend on the values). Each frame is timed on its own (steady_clock around one
// call) after untimed warm-up frames; prints one JSON line with the median, p10, p90, p99 and max in
// microseconds and the sum of the last output (the state after every frame, to compare runners by).
//   bench_stream <H> [frames=10000] [warmup=1000] [executor=fast|reference] [artifact.qgru.json frames.f32]
// With an artifact and a frames file (64 frames of C float32 each, raw little-endian, as scripts/bench_stream.py
// --pairs writes them), that artifact steps those frames instead of the random model and random frames.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qgru/qgru_runtime.h"
#include "qgru/quant/artifact_write.h"
#include "qgru/quant/bitwidth_presets.h"
#include "quant_test_support.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc == 6 || argc > 7) {
    std::fprintf(stderr, "usage: bench_stream <H> [frames] [warmup] [fast|reference] [artifact.qgru.json frames.f32]\n");
    return 2;
  }
  const int H = std::atoi(argv[1]);
  const int frames = argc > 2 ? std::atoi(argv[2]) : 10000;
  const int warmup = argc > 3 ? std::atoi(argv[3]) : 1000;
  const std::string executor = argc > 4 ? argv[4] : "fast";
  const int C = H;
  const size_t frame_count = 64;  // distinct frames, fed round and round
  std::filesystem::path dir;
  std::string json;
  std::vector<float> x;
  if (argc == 7) {
    json = argv[5];
    std::ifstream in(argv[6], std::ios::binary);
    x.resize(frame_count * static_cast<size_t>(C));
    in.read(reinterpret_cast<char*>(x.data()), static_cast<std::streamsize>(x.size() * sizeof(float)));
    if (!in || in.peek() != std::ifstream::traits_type::eof()) {
      std::fprintf(stderr, "bench_stream: %s: expected exactly %zu float32 values (64 frames of C = %d)\n", argv[6], x.size(), C);
      return 1;
    }
  } else {
    qgru::test::CalibratedCase c = qgru::test::calibrated_case(C, H, 1, 1, 16, 4, qgru::load_bitwidth_config("int8"), 1u);
    dir = std::filesystem::temp_directory_path() / ("qgru_bench_stream_" + std::to_string(H));
    std::filesystem::create_directories(dir);
    json = (dir / "model.qgru.json").string();
    qgru::write_artifact(json, c.quantized);
    x = qgru::test::random_input(frame_count * static_cast<size_t>(C), 7u);
  }

  qgru_rt_model* model = nullptr;
  qgru_rt_context* context = nullptr;
  qgru_rt_state* state = nullptr;
  qgru_rt_context_options options = qgru_rt_context_options_default();
  options.executor = executor == "reference" ? QGRU_RT_EXECUTOR_REFERENCE : QGRU_RT_EXECUTOR_FAST;
  if (qgru_rt_model_open(json.c_str(), &model) != QGRU_RT_OK || qgru_rt_context_create(model, &options, &context) != QGRU_RT_OK ||
      qgru_rt_state_create(context, 1, &state) != QGRU_RT_OK) {
    std::fprintf(stderr, "bench_stream: %s\n", qgru_rt_last_error());
    return 1;
  }
  std::vector<float> y(static_cast<size_t>(H));
  std::vector<double> micros(static_cast<size_t>(frames));
  for (int f = 0; f < warmup + frames; ++f) {
    const float* frame = x.data() + (static_cast<size_t>(f) % frame_count) * static_cast<size_t>(C);
    const auto start = std::chrono::steady_clock::now();
    const qgru_rt_status status = qgru_rt_step(state, frame, 1, y.data());
    const auto stop = std::chrono::steady_clock::now();
    if (status != QGRU_RT_OK) {
      std::fprintf(stderr, "bench_stream: %s\n", qgru_rt_last_error());
      return 1;
    }
    if (f >= warmup) micros[static_cast<size_t>(f - warmup)] = std::chrono::duration<double, std::micro>(stop - start).count();
  }
  std::sort(micros.begin(), micros.end());
  auto pct = [&](double p) { return micros[std::min(micros.size() - 1, static_cast<size_t>(p * static_cast<double>(micros.size())))]; };
  double y_sum = 0.0;  // the last output: the state after every frame, equal across runners of one artifact
  for (const float v : y) y_sum += v;
  std::printf("{\"H\": %d, \"frames\": %d, \"executor\": \"%s\", \"median_us\": %.4f, \"p10_us\": %.4f, \"p90_us\": %.4f, "
              "\"p99_us\": %.4f, \"max_us\": %.4f, \"y_sum\": %.9g}\n",
              H, frames, qgru_rt_context_describe(context), pct(0.5), pct(0.1), pct(0.9), pct(0.99), micros.back(), y_sum);
  qgru_rt_state_destroy(state);
  qgru_rt_context_destroy(context);
  qgru_rt_model_close(model);
  if (!dir.empty()) std::filesystem::remove_all(dir);
  return 0;
}
