// Whole models on the GPU: QuantGruCuda (every cell on cuBLAS int8 or the 16-bit kernel, chained by the shared
// layer loop) against the CPU reference executor, code for code, for every preset on random 2-layer
// bidirectional models (H off multiples of 4 and 16, with and without h0, inputs wide enough to saturate; both
// cells, the linear_before_reset = 0 one without h0; both cells with sequence lengths, rows of length 0 and T
// among them);
// FloatGruCuda against the CPU float executor within kFloatDeviceTolerance: both cells, with and without h0 and
// sequence lengths.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../unit/support/quant_test_support.h"
#include "gpu_checks.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/verify/device_compare.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru_cuda/float_gru_cuda.h"
#include "qgru_cuda/quant_gru_cuda.h"

namespace qgru::cuda_test {

namespace {

struct Shape {
  int C, H, T, N;
};
constexpr Shape kShapes[] = {{5, 1, 4, 1}, {5, 33, 6, 3}, {16, 64, 20, 5}, {7, 130, 9, 17}};

}  // namespace

int check_quant_gru() {
  int failures = 0;
  for (const char* preset : {"int8", "int16-activations", "int16"}) {
    const BitwidthConfig config = load_bitwidth_config(preset);
    for (const Shape& s : kShapes) {
      for (int variant = 0; variant < 5; ++variant) {
        // 0: plain; 1: h0; 2: the linear_before_reset = 0 cell; 3: h0 and lengths; 4: that cell with lengths
        const bool with_h0 = variant == 1 || variant == 3;
        const bool linear_before_reset = variant != 2 && variant != 4;
        const bool with_lengths = variant >= 3;
        const int L = 2, D = 2;
        std::vector<float> h0;
        if (with_h0) h0 = test::random_input(static_cast<size_t>(L * D * s.N * s.H), 5u + static_cast<uint32_t>(s.H), 0.5f);
        test::CalibratedCase c = test::calibrated_case(s.C, s.H, L, D, s.T, s.N, config, 17u + static_cast<uint32_t>(s.H), h0,
                                                       linear_before_reset);
        std::vector<float> x = c.x;
        for (float& v : x) v *= 3.0f;  // beyond the calibration range: x saturates
        const float* h0_data = h0.empty() ? nullptr : h0.data();
        // Row n's length cycles T, 0, 1, ..., T (every row a different count of padded steps).
        std::vector<int32_t> lengths;
        if (with_lengths) {
          for (int n = 0; n < s.N; ++n) lengths.push_back(n == 0 ? s.T : (n - 1) % (s.T + 1));
        }
        const int32_t* lengths_data = lengths.empty() ? nullptr : lengths.data();
        const QuantGruResult cpu = run_quantized_gru(c.quantized, x.data(), s.T, s.N, h0_data, nullptr, lengths_data);
        const cuda::QuantGruCuda gpu_model(c.quantized);
        const QuantGruResult gpu = gpu_model.run(x.data(), s.T, s.N, h0_data, lengths_data);
        const CodeComparison cmp = compare_quant_codes(cpu, gpu, s.H, D);
        std::printf("%s quantized GRU %-17s C=%d H=%d T=%d N=%d L=2 D=2 h0=%d lbr=%d lengths=%d [%s]: %zu codes, %zu differ%s%s\n",
                    cmp.equal() ? "ok  " : "FAIL", preset, s.C, s.H, s.T, s.N, with_h0 ? 1 : 0, linear_before_reset ? 1 : 0,
                    with_lengths ? 1 : 0,
                    gpu_model.describe().c_str(),
                    cmp.compared, cmp.mismatches, cmp.first.empty() ? "" : "; first at ", cmp.first.c_str());
        failures += cmp.equal() ? 0 : 1;
      }
    }
  }
  return failures;
}

int check_float_gru() {
  int failures = 0;
  for (const Shape& s : kShapes) {
    for (int variant = 0; variant < 6; ++variant) {
      // 0: plain; 1: h0; 2: lengths; 3: the linear_before_reset = 0 cell; 4: that cell with h0; 5: with h0 and lengths
      const bool with_h0 = variant == 1 || variant == 4 || variant == 5;
      const bool with_lengths = variant == 2 || variant == 5;
      const bool linear_before_reset = variant < 3;
      const int L = 2, D = 2;
      FloatGruModel model = test::random_float_gru(s.C, s.H, L, D, 40u + static_cast<uint32_t>(s.H));
      model.linear_before_reset = linear_before_reset;
      const std::vector<float> x = test::random_input(static_cast<size_t>(s.T) * s.N * s.C, 41u);
      std::vector<float> h0;
      if (with_h0) h0 = test::random_input(static_cast<size_t>(L * D * s.N * s.H), 42u, 0.5f);
      const float* h0_data = h0.empty() ? nullptr : h0.data();
      // Row n's length cycles T, 0, 1, ..., T, as in check_quant_gru.
      std::vector<int32_t> lengths;
      if (with_lengths) {
        for (int n = 0; n < s.N; ++n) lengths.push_back(n == 0 ? s.T : (n - 1) % (s.T + 1));
      }
      const int32_t* lengths_data = lengths.empty() ? nullptr : lengths.data();
      const FloatGruResult cpu = run_float_gru(model, x.data(), s.T, s.N, h0_data, nullptr, lengths_data);
      const FloatGruResult gpu = cuda::FloatGruCuda(model).run(x.data(), s.T, s.N, h0_data, lengths_data);
      const FloatComparison cmp = compare_float_outputs(cpu, gpu, s.H, D);
      std::printf("%s float GRU C=%d H=%d T=%d N=%d L=2 D=2 h0=%d lbr=%d lengths=%d: max |gpu - cpu| = %.3g "
                  "(tolerance %.0e)%s%s\n",
                  cmp.within() ? "ok  " : "FAIL", s.C, s.H, s.T, s.N, with_h0 ? 1 : 0, linear_before_reset ? 1 : 0,
                  with_lengths ? 1 : 0, cmp.max_abs_diff, cmp.tolerance, cmp.within() ? "" : "; worst at ",
                  cmp.within() ? "" : cmp.worst.c_str());
      failures += cmp.within() ? 0 : 1;
    }
  }
  return failures;
}

}  // namespace qgru::cuda_test
