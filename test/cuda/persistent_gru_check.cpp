// The persistent GRU kernel on the GPU (GruRecurrence::Persistent) against CPU references, code for code, one line
// per case naming the path the cell took ("persistent (...)" or "per-step: <reason>"; a case the plan should take
// but did not counts as a failure):
//   single cells: HandGruCell's direct int64 loop (test/unit/kernels/hand_gru_cell.h), both cells
//   (linear_before_reset 1 and 0), H on edges (1, 31, 32, 33, 257) and the benchmark's widths, N 1 / 3 / 33 / 64,
//   T 0 / 1 / 5, forward and reverse, with h0;
//   whole models: QuantGruCuda against the reference executor (run_quantized_gru_codes): int8 (the int8 kernel),
//   int16-activations and int16 (the 16-bit kernel), multiplier scales, 1 to 3 layers, bidirectional, h0, sequence
//   lengths with rows of length 0, 1 and T.
// small = true: the compute-sanitizer list (a few small cases, both cells, lengths, reverse; under a minute).
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "../unit/kernels/hand_gru_cell.h"
#include "../unit/support/gru_model_cases.h"
#include "gpu_checks.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/verify/device_compare.h"
#include "qgru_cuda/gru_cell_cuda.h"
#include "qgru_cuda/quant_gru_cuda.h"

namespace qgru::cuda_test {

namespace {

std::vector<int32_t> random_codes(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(count);
  for (auto& x : v) x = static_cast<int32_t>(static_cast<uint32_t>(rng()) % 256);
  return v;
}

bool is_persistent(const std::string& path) { return path.rfind("persistent", 0) == 0; }

// One cell of hidden size H built once, run on every (N, T, direction) given; one line per run.
int check_cell(int H, bool reset_before_linear, std::initializer_list<int> batches, std::initializer_list<int> lengths,
               std::initializer_list<bool> directions) {
  const int C = 5;
  const qgru::test::HandGruCell cell(H, C, static_cast<uint32_t>(H * 3 + 1), reset_before_linear);
  const cuda::GruCellCuda gpu_cell(cell.view, cell.q_W.data(), cell.q_R.data(), C, cell.x_space, nullptr, nullptr,
                                   cuda::GruRecurrence::Persistent);
  int failures = 0;
  for (int N : batches) {
    for (int T : lengths) {
      for (bool reverse : directions) {
        const auto q_x = random_codes(static_cast<size_t>(T * N * C), static_cast<uint32_t>(T + H));
        const auto q_h0 = random_codes(static_cast<size_t>(N * H), static_cast<uint32_t>(N + H));
        const std::vector<int32_t> gpu = gpu_cell.run(q_x.data(), T, N, q_h0.data(), reverse);
        const std::vector<int32_t> ref = cell.reference(q_x, T, N, q_h0, reverse);
        const std::string path = gpu_cell.describe_path(N);
        int bad = gpu.size() == ref.size() ? 0 : 1;
        for (size_t i = 0; bad == 0 && i < ref.size(); ++i) {
          if (gpu[i] != ref[i]) {
            bad = 1;
            std::printf("  first mismatch at t=%zu n=%zu j=%zu: gpu %d cpu %d\n", i / (N * H), (i / H) % N, i % H,
                        gpu[i], ref[i]);
          }
        }
        // T = 0 launches nothing: an empty result whatever the path
        const bool fails = bad != 0 || (T > 0 && !is_persistent(path));
        std::printf("%s persistent GRU cell H=%d C=%d T=%d N=%d reverse=%d lbr=%d [%s]%s\n", fails ? "FAIL" : "ok  ", H, C,
                    T, N, reverse ? 1 : 0, reset_before_linear ? 0 : 1, path.c_str(), bad ? ": codes differ" : "");
        failures += fails ? 1 : 0;
      }
    }
  }
  return failures;
}

int check_model(const test::GruModelCase& k) {
  const test::PreparedGruModel m = test::prepare_gru_model(k, 7);
  const QuantGruResult cpu = run_quantized_gru_codes(m.c.quantized, m.q_x.data(), k.T, k.N, m.h0(), nullptr, m.lengths_data());
  const cuda::QuantGruCuda gpu_model(m.c.quantized, cuda::GruRecurrence::Persistent);
  const QuantGruResult gpu = gpu_model.run_codes(m.q_x.data(), k.T, k.N, m.h0(), m.lengths_data());
  const CodeComparison cmp = compare_quant_codes(cpu, gpu, k.H, k.D);
  const std::string described = gpu_model.describe();
  // Every cell must take the persistent path (the int8 preset's the int8 kernel, the 16-bit presets' the wide one).
  const bool wide = std::string(k.preset) != "int8";
  const bool path_right = described.find("per-step") == std::string::npos &&
                          (described.find(", 16-bit)") != std::string::npos) == wide;
  const bool fails = !cmp.equal() || !path_right;
  std::printf("%s persistent quantized GRU %-17s mult=%d H=%d T=%d N=%d L=%d D=%d h0=%d lbr=%d lengths=%d [%s]: %zu codes, "
              "%zu differ%s%s%s\n",
              fails ? "FAIL" : "ok  ", k.preset, k.multiplier ? 1 : 0, k.H, k.T, k.N, k.L, k.D, k.with_h0 ? 1 : 0,
              k.linear_before_reset ? 1 : 0, k.with_lengths ? 1 : 0, described.c_str(), cmp.compared, cmp.mismatches,
              cmp.first.empty() ? "" : "; first at ", cmp.first.c_str(), path_right ? "" : "; wrong path");
  return fails ? 1 : 0;
}

}  // namespace

int check_persistent_gru(bool small) {
  int failures = 0;
  if (small) {
    for (bool rbl : {false, true}) failures += check_cell(33, rbl, {3}, {4}, {false, true});
    failures += check_model({"int8", false, 33, 2, 2, 3, 4, true, true, true});
    failures += check_model({"int8", true, 31, 1, 2, 3, 4, false, true, false});
    failures += check_model({"int16-activations", false, 33, 1, 2, 3, 4, true, true, false});
    return failures;
  }
  for (bool rbl : {false, true}) {
    for (int H : {1, 31, 32, 33, 257}) failures += check_cell(H, rbl, {1, 3, 33}, {0, 1, 5}, {false, true});
    // The benchmark's widths and batches.
    failures += check_cell(64, rbl, {1}, {20}, {false});
    failures += check_cell(256, rbl, {64}, {10}, {true});
    failures += check_cell(512, rbl, {32}, {10}, {false});
    failures += check_cell(1024, rbl, {1}, {20}, {true});
  }
  for (const test::GruModelCase& k : test::kPersistentModelCases) failures += check_model(k);
  // Wider and longer than the CPU emulation's list.
  failures += check_model({"int8", false, 130, 2, 2, 17, 9, true, true, true});
  failures += check_model({"int8", true, 64, 2, 2, 5, 20, true, true, false});
  failures += check_model({"int16-activations", false, 130, 2, 2, 17, 9, true, true, false});
  failures += check_model({"int16", false, 257, 1, 2, 33, 5, true, true, true});
  return failures;
}

}  // namespace qgru::cuda_test
