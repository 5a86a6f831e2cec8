#pragma once
// Artifacts for the runtime C API's tests: a calibrated random model (quant_test_support.h) written by the
// toolchain's writer into a fresh folder, so that the API reads it as a product would.
#include <cstdint>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "qgru/quant/artifact_write.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/runtime/quant_executor.h"
#include "quant_test_support.h"

namespace qgru::test {

struct TestArtifact {
  CalibratedCase c;
  std::string json_path;
  std::vector<int32_t> q_x;  // [T, N, C] the calibration input's codes
};

inline TestArtifact make_test_artifact(const std::string& name, const std::string& preset, int C, int H, int L, int D,
                                       int T, int N, uint32_t seed, bool linear_before_reset = true) {
  TestArtifact a;
  a.c = calibrated_case(C, H, L, D, T, N, load_bitwidth_config(preset), seed, {}, linear_before_reset);
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("qgru_capi_test_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::create_directories(dir);
  a.json_path = (dir / "model.qgru.json").string();
  write_artifact(a.json_path, a.c.quantized);
  a.q_x = quantize_values(a.c.quantized.input_quant(), a.c.x.data(), a.c.x.size());
  return a;
}

}  // namespace qgru::test
