#pragma once
// A device executor (CUDA) against the CPU, as `qgru verify --device cuda` and the GPU self-test report it:
// integer codes must be equal one for one (output and h_n); float results must agree within a stated
// absolute tolerance. Plain C++: the comparison is tested on the CPU with injected differences.
#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "qgru/model/float_gru.h"
#include "qgru/runtime/quant_executor.h"

namespace qgru {

// Float GRU on the GPU vs the CPU float executor: fp32 GEMM accumulation (the CPU sums in double) and CUDA's
// exp/tanh move h by a few float ulps per step; h lives in [-1, 1], so 1e-4 absolute leaves two orders of
// magnitude of room while still catching any real error (a wrong gate, step or direction moves h by far more).
inline constexpr double kFloatDeviceTolerance = 1e-4;

struct CodeComparison {
  size_t compared = 0;    // output and h_n codes compared
  size_t mismatches = 0;
  std::string first;      // where the first mismatch is, with both codes ("" when equal)
  bool equal() const { return compared > 0 && mismatches == 0; }
};

// cpu / device: results of the same model on the same input codes. H, D: the model's hidden size and
// directions (for naming the first mismatch as t, n, direction, unit). Sizes that differ are a mismatch.
CodeComparison compare_quant_codes(const QuantGruResult& cpu, const QuantGruResult& device, int H, int D);

struct FloatComparison {
  size_t compared = 0;
  double max_abs_diff = 0.0;  // over output and h_n (NaN anywhere: infinity)
  double tolerance = kFloatDeviceTolerance;
  std::string worst;          // where max_abs_diff is, with both values
  bool within() const { return compared > 0 && max_abs_diff <= tolerance; }
};

FloatComparison compare_float_outputs(const FloatGruResult& cpu, const FloatGruResult& device, int H, int D,
                                      double tolerance = kFloatDeviceTolerance);

// The lines verify prints and the JSON it adds to the report ("device_check").
std::string device_comparison_text(const std::string& device, const CodeComparison& codes, const FloatComparison& floats);
nlohmann::json device_comparison_json(const std::string& device, const CodeComparison& codes, const FloatComparison& floats);

}  // namespace qgru
