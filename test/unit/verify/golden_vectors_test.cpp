// Golden vectors: what hardware teams compare against. The committed files are checked code for code by
// an independent re-implementation (scripts/reference_fixed_point.py, test/cli/golden_reference.sh); here
// the C++ side must keep producing exactly them, and every tensor must hold what its name says, checked
// with arithmetic written out in the test (GEMMs, zero-point corrections, the time chaining of h).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "qgru/base/error.h"
#include "qgru/base/sha256.h"
#include "qgru/fixed/rounding.h"
#include "qgru/io/npy.h"
#include "qgru/io/safetensors.h"
#include "qgru/runtime/artifact.h"
#include "qgru/runtime/quant_run.h"
#include "qgru/verify/golden_vectors.h"

namespace qgru {
namespace {

namespace fs = std::filesystem;

const std::string kData = std::string(QGRU_TEST_DATA_DIR) + "/golden_fixed";

struct GoldenCase {
  std::string artifact, golden;
};

const std::vector<GoldenCase>& cases() {
  static const std::vector<GoldenCase> all = {
      {kData + "/digits_int8/model.qgru.json", kData + "/digits_int8/golden.safetensors"},
      {kData + "/random_l2_bidir/model_int8.qgru.json", kData + "/random_l2_bidir/golden_int8.safetensors"},
      {kData + "/random_l2_bidir/model_int8-multiplier.qgru.json", kData + "/random_l2_bidir/golden_int8-multiplier.safetensors"},
      {kData + "/random_l2_bidir/model_int16-activations.qgru.json",
       kData + "/random_l2_bidir/golden_int16-activations.safetensors"},
      {kData + "/onnx_lbr0_l2/model_int8.qgru.json", kData + "/onnx_lbr0_l2/golden_int8.safetensors"},
      {kData + "/onnx_lbr0_l2/model_int16-activations.qgru.json",
       kData + "/onnx_lbr0_l2/golden_int16-activations.safetensors"}};
  return all;
}

std::vector<int64_t> values(const std::map<std::string, Tensor>& tensors, const std::string& name) {
  const auto it = tensors.find(name);
  REQUIRE_MESSAGE(it != tensors.end(), "missing tensor " << name);
  return tensor_to_i64(it->second, name);
}

std::vector<int32_t> as_i32(const std::vector<int64_t>& v) { return std::vector<int32_t>(v.begin(), v.end()); }

TEST_CASE("the golden vectors regenerated from the committed artifacts equal the committed files") {
  for (const GoldenCase& c : cases()) {
    CAPTURE(c.golden);
    const QuantizedGru model = read_artifact(c.artifact);
    const SafetensorsFile committed = read_safetensors(c.golden);
    const Tensor& q_x = committed.tensors.at("input.q_x");
    const std::vector<int32_t> x = as_i32(values(committed.tensors, "input.q_x"));
    const std::vector<int32_t> h0 = as_i32(values(committed.tensors, "input.q_h0"));
    const GoldenVectors fresh = make_golden_vectors(model, x.data(), static_cast<int>(q_x.shape[0]),
                                                    static_cast<int>(q_x.shape[1]), h0.data(),
                                                    golden_options_for_artifact(c.artifact));
    REQUIRE(fresh.tensors.size() == committed.tensors.size());
    for (const auto& [name, tensor] : committed.tensors) {
      const std::string& tensor_name = name;  // CAPTURE needs a variable: C++17 lambdas cannot capture a binding (clang)
      CAPTURE(tensor_name);
      REQUIRE(fresh.tensors.count(name) == 1);
      const Tensor& mine = fresh.tensors.at(name);
      CHECK(mine.shape == tensor.shape);
      CHECK(mine.dtype == tensor.dtype);
      CHECK(values(fresh.tensors, name) == values(committed.tensors, name));
    }
    CHECK(fresh.metadata.at("artifact_sha256") == sha256_file_hex(c.artifact));
    CHECK(committed.metadata.at("artifact_sha256") == sha256_file_hex(c.artifact));
    CHECK(committed.metadata.at("format") == kGoldenVectorsFormat);
  }
}

TEST_CASE("every golden tensor holds what its name says (GEMMs, corrections, h chaining, output)") {
  for (const GoldenCase& gc : cases()) {
    CAPTURE(gc.golden);
    const QuantizedGru model = read_artifact(gc.artifact);
    const SafetensorsFile file = read_safetensors(gc.golden);
    const auto& t = file.tensors;
    const int T = static_cast<int>(t.at("input.q_x").shape[0]);
    const int N = static_cast<int>(t.at("input.q_x").shape[1]);
    const int H = model.hidden_size;
    const int D = model.num_directions;
    const std::vector<int64_t> h0 = values(t, "input.q_h0");
    const std::vector<int64_t> y = values(t, "output.q_y");
    const std::vector<int64_t> h_n = values(t, "output.q_h_n");
    int64_t nonzero_gemm = 0;
    for (int l = 0; l < model.num_layers; ++l) {
      for (int d = 0; d < D; ++d) {
        CAPTURE(l);
        CAPTURE(d);
        const GruCellQuantParams& p = model.cell(l, d);
        const int C = p.input_size;
        const std::string prefix = "l" + std::to_string(l) + ".d" + std::to_string(d) + ".";
        const auto q_x = values(t, prefix + "q_x");
        const auto q_h_prev = values(t, prefix + "q_h_prev");
        const auto q_h_new = values(t, prefix + "q_h_new");
        const auto gemm_x = values(t, prefix + "gemm_x");
        const auto gemm_x_corrected = values(t, prefix + "gemm_x_corrected");
        const auto gemm_h = values(t, prefix + "gemm_h");
        const auto gemm_h_corrected = values(t, prefix + "gemm_h_corrected");
        // The linear_before_reset = 0 cell: r ⊙ h in h's space (C-2a, written out here), the n channels' operand.
        std::vector<int64_t> q_reset_hidden;
        if (!p.linear_before_reset) {
          q_reset_hidden = values(t, prefix + "q_reset_hidden");
          const auto q_r = values(t, prefix + "q_reset_gate_output");
          const TensorQuant& hq = p.q(GruTensor::h);
          const int32_t zp_r = p.q(GruTensor::reset_gate_output).zp;
          for (size_t e = 0; e < q_r.size(); ++e) {
            const int64_t product = (q_r[e] - zp_r) * (q_h_prev[e] - hq.zp);
            const int64_t want = std::min<int64_t>(std::max<int64_t>(rshift_round(product, p.shift_reset_mul_h_to_h) + hq.zp, hq.qmin()), hq.qmax());
            REQUIRE(q_reset_hidden[e] == want);
          }
        } else {
          CHECK(t.count(prefix + "q_reset_hidden") == 0);
        }
        if (l == 0) CHECK(q_x == values(t, "input.q_x"));
        for (int step = 0; step < T; ++step) {
          for (int n = 0; n < N; ++n) {
            const size_t row = static_cast<size_t>(step) * N + n;
            for (int c = 0; c < 3 * H; ++c) {
              int64_t gx = 0, gh = 0;
              for (int k = 0; k < C; ++k) gx += int64_t{p.q_W[static_cast<size_t>(c) * C + k]} * q_x[row * C + k];
              const std::vector<int64_t>& operand = !p.linear_before_reset && c >= 2 * H ? q_reset_hidden : q_h_prev;
              for (int k = 0; k < H; ++k) gh += int64_t{p.q_R[static_cast<size_t>(c) * H + k]} * operand[row * H + k];
              const size_t e = row * 3 * H + c;
              REQUIRE(gemm_x[e] == gx);
              REQUIRE(gemm_h[e] == gh);
              REQUIRE(gemm_x_corrected[e] == gx - p.W_sum[c] * p.q(GruTensor::x).zp);
              REQUIRE(gemm_h_corrected[e] == gh - p.R_sum[c] * p.q(GruTensor::h).zp);
              nonzero_gemm += gx != 0;
            }
            // h chaining: the state entering step t is the one left by the previous visited step.
            const int previous = d == 0 ? step - 1 : step + 1;
            for (int j = 0; j < H; ++j) {
              const int64_t expected = (previous < 0 || previous >= T)
                                           ? h0[(static_cast<size_t>(l * D + d) * N + n) * H + j]
                                           : q_h_new[(static_cast<size_t>(previous) * N + n) * H + j];
              REQUIRE(q_h_prev[row * H + j] == expected);
              if (l + 1 == model.num_layers) {
                REQUIRE(y[row * D * H + static_cast<size_t>(d) * H + j] == q_h_new[row * H + j]);
              }
            }
          }
        }
        // Final state: after t = T-1 forward, after t = 0 reverse.
        const int last = d == 0 ? T - 1 : 0;
        for (int n = 0; n < N; ++n) {
          for (int j = 0; j < H; ++j) {
            REQUIRE(h_n[(static_cast<size_t>(l * D + d) * N + n) * H + j] ==
                    q_h_new[(static_cast<size_t>(last) * N + n) * H + j]);
          }
        }
        // Every stored code lies in its tensor's code range.
        const std::pair<const char*, GruTensor> coded[] = {
            {"q_weight_ih_linear", GruTensor::weight_ih_linear}, {"q_weight_hh_linear", GruTensor::weight_hh_linear},
            {"q_update_gate_input", GruTensor::update_gate_input}, {"q_update_gate_output", GruTensor::update_gate_output},
            {"q_reset_gate_input", GruTensor::reset_gate_input}, {"q_reset_gate_output", GruTensor::reset_gate_output},
            {"q_new_gate_input", GruTensor::new_gate_input}, {"q_new_gate_output", GruTensor::new_gate_output},
            {"q_h_new", GruTensor::h}, {"q_x", GruTensor::x}};
        for (const auto& [name, tensor] : coded) {
          const std::string tensor_name = name;  // CAPTURE needs a variable: C++17 lambdas cannot capture a binding (clang)
          CAPTURE(tensor_name);
          for (int64_t v : values(t, prefix + name)) {
            REQUIRE(v >= p.q(tensor).qmin());
            REQUIRE(v <= p.q(tensor).qmax());
          }
        }
      }
    }
    CHECK(nonzero_gemm > 0);
  }
}

TEST_CASE("golden vectors refuse input codes outside x's range and empty batches") {
  const QuantizedGru model = read_artifact(cases()[0].artifact);
  const TensorQuant& x = model.input_quant();
  std::vector<int32_t> q_x(static_cast<size_t>(2) * model.input_size, x.zp);
  q_x[3] = x.qmax() + 1;
  CHECK_THROWS_WITH_AS(make_golden_vectors(model, q_x.data(), 2, 1, nullptr, {}),
                       doctest::Contains("outside x's code range"), Error);
  CHECK_THROWS_AS(make_golden_vectors(model, q_x.data(), 0, 1, nullptr, {}), Error);
}

TEST_CASE("golden vectors from floats keep only the first sequences and default h0 to the code of 0.0") {
  const QuantizedGru model = read_artifact(cases()[1].artifact);
  const int T = 3, N = 5, keep = 2;
  std::vector<float> x(static_cast<size_t>(T) * N * model.input_size);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((static_cast<int>(i * 7) % 13) - 6) * 0.25f;
  const fs::path dir = fs::temp_directory_path() / ("qgru_golden_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "g.safetensors").string();
  write_golden_vectors_from_floats(path, model, x.data(), T, N, nullptr, keep, {});
  const SafetensorsFile file = read_safetensors(path);
  fs::remove_all(dir);
  CHECK(file.tensors.at("input.q_x").shape == std::vector<int64_t>{T, keep, model.input_size});
  const std::vector<int64_t> q_x = values(file.tensors, "input.q_x");
  for (int t = 0; t < T; ++t) {
    for (int n = 0; n < keep; ++n) {
      for (int k = 0; k < model.input_size; ++k) {
        const float v = x[(static_cast<size_t>(t) * N + n) * model.input_size + k];
        REQUIRE(q_x[(static_cast<size_t>(t) * keep + n) * model.input_size + k] == model.input_quant().quantize(v));
      }
    }
  }
  const std::vector<int64_t> h0 = values(file.tensors, "input.q_h0");
  for (size_t cell = 0; cell < model.cells.size(); ++cell) {
    for (int i = 0; i < keep * model.hidden_size; ++i) {
      REQUIRE(h0[cell * keep * model.hidden_size + static_cast<size_t>(i)] == model.cells[cell].q(GruTensor::h).zp);
    }
  }
  CHECK(file.metadata.at("num_layers") == "2");
  CHECK(file.metadata.at("num_directions") == "2");
}

// `qgru run --model ARTIFACT --input X [--h0 H0 | --h0-codes H0C] [--batch-first] --output OUT.y.npy
// --dump-intermediates OUT` as the command runs it: run_quantized_files with the golden vectors as the extra
// member of its output group (apps/qgru/cmd_run.cpp).
void dump_as_qgru_run(const std::string& out, const std::string& artifact, const std::string& x, const std::string& h0,
                      const std::string& h0_codes, bool batch_first) {
  QuantRunOptions options;
  options.artifact_path = artifact;
  options.input_path = x;
  options.h0_path = h0;
  options.h0_codes_path = h0_codes;
  options.batch_first = batch_first;
  options.output_path = out + ".y.npy";
  options.extra_output_path = out;
  options.extra_output = [&](const QuantizedGru& model, const int32_t* q_x, int T, int N, const int32_t* q_h0) {
    return serialize_golden_vectors(model, q_x, T, N, q_h0, golden_options_for_artifact(artifact));
  };
  run_quantized_files(options);
}

TEST_CASE("qgru run's dump reads batch-first integer codes as time-major codes, and float h0 into h's space") {
  const GoldenCase& c = cases()[1];  // 2 layers, bidirectional
  const QuantizedGru model = read_artifact(c.artifact);
  const SafetensorsFile committed = read_safetensors(c.golden);
  const Tensor& q_x = committed.tensors.at("input.q_x");
  const int64_t T = q_x.shape[0], N = q_x.shape[1], C = q_x.shape[2];
  const std::vector<int64_t> time_major = values(committed.tensors, "input.q_x");
  std::vector<int32_t> batch_major(time_major.size());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) {
      for (int64_t k = 0; k < C; ++k) {
        batch_major[static_cast<size_t>((n * T + t) * C + k)] = static_cast<int32_t>(time_major[static_cast<size_t>((t * N + n) * C + k)]);
      }
    }
  }
  // h0 = 0.25 everywhere: its code in each cell's h space.
  const int64_t LD = static_cast<int64_t>(model.cells.size());
  const std::vector<float> h0(static_cast<size_t>(LD * N * model.hidden_size), 0.25f);
  const fs::path dir = fs::temp_directory_path() / ("qgru_golden_files_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_npy((dir / "x.npy").string(), Tensor::from_vector({N, T, C}, batch_major));
  write_npy((dir / "h0.npy").string(), Tensor::from_vector({LD, N, static_cast<int64_t>(model.hidden_size)}, h0));
  const std::string out = (dir / "g.safetensors").string();
  dump_as_qgru_run(out, c.artifact, (dir / "x.npy").string(), (dir / "h0.npy").string(), "", true);
  const SafetensorsFile file = read_safetensors(out);
  fs::remove_all(dir);
  CHECK(file.tensors.at("input.q_x").shape == q_x.shape);
  CHECK(values(file.tensors, "input.q_x") == time_major);
  const std::vector<int64_t> q_h0 = values(file.tensors, "input.q_h0");
  for (int64_t cell = 0; cell < LD; ++cell) {
    const int32_t code = model.cells[static_cast<size_t>(cell)].q(GruTensor::h).quantize(0.25);
    for (int64_t i = 0; i < N * model.hidden_size; ++i) REQUIRE(q_h0[static_cast<size_t>(cell * N * model.hidden_size + i)] == code);
  }
  // A different h0 than the committed file's zero state changes the states.
  CHECK(values(file.tensors, "output.q_h_n") != values(committed.tensors, "output.q_h_n"));
  CHECK(file.metadata.at("artifact_sha256") == sha256_file_hex(c.artifact));
}

TEST_CASE("qgru run's dump starts from h0 codes as given, and a run's h_n codes continue it where it stopped") {
  const GoldenCase& c = cases()[1];  // 2 layers, bidirectional: every cell its own h space
  const QuantizedGru model = read_artifact(c.artifact);
  const SafetensorsFile committed = read_safetensors(c.golden);
  const Tensor& q_x = committed.tensors.at("input.q_x");
  const int64_t N = q_x.shape[1], H = model.hidden_size, LD = static_cast<int64_t>(model.cells.size());
  // The committed file's final state, as an int16 array of codes (any integer dtype is read).
  const std::vector<int64_t> h_n = values(committed.tensors, "output.q_h_n");
  const std::vector<int16_t> h_n16(h_n.begin(), h_n.end());
  const fs::path dir = fs::temp_directory_path() / ("qgru_golden_codes_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  write_npy((dir / "x.npy").string(), Tensor::from_vector(q_x.shape, values(committed.tensors, "input.q_x")));
  write_npy((dir / "h0_codes.npy").string(), Tensor::from_vector({LD, N, H}, h_n16));
  const std::string out = (dir / "g.safetensors").string();
  dump_as_qgru_run(out, c.artifact, (dir / "x.npy").string(), "", (dir / "h0_codes.npy").string(), false);
  const SafetensorsFile file = read_safetensors(out);
  CHECK(values(file.tensors, "input.q_h0") == h_n);
  // Forward cells start their first step (t = 0) from the given codes.
  const std::vector<int64_t> h_prev = values(file.tensors, "l0.d0.q_h_prev");
  CHECK(std::vector<int64_t>(h_prev.begin(), h_prev.begin() + N * H) ==
        std::vector<int64_t>(h_n.begin(), h_n.begin() + N * H));
  // Both float h0 and h0 codes: a usage error, nothing written.
  write_npy((dir / "h0.npy").string(), Tensor::from_vector({LD, N, H}, std::vector<float>(static_cast<size_t>(LD * N * H), 0.0f)));
  CHECK_THROWS_AS(dump_as_qgru_run((dir / "both.safetensors").string(), c.artifact, (dir / "x.npy").string(),
                                                 (dir / "h0.npy").string(), (dir / "h0_codes.npy").string(), false),
                  UsageError);
  CHECK_FALSE(fs::exists(dir / "both.safetensors"));
  // A code outside a cell's h range is refused, naming the file and the element.
  std::vector<int16_t> bad = h_n16;
  const TensorQuant& h_last = model.cells.back().q(GruTensor::h);
  bad[static_cast<size_t>((LD - 1) * N * H + H + 2)] = static_cast<int16_t>(h_last.qmax() + 1);
  write_npy((dir / "bad.npy").string(), Tensor::from_vector({LD, N, H}, bad));
  try {
    dump_as_qgru_run((dir / "bad.safetensors").string(), c.artifact, (dir / "x.npy").string(), "",
                                   (dir / "bad.npy").string(), false);
    FAIL("an h0 code outside its cell's range was accepted");
  } catch (const Error& e) {
    const std::string message = e.what();
    CHECK(message.find("bad.npy") != std::string::npos);
    CHECK(message.find("[" + std::to_string(LD - 1) + ", 1, 2]") != std::string::npos);
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace qgru
