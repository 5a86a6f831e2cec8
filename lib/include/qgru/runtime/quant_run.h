#pragma once
// `qgru run` on a quantized artifact, as one library call: read the artifact, x (float values are
// quantized with layer 0's x parameters; an integer .npy is taken as x codes) and the initial state (float h0
// quantized with each cell's h parameters, or h0 codes), run the executor the chooser picks, write y (dequantized
// float32), and on request the output codes and h_n (floats and codes), all together or not at all. Feeding a
// run's h_n codes back as the next run's h0 codes continues the sequence exactly: two runs over x[:t] and
// x[t:] give the codes of one run over x.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qgru/runtime/executor.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/runtime/quantized_gru.h"

namespace qgru {

struct QuantRunOptions {
  std::string artifact_path;  // model.qgru.json
  std::string input_path;     // x [T, N, C] (or [N, T, C] with batch_first): float values or integer codes
  std::string output_path;    // y float32 [T, N, D*H]
  std::string codes_path;     // optional: output codes [T, N, D*H], direction d in cell (L-1, d)'s h space, in the
                              // narrowest of int8, uint8, int16, int32 that holds the h spaces' codes
  std::string h0_path;        // optional h0 [L*D, N, H] floats
  std::string h0_codes_path;  // optional h0 [L*D, N, H] integer codes, cell (l, d) in its own h space (not with h0_path)
  std::string hn_path;        // optional: h_n float32 [L*D, N, H]
  std::string hn_codes_path;  // optional: h_n codes [L*D, N, H], cell (l, d) in its own h space, in the narrowest of
                              // int8, uint8, int16, int32 that holds every cell's h codes
  std::string lengths_path;   // optional: sequence lengths [N] (integer .npy; run_quantized_gru's lengths)
  bool batch_first = false;
  // Where and by what the model runs (qgru/runtime/executor.h, the one chooser): the device (cpu, cuda, auto), then
  // on the CPU "fast" (default: the AVX2 / AVX-512 executor where the CPU and the model allow it, else the
  // reference) or "reference" (the obviously-right executor). Every executor computes the same codes (tested).
  ExecutorDevice device = ExecutorDevice::Cpu;
  std::string executor = "fast";
  // Optional: one more file of the run's output group (written and renamed with the others, under the same
  // folder locks; when making it fails, none of the group is written), its bytes made from the run's inputs as
  // codes: q_x [T, N, C] in layer 0's x space, q_h0 [L*D, N, H] or null. `qgru run --dump-intermediates`
  // writes the golden vectors this way (the runtime library stays free of the toolchain that makes them).
  std::string extra_output_path;
  std::function<std::vector<uint8_t>(const QuantizedGru& model, const int32_t* q_x, int T, int N, const int32_t* q_h0)>
      extra_output;
};

struct QuantRunSummary {
  std::vector<int64_t> output_shape;
  bool input_was_codes = false;
  std::string executor;  // what ran (Executor::name()): "cuda", "fast (avx2)", or "reference" with the reason
  std::string executor_detail;              // Executor::detail() (the CUDA executor's cells)
  std::vector<ExecutorFallback> fallbacks;  // the chooser's fallbacks, with their reasons
  double seconds = 0.0;  // the executor alone
  int T = 0, N = 0;
  double mean = 0.0, min = 0.0, max = 0.0;
};

QuantRunSummary run_quantized_files(const QuantRunOptions& options);

// x for a quantized run, time-major: float values, or integer codes when the array has an integer dtype
// ([T, N, C], or [N, T, C] with batch_first). Codes outside x's code range in `model` are refused here, naming
// the file and the element ([t, n, c] as the file holds it).
struct QuantRunInput {
  int T = 0, N = 0;
  bool is_codes = false;
  std::vector<float> values;   // [T, N, C] when !is_codes
  std::vector<int32_t> q_x;    // [T, N, C] when is_codes
};
QuantRunInput read_quant_run_input(const std::string& path, const QuantizedGru& model, bool batch_first);

// The initial state of a quantized run as codes [L*D, N, H], cell (l, d) in its own h space: float h0 from
// `h0_path` quantized with each cell's h parameters (round half away from zero, saturating), or codes from
// `h0_codes_path` (any integer dtype; a code outside its cell's h code range is refused naming the file, the
// element [l*D + d, n, j] and the range); empty (every cell starts at zp_h, the code of 0.0) when both paths are
// empty. Both given is a qgru::UsageError.
std::vector<int32_t> read_quant_run_initial_state(const std::string& h0_path, const std::string& h0_codes_path,
                                                 const QuantizedGru& model, int N);

}  // namespace qgru
