// The CUDA executor's whole call on the device and its streaming, against the CPU reference, code for code and float
// for float (the device dequantizes with the same function: equal floats, not a tolerance):
//   device_flow: QuantGruCuda's run_codes / run / run_floats on the model cases of the persistent kernel's list and
//   more (every preset, multiplier scales, 1 to 3 layers, one and two directions, h0, sequence lengths, both cells),
//   on the per-step path and the persistent one (GruFlow::Device whatever the environment); each call's copies equal
//   kernels::plan_device_call's;
//   cuda_stream: QuantGruCudaStream frame by frame (codes and floats) against one whole reference run of the sequence,
//   from zero and from a set state; no allocation on any step; each kind of frame captured into a graph once, also
//   with two states and whole calls in turn (and issued as launches when asked).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../unit/support/gru_model_cases.h"
#include "gpu_checks.h"
#include "qgru/kernels/device_flow.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/verify/device_compare.h"
#include "qgru_cuda/device_buffer.h"
#include "qgru_cuda/quant_gru_cuda.h"

namespace qgru::cuda_test {

namespace {

// Model cases beyond the persistent list: the linear_before_reset = 0 cell bidirectional over 3 layers, int16 with
// multiplier scales and lengths, a single-step sequence.
constexpr test::GruModelCase kFlowExtraCases[] = {
    {"int8", false, 20, 3, 2, 4, 5, true, true, false},
    {"int16", true, 17, 2, 2, 5, 3, false, true, true},
    {"int16-activations", true, 9, 3, 1, 2, 1, true, false, false},
};

int count_persistent(const std::string& described) {
  int count = 0;
  for (size_t at = described.find("; persistent ("); at != std::string::npos; at = described.find("; persistent (", at + 1)) ++count;
  return count;
}

bool transfers_match(const cuda::QuantGruCuda& gpu, const kernels::DeviceCallPlan& plan, std::string& why) {
  const cuda::QuantGruCuda::CallTransfers t = gpu.last_call_transfers();
  if (t.uploads == plan.uploads && t.downloads == plan.downloads && t.host_passes == plan.host_passes) return true;
  why = "copies " + std::to_string(t.uploads) + " up, " + std::to_string(t.downloads) + " down, " +
        std::to_string(t.host_passes) + " host pass(es); planned " + plan.describe();
  return false;
}

int check_flow_case(const test::GruModelCase& k, cuda::GruRecurrence recurrence) {
  const test::PreparedGruModel m = test::prepare_gru_model(k, 6);
  const QuantizedGru& model = m.c.quantized;
  const cuda::QuantGruCuda gpu(model, recurrence, cuda::GruFlow::Device);
  int failures = 0;
  std::string why;
  const char* path = recurrence == cuda::GruRecurrence::Persistent ? "persistent" : "step";
  // Codes in.
  const QuantGruResult ref = run_quantized_gru_codes(model, m.q_x.data(), k.T, k.N, m.h0(), nullptr, m.lengths_data());
  const QuantGruResult got = gpu.run_codes(m.q_x.data(), k.T, k.N, m.h0(), m.lengths_data());
  const int persistent = count_persistent(gpu.describe());
  const CodeComparison cmp = compare_quant_codes(ref, got, k.H, k.D);
  bool ok = cmp.equal() && got.output == ref.output && got.h_n == ref.h_n &&
            transfers_match(gpu, kernels::plan_device_call(k.D, false, m.h0() != nullptr, m.lengths_data() != nullptr, true, persistent), why);
  std::printf("%s device flow run_codes %-17s mult=%d H=%d L=%d D=%d N=%d T=%d h0=%d lengths=%d lbr=%d %s [%s]: %zu differ%s%s%s\n",
              ok ? "ok  " : "FAIL", k.preset, k.multiplier ? 1 : 0, k.H, k.L, k.D, k.N, k.T, k.with_h0 ? 1 : 0,
              k.with_lengths ? 1 : 0, k.linear_before_reset ? 1 : 0, path, gpu.describe().c_str(), cmp.mismatches,
              cmp.first.empty() ? "" : "; first at ", cmp.first.c_str(), why.empty() ? "" : ("; " + why).c_str());
  failures += ok ? 0 : 1;
  // Floats in (quantized on the device), with and without the codes back.
  std::vector<float> x = m.c.x;
  for (float& v : x) v *= 3.0f;
  const QuantGruResult ref_f = run_quantized_gru(model, x.data(), k.T, k.N, nullptr, nullptr, m.lengths_data());
  const QuantGruResult got_f = gpu.run(x.data(), k.T, k.N, nullptr, m.lengths_data());
  why.clear();
  ok = compare_quant_codes(ref_f, got_f, k.H, k.D).equal() && got_f.output == ref_f.output &&
       transfers_match(gpu, kernels::plan_device_call(k.D, true, false, m.lengths_data() != nullptr, true, persistent), why);
  const QuantGruResult floats = gpu.run_floats(x.data(), k.T, k.N, nullptr, m.lengths_data());
  ok = ok && floats.output_codes.empty() && floats.output == ref_f.output && floats.h_n_codes == ref_f.h_n_codes &&
       transfers_match(gpu, kernels::plan_device_call(k.D, true, false, m.lengths_data() != nullptr, false, persistent), why);
  std::printf("%s device flow run/run_floats %-17s H=%d L=%d D=%d N=%d T=%d %s%s%s\n", ok ? "ok  " : "FAIL", k.preset, k.H, k.L,
              k.D, k.N, k.T, path, why.empty() ? "" : ": ", why.c_str());
  failures += ok ? 0 : 1;
  return failures;
}

// A unidirectional model streamed frame by frame equals one whole reference run: each frame's output the whole run's
// step, the final state its h_n; step_codes from a set state (h0), step with floats from zero.
// With FrameIssue::Graph each of the two kinds of frame (codes, floats; both with output) is captured once, after
// its first frame ran as launches.
int check_stream_case(const char* preset, bool multiplier, int H, int L, int N, int T, bool linear_before_reset,
                      cuda::GruRecurrence recurrence, cuda::FrameIssue issue = cuda::FrameIssue::Graph) {
  const test::GruModelCase k{preset, multiplier, H, L, 1, N, T, true, false, linear_before_reset};
  const test::PreparedGruModel m = test::prepare_gru_model(k, 6);
  const QuantizedGru& model = m.c.quantized;
  const cuda::QuantGruCuda gpu(model, recurrence);
  cuda::QuantGruCudaStream stream(gpu, N, issue);
  const int64_t allocations = cuda::device_allocation_count();
  // Codes from h0.
  const QuantGruResult ref = run_quantized_gru_codes(model, m.q_x.data(), T, N, m.h0(), nullptr, nullptr);
  stream.set_codes(m.h0());
  std::vector<int32_t> y_codes(static_cast<size_t>(T) * N * H), state(static_cast<size_t>(L) * N * H);
  const size_t frame = static_cast<size_t>(N) * model.input_size;
  for (int t = 0; t < T; ++t) stream.step_codes(m.q_x.data() + t * frame, 1, y_codes.data() + static_cast<size_t>(t) * N * H);
  stream.get_codes(state.data());
  bool ok = y_codes == ref.output_codes && state == ref.h_n_codes;
  // Floats from zero: reset by setting each layer's zp_h.
  std::vector<float> x = m.c.x;
  for (float& v : x) v *= 3.0f;
  const QuantGruResult ref_f = run_quantized_gru(model, x.data(), T, N, nullptr, nullptr, nullptr);
  std::vector<int32_t> zero(state.size());
  for (int l = 0; l < L; ++l) {
    std::fill(zero.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l) * N * H),
              zero.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l + 1) * N * H), model.cell(l, 0).q(GruTensor::h).zp);
  }
  stream.set_codes(zero.data());
  std::vector<float> y(static_cast<size_t>(T) * N * H);
  for (int t = 0; t < T; ++t) stream.step(x.data() + t * frame, 1, y.data() + static_cast<size_t>(t) * N * H);
  stream.get_codes(state.data());
  ok = ok && y == ref_f.output && state == ref_f.h_n_codes;
  const int64_t allocated = cuda::device_allocation_count() - allocations;
  ok = ok && allocated == 0;
  const bool graphs = issue == cuda::FrameIssue::Graph;
  const std::string issued = stream.describe();
  ok = ok && (graphs ? issued.rfind("one graph a frame", 0) == 0 && stream.captures() == (T >= 2 ? 2 : 0)
                     : stream.captures() == 0);
  std::printf("%s CUDA streaming %-17s mult=%d H=%d L=%d N=%d T=%d lbr=%d %s [%s; %s]: %lld allocation(s) while "
              "streaming\n",
              ok ? "ok  " : "FAIL", preset, multiplier ? 1 : 0, H, L, N, T, linear_before_reset ? 1 : 0,
              recurrence == cuda::GruRecurrence::Persistent ? "persistent" : "step", gpu.describe().c_str(),
              issued.c_str(), static_cast<long long>(allocated));
  return ok ? 0 : 1;
}

// Two states of one executor stepped in turn, frame by frame, with whole calls of the executor between frames: each
// state replays its own frame graph, captured once (the first whole call, of T frames, grew the cells' workspaces
// before the first capture), and every output equals the reference. Then a whole call of a longer T moves the
// workspaces (DeviceBuffer allocates the larger one before it frees the old: a new address): both states capture
// again, once, and stay exact; so does a new state of a larger N, and a frame without output runs beside them.
int check_stream_interleaved(cuda::GruRecurrence recurrence) {
  const int H = 40, L = 2, N = 3, T = 8;
  const test::GruModelCase k{"int8", false, H, L, 1, N, T, true, false, true};
  const test::PreparedGruModel m = test::prepare_gru_model(k, 9);
  const QuantizedGru& model = m.c.quantized;
  const cuda::QuantGruCuda gpu(model, recurrence);
  cuda::QuantGruCudaStream a(gpu, N), b(gpu, N);
  const size_t frame = static_cast<size_t>(N) * model.input_size, out = static_cast<size_t>(N) * H;
  std::vector<int32_t> q_x_b(m.q_x.rbegin(), m.q_x.rend());  // b's frames: a's, backwards (all in range)
  const QuantGruResult ref_a = run_quantized_gru_codes(model, m.q_x.data(), T, N, m.h0(), nullptr, nullptr);
  const QuantGruResult ref_b = run_quantized_gru_codes(model, q_x_b.data(), T, N, nullptr, nullptr, nullptr);
  const std::vector<int32_t> longer_x(static_cast<size_t>(3 * T) * frame, model.input_quant().zp);
  const QuantGruResult ref_longer = run_quantized_gru_codes(model, longer_x.data(), 3 * T, N, nullptr, nullptr, nullptr);
  a.set_codes(m.h0());
  std::vector<int32_t> y_a(static_cast<size_t>(T) * out), y_b(y_a.size());
  bool ok = true;
  int captures_before_longer[2] = {-1, -1};
  for (int t = 0; t < T; ++t) {
    a.step_codes(m.q_x.data() + t * frame, 1, y_a.data() + static_cast<size_t>(t) * out);
    b.step_codes(q_x_b.data() + t * frame, 1, y_b.data() + static_cast<size_t>(t) * out);
    bool whole_ok = false;  // every whole call runs, whatever came before
    if (t == T / 2) {
      captures_before_longer[0] = a.captures();
      captures_before_longer[1] = b.captures();
      whole_ok = gpu.run_codes(longer_x.data(), 3 * T, N, nullptr, nullptr).output_codes == ref_longer.output_codes;
    } else {
      whole_ok = gpu.run_codes(m.q_x.data(), T, N, m.h0(), nullptr).output_codes == ref_a.output_codes;
    }
    ok = ok && whole_ok;
  }
  ok = ok && y_a == ref_a.output_codes && y_b == ref_b.output_codes;
  ok = ok && captures_before_longer[0] == 1 && captures_before_longer[1] == 1;
  const int captures_after_longer[2] = {a.captures(), b.captures()};
  ok = ok && captures_after_longer[0] == 2 && captures_after_longer[1] == 2;
  // A new state of a far larger N reserves larger workspaces (moving them): a's next frame captures again, its third;
  // then a frame without output, a kind of its own (run as launches, its first). a's output and final state equal
  // the reference over T + 2 frames.
  const cuda::QuantGruCudaStream larger(gpu, 1024);
  std::vector<int32_t> q_x_more(m.q_x);
  q_x_more.insert(q_x_more.end(), m.q_x.begin(), m.q_x.begin() + static_cast<std::ptrdiff_t>(2 * frame));
  const QuantGruResult ref_more = run_quantized_gru_codes(model, q_x_more.data(), T + 2, N, m.h0(), nullptr, nullptr);
  std::vector<int32_t> y_more(out), state(static_cast<size_t>(L) * out);
  a.step_codes(q_x_more.data() + static_cast<size_t>(T) * frame, 1, y_more.data());
  const int captures_after_larger = a.captures();
  a.step_codes(q_x_more.data() + static_cast<size_t>(T + 1) * frame, 1, nullptr);
  a.get_codes(state.data());
  ok = ok && captures_after_larger == 3 && a.captures() == 3 && state == ref_more.h_n_codes &&
       std::equal(y_more.begin(), y_more.end(), ref_more.output_codes.begin() + static_cast<std::ptrdiff_t>(T * out));
  std::printf("%s CUDA streaming, two states and whole calls in turn (%s): captures %d, %d before the longer call; "
              "%d, %d after; %d after a state of N = 1024 [%s]\n",
              ok ? "ok  " : "FAIL", recurrence == cuda::GruRecurrence::Persistent ? "persistent" : "step",
              captures_before_longer[0], captures_before_longer[1], captures_after_longer[0], captures_after_longer[1],
              captures_after_larger,
              a.describe().c_str());
  return ok ? 0 : 1;
}

}  // namespace

int check_device_flow() {
  int failures = 0;
  for (const cuda::GruRecurrence r : {cuda::GruRecurrence::Step, cuda::GruRecurrence::Persistent}) {
    for (const test::GruModelCase& k : test::kPersistentModelCases) failures += check_flow_case(k, r);
    for (const test::GruModelCase& k : kFlowExtraCases) failures += check_flow_case(k, r);
  }
  return failures;
}

int check_device_flow_small() {
  // The compute-sanitizer list: one bidirectional 2-layer case with h0 and lengths and one linear_before_reset = 0
  // case, on both recurrences, and one streamed 2-layer model.
  int failures = 0;
  const test::GruModelCase bidirectional{"int8", false, 33, 2, 2, 3, 4, true, true, true};
  const test::GruModelCase reset_before{"int16", false, 17, 2, 1, 2, 3, false, false, false};
  for (const cuda::GruRecurrence r : {cuda::GruRecurrence::Step, cuda::GruRecurrence::Persistent}) {
    failures += check_flow_case(bidirectional, r);
    failures += check_flow_case(reset_before, r);
  }
  failures += check_stream_case("int8", false, 31, 2, 3, 3, false, cuda::GruRecurrence::Step);
  return failures;
}

int check_cuda_stream() {
  int failures = 0;
  for (const cuda::GruRecurrence r : {cuda::GruRecurrence::Step, cuda::GruRecurrence::Persistent}) {
    failures += check_stream_case("int8", false, 33, 1, 1, 6, true, r);
    failures += check_stream_case("int8", true, 64, 3, 4, 5, true, r);
    failures += check_stream_case("int8", false, 31, 2, 3, 4, false, r);
    failures += check_stream_case("int16-activations", false, 17, 2, 2, 5, true, r);
    failures += check_stream_case("int16", true, 40, 3, 1, 4, false, r);
    failures += check_stream_case("int8", false, 31, 2, 3, 4, false, r, cuda::FrameIssue::Launches);
    failures += check_stream_interleaved(r);
  }
  return failures;
}

}  // namespace qgru::cuda_test
