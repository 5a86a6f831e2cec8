// Benchmark of the CUDA GRU executors: the quantized executor (QuantGruCuda) for each preset and the float
// one (FloatGruCuda), one layer, one direction, for the shapes (C = H, T, N) of the CPU benchmark
// (docs/BENCHMARKS.md). Each figure is the median over --runs timed calls after --warmup calls, each call
// timed with CUDA events around it (end to end: host packing, copies, every GEMM and kernel, copy back;
// the executor is built once, outside the timing). Prints a markdown table. Without a GPU it prints
// "no usable GPU: <reason>" and exits 77, with no table.
// Usage: bench_cuda_gru [--runs N] [--warmup N] [--shapes all|small] [--shape H,T,N] [--preset NAME|float]
//                       [--recurrence step|persistent] [--flow host|device] [--json-lines] [--streaming]
//                       [--commit ID]
//   --shape and --preset narrow the table to one shape and one executor (e.g. to profile it under ncu).
//   --flow: the quantized executor's whole-call flow (qgru_cuda/quant_gru_cuda.h GruFlow; default QGRU_CUDA_GRU_FLOW):
//   host chaining or the whole call on the device; rows then name it ("int8 [device flow]").
//   --recurrence: the quantized cells' recurrence (qgru_cuda/gru_cell_cuda.h GruRecurrence; default
//   QGRU_CUDA_GRU_PATH); --json-lines: also one line per row, "JSON {...}" with H, T, N, engine, preset, recurrence,
//   path (the executor's describe()), median_ms, min_ms, us_per_step (scripts/bench_cuda_gru_peers.py reads them).
// --streaming: instead, the streaming step's latency per frame (one frame of N streams in, one out, floats, as the
//   runtime C API's qgru_rt_step): on the GPU (QuantGruCudaStream: h on the device, per frame one copy each way and one
//   synchronization; the frame replayed from its graph, and issued as launches, FrameIssue) beside the CPU's (the executor chooser's CPU stepper, one thread: quantize, step_layer_loop,
//   dequantize), median over --runs frames after --warmup, for each preset at (H, N, L) in {(64, 1, 1), (256, 1, 1),
//   (256, 16, 1), (1024, 1, 1), (256, 1, 3)}; --json-lines adds "JSON {...}" rows with kind "stream", the recurrence,
//   card, date (UTC) and --commit's ID (scripts/collect_gpu_results.py takes them from cuda-stream.md into
//   docs/benchmarks/cuda-stream.json).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../unit/support/quant_test_support.h"
#include "bench_timing.h"
#include "qgru_cuda/device.h"
#include "qgru_cuda/float_gru_cuda.h"
#include "qgru_cuda/quant_gru_cuda.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/executor.h"
#include "qgru/runtime/quantize_input.h"
#include "qgru/runtime/stream_step.h"

namespace {

using qgru::cuda::bench::time_calls;

struct Shape {
  int H, T, N;  // C = H
};

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--runs N] [--warmup N] [--shapes all|small] [--shape H,T,N] [--preset NAME|float] "
               "[--recurrence step|persistent] [--flow host|device] [--json-lines] [--streaming] [--commit ID]\n",
               argv0);
  return 2;
}

std::string json_escaped(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// One machine-readable row (--json-lines).
void print_json_line(const Shape& s, const char* engine, const char* preset, const char* recurrence, const std::string& path,
                     const qgru::cuda::bench::CallTimes& t) {
  std::printf("JSON {\"H\": %d, \"T\": %d, \"N\": %d, \"engine\": \"%s\", \"preset\": \"%s\", \"recurrence\": \"%s\", "
              "\"path\": \"%s\", \"median_ms\": %.6f, \"min_ms\": %.6f, \"us_per_step\": %.4f}\n",
              s.H, s.T, s.N, engine, preset, recurrence, json_escaped(path).c_str(), t.median_ms, t.min_ms,
              1000.0 * t.median_ms / s.T);
}

// Median and minimum in milliseconds of `runs` host-timed calls of fn after `warmup` (the CPU side: no CUDA events).
qgru::cuda::bench::CallTimes time_host_calls(const std::function<void()>& fn, int warmup, int runs) {
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front()};
}

// The streaming rows (--streaming): per-frame latency on the GPU and on the CPU, the same model and frames.
int streaming_rows(int runs, int warmup, const std::string& only_preset, qgru::cuda::GruRecurrence recurrence, bool json_lines,
                   const std::string& commit) {
  if (recurrence == qgru::cuda::GruRecurrence::FromEnvironment) recurrence = qgru::cuda::recurrence_from_environment();
  const char* recurrence_name = recurrence == qgru::cuda::GruRecurrence::Persistent ? "persistent" : "step";
  const std::string date = qgru::cuda::bench::utc_date();
  struct StreamShape {
    int H, N, L;
  };
  const StreamShape shapes[] = {{64, 1, 1}, {256, 1, 1}, {256, 16, 1}, {1024, 1, 1}, {256, 1, 3}};
  std::printf("GPU: %s; streaming, one frame per call (floats in and out), median of %d frames after %d warm-up\n\n",
              qgru::cuda::device_name().c_str(), runs, warmup);
  std::printf("| C = H | N | layers | preset | GPU µs per frame (graph) | GPU µs per frame (launches) | "
              "CPU µs per frame (%s, 1 thread) | GPU path |\n"
              "|---|---|---|---|---|---|---|---|\n", "fast");
  for (const StreamShape& s : shapes) {
    for (const char* preset : {"int8", "int16-activations", "int16"}) {
      if (!only_preset.empty() && only_preset != preset) continue;
      const int T = 8;  // the calibration sequence; the timed frames cycle over it
      qgru::test::CalibratedCase c;
      try {
        c = qgru::test::calibrated_case(s.H, s.H, s.L, 1, T, s.N, qgru::load_bitwidth_config(preset), 5u + static_cast<uint32_t>(s.H));
      } catch (const qgru::Error& e) {
        std::printf("| %d | %d | %d | %s | not quantized: %s | | |\n", s.H, s.N, s.L, preset, e.what());
        continue;
      }
      const qgru::QuantizedGru& model = c.quantized;
      const size_t frame_x = static_cast<size_t>(s.N) * s.H, frame_y = static_cast<size_t>(s.N) * s.H;
      std::vector<float> y(frame_y);
      int frame = 0;
      // GPU: the frame replayed from its graph (the default), then issued as launches
      const qgru::cuda::QuantGruCuda executor(model, recurrence);
      qgru::cuda::QuantGruCudaStream stream(executor, s.N);
      const auto gpu = time_calls([&] {
        stream.step(c.x.data() + static_cast<size_t>(frame++ % T) * frame_x, 1, y.data());
      }, warmup, runs);
      qgru::cuda::QuantGruCudaStream launches(executor, s.N, qgru::cuda::FrameIssue::Launches);
      const auto gpu_launches = time_calls([&] {
        launches.step(c.x.data() + static_cast<size_t>(frame++ % T) * frame_x, 1, y.data());
      }, warmup, runs);
      const std::string path = executor.describe() + "; " + stream.describe();
      // CPU: what qgru_rt_step does on a CPU context, one thread
      qgru::ExecutorRequest request;
      request.fast.threads = 1;
      const std::unique_ptr<qgru::Executor> cpu_executor = qgru::make_executor(model, request);
      const std::unique_ptr<qgru::GruCellStepper> stepper = cpu_executor->make_stepper(s.N);
      std::vector<int32_t> q_h(static_cast<size_t>(s.L) * frame_y), next_x(frame_y), q_x(frame_x), q_y(frame_y);
      for (int l = 0; l < s.L; ++l) {
        std::fill_n(q_h.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l) * frame_y), frame_y,
                    model.cell(l, 0).q(qgru::GruTensor::h).zp);
      }
      const qgru::TensorQuant& yq = model.cell(s.L - 1, 0).q(qgru::GruTensor::h);
      const auto cpu = time_host_calls([&] {
        qgru::quantize_fast(model.input_quant(), c.x.data() + static_cast<size_t>(frame++ % T) * frame_x, frame_x, q_x.data());
        qgru::step_layer_loop(model, q_x.data(), 1, q_h.data(), q_y.data(), next_x.data(), *stepper);
        for (size_t i = 0; i < frame_y; ++i) y[i] = static_cast<float>(yq.dequantize(q_y[i]));
      }, warmup, runs);
      std::printf("| %d | %d | %d | %s | %.1f | %.1f | %.1f | %s |\n", s.H, s.N, s.L, preset, 1000.0 * gpu.median_ms,
                  1000.0 * gpu_launches.median_ms, 1000.0 * cpu.median_ms, path.c_str());
      if (json_lines) {
        std::printf("JSON {\"kind\": \"stream\", \"H\": %d, \"N\": %d, \"layers\": %d, \"preset\": \"%s\", "
                    "\"gpu_us_per_frame\": %.3f, \"gpu_min_us\": %.3f, \"gpu_launches_us_per_frame\": %.3f, "
                    "\"cpu_us_per_frame\": %.3f, \"cpu_min_us\": %.3f, \"cpu\": \"%s\", \"path\": \"%s\", "
                    "\"recurrence\": \"%s\", \"card\": \"%s\", \"date\": \"%s\", \"commit\": \"%s\"}\n",
                    s.H, s.N, s.L, preset, 1000.0 * gpu.median_ms, 1000.0 * gpu.min_ms,
                    1000.0 * gpu_launches.median_ms, 1000.0 * cpu.median_ms,
                    1000.0 * cpu.min_ms, json_escaped(cpu_executor->name()).c_str(), json_escaped(path).c_str(),
                    recurrence_name, json_escaped(qgru::cuda::device_name()).c_str(), date.c_str(), json_escaped(commit).c_str());
      }
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20, warmup = 3;
  bool small = false;
  Shape only{0, 0, 0};
  std::string only_preset;
  bool json_lines = false;
  bool streaming = false;
  std::string commit = "unknown";
  qgru::cuda::GruRecurrence recurrence = qgru::cuda::GruRecurrence::FromEnvironment;
  qgru::cuda::GruFlow flow = qgru::cuda::GruFlow::FromEnvironment;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--warmup") == 0 && i + 1 < argc) {
      warmup = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--shapes") == 0 && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "all" && v != "small") return usage(argv[0]);
      small = v == "small";
    } else if (std::strcmp(argv[i], "--shape") == 0 && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%d,%d,%d", &only.H, &only.T, &only.N) != 3 || only.H < 1 || only.T < 1 || only.N < 1) {
        return usage(argv[0]);
      }
    } else if (std::strcmp(argv[i], "--preset") == 0 && i + 1 < argc) {
      only_preset = argv[++i];
      if (only_preset != "int8" && only_preset != "int16-activations" && only_preset != "int16" && only_preset != "float") {
        return usage(argv[0]);
      }
    } else if (std::strcmp(argv[i], "--recurrence") == 0 && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "step" && v != "persistent") return usage(argv[0]);
      recurrence = v == "step" ? qgru::cuda::GruRecurrence::Step : qgru::cuda::GruRecurrence::Persistent;
    } else if (std::strcmp(argv[i], "--flow") == 0 && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v != "host" && v != "device") return usage(argv[0]);
      flow = v == "host" ? qgru::cuda::GruFlow::Host : qgru::cuda::GruFlow::Device;
    } else if (std::strcmp(argv[i], "--json-lines") == 0) {
      json_lines = true;
    } else if (std::strcmp(argv[i], "--streaming") == 0) {
      streaming = true;
    } else if (std::strcmp(argv[i], "--commit") == 0 && i + 1 < argc) {
      commit = argv[++i];
    } else {
      return usage(argv[0]);
    }
  }
  if (runs < 1 || warmup < 0) return usage(argv[0]);
  const qgru::cuda::DeviceProbe probe = qgru::cuda::probe_devices();
  if (probe.device_count == 0) {
    std::printf("no usable GPU: %s\nGRU benchmark NOT RUN (no figures)\n", probe.reason.c_str());
    return 77;
  }
  try {
    if (streaming) {
      return streaming_rows(runs, warmup, only_preset == "float" ? "none" : only_preset, recurrence, json_lines, commit);
    }
    std::vector<Shape> shapes = {{64, 100, 1}, {256, 100, 1}, {256, 100, 64}, {512, 50, 32}, {1024, 50, 1}};
    if (small) shapes = {{64, 100, 1}, {256, 100, 64}};
    if (only.H > 0) shapes = {only};
    const auto wanted = [&](const std::string& preset) { return only_preset.empty() || only_preset == preset; };
    std::printf("GPU: %s; median of %d runs after %d warm-up, ms per call (end to end), 1 layer, 1 direction\n\n",
                qgru::cuda::device_name().c_str(), runs, warmup);
    std::printf("| C = H | T | N | executor | median ms | min ms | µs per step |\n|---|---|---|---|---|---|---|\n");
    for (const Shape& s : shapes) {
      // Calibrated on its own input with the min/max observer of the tests (ranges do not change the work).
      for (const char* preset : {"int8", "int16-activations", "int16"}) {
        if (!wanted(preset)) continue;
        qgru::test::CalibratedCase c;
        try {
          c = qgru::test::calibrated_case(s.H, s.H, 1, 1, s.T, s.N, qgru::load_bitwidth_config(preset),
                                          1u + static_cast<uint32_t>(s.H));
        } catch (const qgru::Error& e) {  // quantize refused the random model (overflow proof): say so, go on
          std::printf("| %d | %d | %d | %s | not quantized: %s | | |\n", s.H, s.T, s.N, preset, e.what());
          continue;
        }
        const std::vector<int32_t> q_x = qgru::quantize_values(c.quantized.input_quant(), c.x.data(), c.x.size());
        const qgru::cuda::QuantGruCuda executor(c.quantized, recurrence, flow);
        const std::string label = std::string(preset) + (executor.device_flow() ? " [device flow]" : "");
        // run_codes is synchronous: it returns after the results are back on the host.
        const auto t = time_calls([&] { executor.run_codes(q_x.data(), s.T, s.N, nullptr); }, warmup, runs);
        const std::string path = executor.describe();  // after a run: the recurrence at this N
        std::printf("| %d | %d | %d | %s (%s) | %.3f | %.3f | %.1f |\n", s.H, s.T, s.N, label.c_str(), path.c_str(),
                    t.median_ms, t.min_ms, 1000.0 * t.median_ms / s.T);
        if (json_lines) {
          const bool persistent = path.find("persistent (") != std::string::npos;
          print_json_line(s, "qgru", preset, persistent ? "persistent" : "step", path, t);
        }
        std::fflush(stdout);
      }
      if (!wanted("float")) continue;
      const qgru::FloatGruModel model = qgru::test::random_float_gru(s.H, s.H, 1, 1, 2u);
      const std::vector<float> x = qgru::test::random_input(static_cast<size_t>(s.T) * s.N * s.H, 3u);
      const qgru::cuda::FloatGruCuda executor(model);
      const auto t = time_calls([&] { executor.run(x.data(), s.T, s.N, nullptr); }, warmup, runs);
      std::printf("| %d | %d | %d | float (cublasSgemm) | %.3f | %.3f | %.1f |\n", s.H, s.T, s.N, t.median_ms, t.min_ms,
                  1000.0 * t.median_ms / s.T);
      if (json_lines) print_json_line(s, "qgru", "float", "step", "cublasSgemm", t);
      std::fflush(stdout);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_gru: %s\n", e.what());
    return 1;
  }
}
