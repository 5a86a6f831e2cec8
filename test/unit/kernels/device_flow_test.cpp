// The CUDA executor's device flow (qgru/kernels/device_flow.h) run on the host: every layer's x from
// layer_input_code (the caller's codes or floats for layer 0, the previous layer's cell outputs requantized per
// direction after it), each cell by its host emulation (emulate_gru_cell), the final state by the layer loop's rule,
// the output by output_element; held to the reference executor code for code and float for float on the
// persistent kernel's model cases (every preset, multiplier scales, 1..3 layers, one and two directions, h0,
// lengths, both cells). The packed operand (packed_input_element) equals pack_signed_steps of the same codes,
// padding included. The call's copy plan follows its rules.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gru_model_cases.h"
#include "qgru/kernels/device_flow.h"
#include "qgru/kernels/gru_step.h"
#include "qgru/runtime/layer_loop.h"
#include "qgru/runtime/quant_executor.h"

namespace qgru {
namespace {

CodeSpace space_of(const TensorQuant& q) { return CodeSpace{q.zp, q.qmin(), q.qmax()}; }

std::string case_name(const test::GruModelCase& k) {
  return std::string(k.preset) + (k.multiplier ? " multiplier" : "") + " H=" + std::to_string(k.H) + " L=" +
         std::to_string(k.L) + " D=" + std::to_string(k.D) + " N=" + std::to_string(k.N) + " T=" + std::to_string(k.T);
}

// Packs every element of the source with packed_input_element and compares with pack_signed_steps of `codes`.
template <class Stored>
void check_packing(const kernels::LayerInputSource& src, const std::vector<int32_t>& codes, int64_t T, int64_t N,
                   int32_t offset) {
  const int64_t N_p = (N + 15) / 16 * 16, cols_p = (src.cols + 15) / 16 * 16 + 16;  // extra padding columns too
  const std::vector<Stored> expected =
      kernels::pack_signed_steps<Stored>(codes.data(), T, N, src.cols, N_p, cols_p, offset, "x");
  size_t differing = 0;
  for (int64_t idx = 0; idx < T * N_p * cols_p; ++idx) {
    differing += kernels::packed_input_element<Stored>(src, N, N_p, cols_p, offset, idx) != expected[static_cast<size_t>(idx)];
  }
  CHECK(differing == 0);
}

// The whole call as the device runs it, on the host. float_x: layer 0 from floats (else from codes).
QuantGruResult emulate_device_call(const QuantizedGru& model, const std::vector<float>* float_x, const int32_t* q_x,
                                   int T, int N, const int32_t* q_h0, const int32_t* lengths, bool want_codes) {
  const int L = model.num_layers, D = model.num_directions, H = model.hidden_size;
  QuantGruResult result;
  result.T = T;
  result.N = N;
  result.h_n_codes.resize(static_cast<size_t>(L) * D * N * H);
  std::vector<std::vector<int32_t>> outs(2), previous(2);
  for (int l = 0; l < L; ++l) {
    kernels::LayerInputSource src;
    if (l == 0) {
      src.cols = model.input_size;
      src.kind = float_x != nullptr ? kernels::LayerInputKind::Floats : kernels::LayerInputKind::Codes;
      src.values = float_x != nullptr ? float_x->data() : nullptr;
      src.quantizer = input_quantizer(model.input_quant());
      src.codes = q_x;
    } else {
      src.kind = kernels::LayerInputKind::PreviousLayer;
      src.cols = static_cast<int64_t>(D) * H;
      src.H = H;
      for (int d = 0; d < D; ++d) {
        src.previous[d] = previous[static_cast<size_t>(d)].data();
        src.rescale[d] = h_to_next_x_map(model, l - 1, d);
      }
    }
    std::vector<int32_t> x_codes(static_cast<size_t>(T) * N * src.cols);
    for (int64_t row = 0; row < int64_t{T} * N; ++row) {
      for (int64_t k = 0; k < src.cols; ++k) x_codes[static_cast<size_t>(row * src.cols + k)] = kernels::layer_input_code(src, row, k);
    }
    const TensorQuant& xq = model.cell(l, 0).q(GruTensor::x);
    if (xq.bits <= 8) {
      check_packing<int8_t>(src, x_codes, T, N, xq.is_unsigned ? 128 : 0);
    } else {
      check_packing<int16_t>(src, x_codes, T, N, xq.is_unsigned ? 32768 : 0);
    }
    for (int d = 0; d < D; ++d) {
      const GruCellQuantParams& p = model.cell(l, d);
      std::vector<int32_t> q_h = initial_h_codes(model, q_h0, l, d, N);
      const std::vector<int32_t> h_start = q_h;
      outs[static_cast<size_t>(d)] = kernels::emulate_gru_cell(p.view(), p.q_W.data(), p.q_R.data(), p.input_size,
                                                              space_of(xq), x_codes.data(), T, N, h_start.data(), d == 1,
                                                              lengths);
      std::vector<int32_t> scratch(static_cast<size_t>(T) * N * H);  // the state rule alone (store_cell_codes)
      store_cell_codes(outs[static_cast<size_t>(d)], T, N, H, d, q_h, scratch.data(), H, 0, lengths);
      std::copy(q_h.begin(), q_h.end(), result.h_n_codes.begin() + static_cast<std::ptrdiff_t>((static_cast<size_t>(l) * D + d) * N * H));
    }
    previous = outs;
  }
  kernels::OutputSink sink;
  sink.H = H;
  sink.D = D;
  result.output.resize(static_cast<size_t>(T) * N * D * H);
  if (want_codes) result.output_codes.resize(result.output.size());
  sink.y = result.output.data();
  sink.codes = want_codes ? result.output_codes.data() : nullptr;
  for (int d = 0; d < D; ++d) {
    sink.cell_out[d] = previous[static_cast<size_t>(d)].data();
    sink.dequantizer[d] = code_dequantizer(model.cell(L - 1, d).q(GruTensor::h));
  }
  for (int64_t idx = 0; idx < static_cast<int64_t>(result.output.size()); ++idx) kernels::output_element(sink, idx);
  return result;
}

TEST_CASE("device flow on the host equals the reference executor: codes and floats in, every model case") {
  for (const test::GruModelCase& k : test::kPersistentModelCases) {
    if (k.H > 64) continue;  // the 257-unit case adds time, not coverage of the chaining
    INFO(case_name(k));
    const test::PreparedGruModel m = test::prepare_gru_model(k, 5);
    const QuantizedGru& model = m.c.quantized;
    const QuantGruResult ref = run_quantized_gru_codes(model, m.q_x.data(), k.T, k.N, m.h0(), nullptr, m.lengths_data());
    const QuantGruResult got = emulate_device_call(model, nullptr, m.q_x.data(), k.T, k.N, m.h0(), m.lengths_data(), true);
    CHECK(got.output_codes == ref.output_codes);
    CHECK(got.h_n_codes == ref.h_n_codes);
    CHECK(got.output == ref.output);
    // Floats in: the reference quantizes with TensorQuant::quantize, the device with quantize_input_code.
    std::vector<float> x = m.c.x;
    for (float& v : x) v *= 3.0f;
    const QuantGruResult ref_f = run_quantized_gru(model, x.data(), k.T, k.N, nullptr, nullptr, m.lengths_data());
    const QuantGruResult got_f = emulate_device_call(model, &x, nullptr, k.T, k.N, nullptr, m.lengths_data(), false);
    CHECK(got_f.output_codes.empty());  // not asked for
    CHECK(got_f.output == ref_f.output);
    CHECK(got_f.h_n_codes == ref_f.h_n_codes);
  }
}

// QuantGruCudaStream's frame on the host: layer 0's x from the frame's codes, each layer's cell one step from its
// state (updated in place), the next layer's x from that cell's output requantized, the output by output_element.
TEST_CASE("device streaming on the host equals one whole reference run, frame by frame") {
  for (const test::GruModelCase& k : test::kPersistentModelCases) {
    if (k.D != 1) continue;
    INFO(case_name(k));
    const test::PreparedGruModel m = test::prepare_gru_model(k, 5);
    const QuantizedGru& model = m.c.quantized;
    const int L = k.L, H = k.H, N = k.N, C = model.input_size;
    const QuantGruResult ref = run_quantized_gru_codes(model, m.q_x.data(), k.T, N, m.h0(), nullptr, nullptr);
    std::vector<int32_t> state = m.q_h0.empty() ? std::vector<int32_t>(static_cast<size_t>(L) * N * H) : m.q_h0;
    if (m.q_h0.empty()) {
      for (int l = 0; l < L; ++l) {
        std::fill_n(state.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(l) * N * H), static_cast<size_t>(N) * H,
                    model.cell(l, 0).q(GruTensor::h).zp);
      }
    }
    std::vector<int32_t> y_codes(static_cast<size_t>(k.T) * N * H);
    std::vector<float> y(y_codes.size());
    for (int f = 0; f < k.T; ++f) {
      kernels::LayerInputSource src;
      src.kind = kernels::LayerInputKind::Codes;
      src.cols = C;
      src.codes = m.q_x.data() + static_cast<size_t>(f) * N * C;
      std::vector<int32_t> out;
      for (int l = 0; l < L; ++l) {
        const GruCellQuantParams& p = model.cell(l, 0);
        std::vector<int32_t> x(static_cast<size_t>(N) * src.cols);
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t c = 0; c < src.cols; ++c) x[static_cast<size_t>(n * src.cols + c)] = kernels::layer_input_code(src, n, c);
        }
        int32_t* h = state.data() + static_cast<size_t>(l) * N * H;
        out = kernels::emulate_gru_cell(p.view(), p.q_W.data(), p.q_R.data(), p.input_size, space_of(p.q(GruTensor::x)),
                                        x.data(), 1, N, h, false);
        std::copy(out.begin(), out.end(), h);  // one step: the output is the new state (the kernel writes both)
        src = kernels::LayerInputSource{};
        src.kind = kernels::LayerInputKind::PreviousLayer;
        src.cols = H;
        src.H = H;
        src.previous[0] = h;
        if (l + 1 < L) src.rescale[0] = h_to_next_x_map(model, l, 0);
      }
      kernels::OutputSink sink;
      sink.H = H;
      sink.cell_out[0] = out.data();
      sink.dequantizer[0] = code_dequantizer(model.cell(L - 1, 0).q(GruTensor::h));
      sink.y = y.data() + static_cast<size_t>(f) * N * H;
      sink.codes = y_codes.data() + static_cast<size_t>(f) * N * H;
      for (int64_t idx = 0; idx < int64_t{N} * H; ++idx) kernels::output_element(sink, idx);
    }
    CHECK(y_codes == ref.output_codes);
    CHECK(y == ref.output);
    CHECK(state == ref.h_n_codes);
  }
}

TEST_CASE("device call plan: one upload per given input, two downloads plus the codes when asked, streams by direction") {
  const kernels::DeviceCallPlan floats = kernels::plan_device_call(2, true, false, false, false);
  CHECK(floats.uploads == 1);
  CHECK(floats.downloads == 2);
  CHECK(floats.host_passes == 0);
  CHECK(floats.streams == 2);
  const kernels::DeviceCallPlan codes = kernels::plan_device_call(1, false, true, true, true);
  CHECK(codes.uploads == 3);
  CHECK(codes.downloads == 3);
  CHECK(codes.host_passes == 1);
  CHECK(codes.streams == 1);
  CHECK(codes.total() == 6);
  CHECK(codes.describe() == "3 up, 3 down, 1 host pass(es), 1 stream(s)");
  CHECK(kernels::plan_device_call(2, true, false, false, false, 4).downloads == 6);  // four persistent cells' error words
}

// A streaming state's frames of one kind, as QuantGruCudaStream::Impl::step_frame drives choose_frame_action: the
// graph and the workspace address it was captured at, whether the kind has launched once, captures counted.
struct FrameIssueModel {
  bool graphs = true;  // FrameIssue::Graph and no capture failed
  bool launched_once = false;
  bool have_graph = false;
  int captured_at = -1;
  int captures = 0;
  kernels::FrameAction step(int workspace_at, bool capture_fails = false) {
    const kernels::FrameAction a = kernels::choose_frame_action(graphs, launched_once, have_graph, captured_at == workspace_at);
    if (a == kernels::FrameAction::Capture) {
      if (capture_fails) {
        graphs = false;
        have_graph = false;
        return kernels::FrameAction::Launch;  // the frame itself then runs as launches
      }
      have_graph = true;
      captured_at = workspace_at;
      ++captures;
    }
    if (a == kernels::FrameAction::Launch) launched_once = true;
    return a;
  }
};

TEST_CASE("streaming frame graphs: launch once, capture once, replay; recapture only where the workspace moved") {
  using kernels::FrameAction;
  SUBCASE("one state") {
    FrameIssueModel s;
    CHECK(s.step(1) == FrameAction::Launch);
    CHECK(s.step(1) == FrameAction::Capture);
    for (int i = 0; i < 20; ++i) CHECK(s.step(1) == FrameAction::Replay);
    CHECK(s.captures == 1);
    CHECK(s.step(2) == FrameAction::Capture);  // a whole call of a longer T moved the workspace
    CHECK(s.step(2) == FrameAction::Replay);
    CHECK(s.captures == 2);
  }
  SUBCASE("two states and whole calls in turn (the GPU self-test's check_stream_interleaved)") {
    FrameIssueModel a, b;
    int workspace = 1;  // the constructor reserved T = 1
    for (int t = 0; t < 8; ++t) {
      const FrameAction fa = a.step(workspace), fb = b.step(workspace);
      CHECK(fa == fb);
      CHECK(fa == (t == 0 ? FrameAction::Launch : t == 1 ? FrameAction::Capture : FrameAction::Replay));
      if (t == 0) workspace = 2;  // the first whole call, of T frames, grows the workspaces before any capture
    }
    CHECK(a.captures == 1);
    CHECK(b.captures == 1);
  }
  SUBCASE("launches asked for, or a failed capture: launches from then on") {
    FrameIssueModel asked;
    asked.graphs = false;
    for (int i = 0; i < 5; ++i) CHECK(asked.step(1) == FrameAction::Launch);
    CHECK(asked.captures == 0);
    FrameIssueModel failing;
    CHECK(failing.step(1) == FrameAction::Launch);
    CHECK(failing.step(1, true) == FrameAction::Launch);
    for (int i = 0; i < 5; ++i) CHECK(failing.step(1) == FrameAction::Launch);
    CHECK(failing.captures == 0);
  }
}

}  // namespace
}  // namespace qgru
