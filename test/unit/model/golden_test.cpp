// The float GRU against torch.nn.GRU: every case under test/data/golden/ (scripts/make_float_goldens.py)
// is loaded from its safetensors file and run; output and h_n must match torch within 1e-5.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "pytorch_reference.h"
#include "qgru/io/npy.h"
#include "qgru/model/float_gru.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/io/sequence_io.h"

namespace fs = std::filesystem;

namespace {

const fs::path kGoldenDir = fs::path(QGRU_TEST_DATA_DIR) / "golden";

std::vector<std::string> golden_cases() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(kGoldenDir)) {
    if (entry.is_directory() && fs::exists(entry.path() / "model.safetensors")) names.push_back(entry.path().filename());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("float GRU matches torch.nn.GRU on every golden case") {
  const auto cases = golden_cases();
  // The generator writes these; a missing folder means the goldens were not committed.
  REQUIRE(cases.size() >= 17);
  for (const auto& name : cases) {
    CAPTURE(name);
    const fs::path dir = kGoldenDir / name;
    nlohmann::json config;
    std::ifstream(dir / "case.json") >> config;
    const bool batch_first = config.at("batch_first").get<bool>();
    const auto model = qgru::load_float_gru((dir / "model.safetensors").string(),
                                            qgru::parse_weight_layout(config.at("layout").get<std::string>()));
    const qgru::Tensor x_tensor = qgru::read_npy((dir / "x.npy").string());
    const qgru::Tensor y_tensor = qgru::read_npy((dir / "y.npy").string());
    const qgru::Tensor hn_tensor = qgru::read_npy((dir / "hn.npy").string());
    REQUIRE(x_tensor.rank() == 3);
    REQUIRE(x_tensor.shape[2] == model.input_size);
    const int T = static_cast<int>(x_tensor.shape[batch_first ? 1 : 0]);
    const int N = static_cast<int>(x_tensor.shape[batch_first ? 0 : 1]);
    std::vector<float> x = qgru::tensor_to_f32(x_tensor);
    if (batch_first) x = qgru::swap_first_two_axes(x, N, T, model.input_size);
    std::vector<float> h0;
    if (fs::exists(dir / "h0.npy")) h0 = qgru::tensor_to_f32(qgru::read_npy((dir / "h0.npy").string()));
    const auto result = qgru::run_float_gru(model, x.data(), T, N, h0.empty() ? nullptr : h0.data());
    std::vector<float> y = result.output;
    const int DH = model.num_directions * model.hidden_size;
    if (batch_first) y = qgru::swap_first_two_axes(y, T, N, DH);
    const auto y_expected = qgru::tensor_to_f32(y_tensor);
    const auto hn_expected = qgru::tensor_to_f32(hn_tensor);
    REQUIRE(y.size() == y_expected.size());
    REQUIRE(result.h_n.size() == hn_expected.size());
    CHECK_MESSAGE(qgru_test::max_abs_diff(y, y_expected) <= 1e-5,
                  qgru_test::first_mismatch(y, y_expected, 1e-5, y_tensor.shape, batch_first ? "[n, t, channel]" : "[t, n, channel]"));
    CHECK_MESSAGE(qgru_test::max_abs_diff(result.h_n, hn_expected) <= 1e-5,
                  qgru_test::first_mismatch(result.h_n, hn_expected, 1e-5, hn_tensor.shape, "[layer*D+direction, n, channel]"));
    double norm = 0.0;
    for (float v : y_expected) norm += std::fabs(v);
    CHECK(norm > 0.0);
  }
}

TEST_CASE("golden layouts are detected as the generator wrote them") {
  CHECK(qgru::load_float_gru((kGoldenDir / "haste_layout" / "model.safetensors").string()).source_layout == "haste");
  const auto prefixed = qgru::load_float_gru((kGoldenDir / "prefix_no_bias" / "model.safetensors").string());
  CHECK(prefixed.source_layout == "pytorch");
  CHECK(prefixed.cell(0, 0).bw == std::vector<float>(18, 0.0f));
  const auto two = qgru::load_float_gru((kGoldenDir / "haste_two_layers_bidirectional" / "model.safetensors").string());
  CHECK(two.num_layers == 2);
  CHECK(two.num_directions == 2);
}
