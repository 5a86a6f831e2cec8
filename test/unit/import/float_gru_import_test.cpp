// Importing PyTorch and haste layouts: gate reordering, transposition, prefixes, dtypes, and every refusal
// with its message.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "pytorch_reference.h"
#include "qgru/half.h"
#include "qgru/model/float_gru.h"
#include "qgru/import/load_float_gru.h"

using qgru::Tensor;
using qgru::WeightLayout;
using qgru_test::GruShape;

namespace {

using TensorMap = std::map<std::string, Tensor>;

// PyTorch [3H, K] rows r, z, n  ->  haste [K, 3H] columns z, r, n (what haste's importers write).
Tensor pytorch_to_haste_matrix(const Tensor& pt, int64_t H) {
  const auto values = qgru::tensor_to_f32(pt);
  const int64_t K = pt.shape[1];
  std::vector<float> out(values.size());
  const int64_t pt_gate_of[3] = {1, 0, 2};  // haste gate z is PyTorch's gate 1, r is 0, n is 2
  for (int64_t gate = 0; gate < 3; ++gate) {
    for (int64_t j = 0; j < H; ++j) {
      for (int64_t k = 0; k < K; ++k) {
        out[static_cast<size_t>(k * 3 * H + gate * H + j)] = values[static_cast<size_t>((pt_gate_of[gate] * H + j) * K + k)];
      }
    }
  }
  return Tensor::from_vector<float>({K, 3 * H}, out);
}

Tensor pytorch_to_haste_bias(const Tensor& pt, int64_t H) {
  const auto values = qgru::tensor_to_f32(pt);
  std::vector<float> out(values.size());
  const int64_t pt_gate_of[3] = {1, 0, 2};
  for (int64_t gate = 0; gate < 3; ++gate) {
    for (int64_t j = 0; j < H; ++j) out[static_cast<size_t>(gate * H + j)] = values[static_cast<size_t>(pt_gate_of[gate] * H + j)];
  }
  return Tensor::from_vector<float>({3 * H}, out);
}

Tensor with_shape(std::vector<int64_t> shape, float value = 0.1f) {
  return Tensor::from_vector<float>(shape, std::vector<float>(static_cast<size_t>(qgru::shape_numel(shape)), value));
}

std::string import_error(const TensorMap& tensors, WeightLayout layout = WeightLayout::Auto) {
  try {
    qgru::float_gru_from_tensors(tensors, layout, "m.safetensors");
  } catch (const qgru::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("PyTorch gates r, z, n land in qgru rows z, r, n") {
  // H = 2, C = 1: weight_ih rows hold their own PyTorch row index so the permutation is visible.
  TensorMap sd;
  sd["weight_ih_l0"] = Tensor::from_vector<float>({6, 1}, {0, 1, 2, 3, 4, 5});
  sd["weight_hh_l0"] = Tensor::from_vector<float>({6, 2}, {0, 0.5f, 1, 1.5f, 2, 2.5f, 3, 3.5f, 4, 4.5f, 5, 5.5f});
  sd["bias_ih_l0"] = Tensor::from_vector<float>({6}, {10, 11, 12, 13, 14, 15});
  sd["bias_hh_l0"] = Tensor::from_vector<float>({6}, {20, 21, 22, 23, 24, 25});
  const auto model = qgru::float_gru_from_tensors(sd, WeightLayout::Auto, "memory");
  CHECK(model.source_layout == "pytorch");
  CHECK(model.input_size == 1);
  CHECK(model.hidden_size == 2);
  CHECK(model.num_layers == 1);
  CHECK(model.num_directions == 1);
  const auto& cell = model.cell(0, 0);
  CHECK(cell.W == std::vector<float>{2, 3, 0, 1, 4, 5});
  CHECK(cell.R == std::vector<float>{2, 2.5f, 3, 3.5f, 0, 0.5f, 1, 1.5f, 4, 4.5f, 5, 5.5f});
  CHECK(cell.bw == std::vector<float>{12, 13, 10, 11, 14, 15});
  CHECK(cell.br == std::vector<float>{22, 23, 20, 21, 24, 25});
}

TEST_CASE("haste layout W [C, 3H] is transposed and equals the PyTorch import of the same GRU") {
  for (int L : {1, 2}) {
    for (int D : {1, 2}) {
      const GruShape shape{3, 4, L, D};
      const auto sd = qgru_test::random_pytorch_gru(shape, 50u + static_cast<unsigned>(L * 2 + D));
      TensorMap haste;
      const bool single = L == 1 && D == 1;
      for (int layer = 0; layer < L; ++layer) {
        for (int d = 0; d < D; ++d) {
          const std::string suffix = (single ? std::string() : "_l" + std::to_string(layer)) + (d ? "_reverse" : "");
          haste["rnn.W" + suffix] = pytorch_to_haste_matrix(sd.at(qgru_test::pt_name("", "weight_ih", layer, d)), 4);
          haste["rnn.R" + suffix] = pytorch_to_haste_matrix(sd.at(qgru_test::pt_name("", "weight_hh", layer, d)), 4);
          haste["rnn.bx" + suffix] = pytorch_to_haste_bias(sd.at(qgru_test::pt_name("", "bias_ih", layer, d)), 4);
          haste["rnn.br" + suffix] = pytorch_to_haste_bias(sd.at(qgru_test::pt_name("", "bias_hh", layer, d)), 4);
        }
      }
      haste["head.weight"] = with_shape({10, 4});
      const auto from_pytorch = qgru::float_gru_from_tensors(sd, WeightLayout::Auto, "pt");
      const auto from_haste = qgru::float_gru_from_tensors(haste, WeightLayout::Auto, "haste");
      CAPTURE(L);
      CAPTURE(D);
      CHECK(from_haste.source_layout == "haste");
      REQUIRE(from_haste.num_layers == L);
      REQUIRE(from_haste.num_directions == D);
      REQUIRE(from_haste.cells.size() == from_pytorch.cells.size());
      for (size_t i = 0; i < from_haste.cells.size(); ++i) {
        CHECK(from_haste.cells[i].input_size == from_pytorch.cells[i].input_size);
        CHECK(from_haste.cells[i].W == from_pytorch.cells[i].W);
        CHECK(from_haste.cells[i].R == from_pytorch.cells[i].R);
        CHECK(from_haste.cells[i].bw == from_pytorch.cells[i].bw);
        CHECK(from_haste.cells[i].br == from_pytorch.cells[i].br);
      }
    }
  }
}

TEST_CASE("haste_pytorch module names (kernel, recurrent_kernel, bias, recurrent_bias) read as haste") {
  const auto sd = qgru_test::random_pytorch_gru({3, 4, 1, 1}, 58);
  TensorMap module;
  module["gru.kernel"] = pytorch_to_haste_matrix(sd.at("weight_ih_l0"), 4);
  module["gru.recurrent_kernel"] = pytorch_to_haste_matrix(sd.at("weight_hh_l0"), 4);
  module["gru.bias"] = pytorch_to_haste_bias(sd.at("bias_ih_l0"), 4);
  module["gru.recurrent_bias"] = pytorch_to_haste_bias(sd.at("bias_hh_l0"), 4);
  module["head.weight"] = with_shape({10, 4});
  module["head.bias"] = with_shape({10});
  const auto from_module = qgru::float_gru_from_tensors(module, WeightLayout::Auto, "memory");
  const auto from_pytorch = qgru::float_gru_from_tensors(sd, WeightLayout::Auto, "memory");
  CHECK(from_module.source_layout == "haste");
  CHECK(from_module.cell(0, 0).W == from_pytorch.cell(0, 0).W);
  CHECK(from_module.cell(0, 0).R == from_pytorch.cell(0, 0).R);
  CHECK(from_module.cell(0, 0).bw == from_pytorch.cell(0, 0).bw);
  CHECK(from_module.cell(0, 0).br == from_pytorch.cell(0, 0).br);
  module.erase("gru.recurrent_kernel");
  CHECK(import_error(module) == "m.safetensors: tensor 'gru.recurrent_kernel' missing (the model has 1 layer(s))");
  module["gru.R"] = pytorch_to_haste_matrix(sd.at("weight_hh_l0"), 4);
  module["gru.W"] = pytorch_to_haste_matrix(sd.at("weight_ih_l0"), 4);
  CHECK(import_error(module) == "m.safetensors: tensors 'gru.W' and 'gru.kernel' name the same GRU parameter");
}

TEST_CASE("a common prefix is found, other tensors are ignored, missing biases are zeros") {
  auto sd = qgru_test::random_pytorch_gru({3, 5, 2, 1}, 60, "encoder.rnn.", false);
  sd["head.weight"] = with_shape({10, 5});
  sd["head.bias"] = with_shape({10});
  const auto model = qgru::float_gru_from_tensors(sd, WeightLayout::Auto, "memory");
  CHECK(model.num_layers == 2);
  CHECK(model.input_size == 3);
  CHECK(model.hidden_size == 5);
  for (const auto& cell : model.cells) {
    CHECK(cell.bw == std::vector<float>(15, 0.0f));
    CHECK(cell.br == std::vector<float>(15, 0.0f));
  }
  CHECK(model.cell(1, 0).input_size == 5);
}

TEST_CASE("nn.GRUCell names (no _l0 suffix) are one layer, one direction") {
  const auto sd = qgru_test::random_pytorch_gru({3, 4, 1, 1}, 65);
  TensorMap cell;
  for (const auto& [name, tensor] : sd) cell["decoder.cell." + name.substr(0, name.size() - 3)] = tensor;
  REQUIRE(cell.count("decoder.cell.weight_ih") == 1);
  const auto from_cell = qgru::float_gru_from_tensors(cell, WeightLayout::Auto, "memory");
  const auto from_gru = qgru::float_gru_from_tensors(sd, WeightLayout::Auto, "memory");
  CHECK(from_cell.num_layers == 1);
  CHECK(from_cell.num_directions == 1);
  CHECK(from_cell.cell(0, 0).W == from_gru.cell(0, 0).W);
  CHECK(from_cell.cell(0, 0).R == from_gru.cell(0, 0).R);
  CHECK(from_cell.cell(0, 0).bw == from_gru.cell(0, 0).bw);
  CHECK(from_cell.cell(0, 0).br == from_gru.cell(0, 0).br);
  cell.erase("decoder.cell.weight_hh");
  CHECK(import_error(cell) == "m.safetensors: tensor 'decoder.cell.weight_hh' missing (the model has 1 layer(s))");
  TensorMap both = sd;
  both["weight_ih"] = sd.at("weight_ih_l0");
  CHECK(import_error(both) == "m.safetensors: tensors 'weight_ih' and 'weight_ih_l0' name the same GRU parameter");
}

TEST_CASE("F16, BF16 and F64 weights convert exactly to float") {
  const auto sd = qgru_test::random_pytorch_gru({2, 3, 1, 1}, 70);
  const auto reference = qgru::float_gru_from_tensors(sd, WeightLayout::Auto, "memory");
  TensorMap f64, f16, bf16;
  std::map<std::string, std::vector<float>> rounded16, rounded_bf16;
  for (const auto& [name, tensor] : sd) {
    const auto values = qgru::tensor_to_f32(tensor);
    std::vector<double> as_double(values.begin(), values.end());
    f64[name] = Tensor::from_vector<double>(tensor.shape, as_double);
    Tensor h, b;
    h.dtype = qgru::DType::F16;
    b.dtype = qgru::DType::BF16;
    h.shape = b.shape = tensor.shape;
    h.bytes.resize(values.size() * 2);
    b.bytes.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t hb = qgru::float_to_half_bits(values[i]);
      const uint16_t bb = qgru::float_to_bf16_bits(values[i]);
      std::memcpy(h.bytes.data() + 2 * i, &hb, 2);
      std::memcpy(b.bytes.data() + 2 * i, &bb, 2);
    }
    f16[name] = h;
    bf16[name] = b;
  }
  const auto from_f64 = qgru::float_gru_from_tensors(f64, WeightLayout::Auto, "f64");
  CHECK(from_f64.cell(0, 0).W == reference.cell(0, 0).W);
  CHECK(from_f64.cell(0, 0).br == reference.cell(0, 0).br);
  const auto from_f16 = qgru::float_gru_from_tensors(f16, WeightLayout::Auto, "f16");
  const auto from_bf16 = qgru::float_gru_from_tensors(bf16, WeightLayout::Auto, "bf16");
  const auto& W = reference.cell(0, 0).W;
  for (size_t i = 0; i < W.size(); ++i) {
    CHECK(from_f16.cell(0, 0).W[i] == qgru::half_bits_to_float(qgru::float_to_half_bits(W[i])));
    CHECK(from_bf16.cell(0, 0).W[i] == qgru::bf16_bits_to_float(qgru::float_to_bf16_bits(W[i])));
  }
  // Rounding to 16 bits changed something (the check above is not vacuous).
  CHECK(from_f16.cell(0, 0).W != W);
}

TEST_CASE("inconsistent shapes are refused naming the tensor, the expected and the actual shape") {
  auto sd = qgru_test::random_pytorch_gru({8, 32, 2, 1}, 80);
  sd["weight_hh_l1"] = with_shape({96, 30});
  CHECK(import_error(sd) == "m.safetensors: tensor 'weight_hh_l1': expected shape [96, 32], got [96, 30]");

  sd = qgru_test::random_pytorch_gru({8, 32, 2, 2}, 81);
  sd["weight_ih_l1_reverse"] = with_shape({96, 32});
  CHECK(import_error(sd) == "m.safetensors: tensor 'weight_ih_l1_reverse': expected shape [96, 64], got [96, 32]");

  sd = qgru_test::random_pytorch_gru({8, 32, 1, 1}, 82);
  sd["bias_hh_l0"] = with_shape({95});
  CHECK(import_error(sd) == "m.safetensors: tensor 'bias_hh_l0': expected shape [96], got [95]");

  sd = qgru_test::random_pytorch_gru({8, 32, 1, 1}, 83);
  sd["weight_hh_l0"] = with_shape({128, 32});  // an LSTM's 4H rows
  CHECK(import_error(sd) == "m.safetensors: tensor 'weight_hh_l0': expected shape [3H, H], got [128, 32]");

  sd = qgru_test::random_pytorch_gru({8, 32, 1, 1}, 84);
  sd["weight_ih_l0"] = with_shape({96, 8, 1});
  CHECK(import_error(sd) == "m.safetensors: tensor 'weight_ih_l0': expected shape [96, C], got [96, 8, 1]");

  TensorMap haste;
  haste["W"] = with_shape({8, 96});
  haste["R"] = with_shape({32, 96});
  haste["bx"] = with_shape({96});
  haste["br"] = with_shape({3, 32});
  CHECK(import_error(haste) == "m.safetensors: tensor 'br': expected shape [96], got [3, 32]");
  haste["br"] = with_shape({96});
  haste["W"] = with_shape({96, 8});
  CHECK(import_error(haste) == "m.safetensors: tensor 'W': expected shape [C, 96], got [96, 8]");
}

TEST_CASE("missing layers and mixed directions are refused") {
  auto sd = qgru_test::random_pytorch_gru({4, 3, 3, 1}, 90);
  sd.erase("weight_hh_l1");
  CHECK(import_error(sd) == "m.safetensors: tensor 'weight_hh_l1' missing (the model has 3 layer(s))");

  sd = qgru_test::random_pytorch_gru({4, 3, 3, 1}, 91);
  sd.erase("weight_ih_l1");
  sd.erase("weight_hh_l1");
  sd.erase("bias_ih_l1");
  sd.erase("bias_hh_l1");
  CHECK(import_error(sd) == "m.safetensors: tensor 'weight_ih_l1' missing (the model has 3 layer(s))");

  sd = qgru_test::random_pytorch_gru({4, 3, 2, 2}, 92);
  sd.erase("weight_ih_l1_reverse");
  sd.erase("weight_hh_l1_reverse");
  sd.erase("bias_ih_l1_reverse");
  sd.erase("bias_hh_l1_reverse");
  CHECK(import_error(sd) ==
        "m.safetensors: tensor 'weight_ih_l1_reverse' missing (other tensors are bidirectional (_reverse): mixed "
        "directions)");

  sd = qgru_test::random_pytorch_gru({4, 3, 1, 1}, 93);
  sd["bias_ih_l1"] = with_shape({9});
  CHECK(import_error(sd) ==
        "m.safetensors: tensor 'bias_ih_l1' has no weights of its layer and direction (weight_ih_l1 missing)");
}

TEST_CASE("NaN, infinite and integer weights are refused") {
  auto sd = qgru_test::random_pytorch_gru({2, 2, 1, 1}, 100);
  sd["weight_hh_l0"].data<float>()[5] = std::numeric_limits<float>::quiet_NaN();
  CHECK(import_error(sd) == "m.safetensors: tensor 'weight_hh_l0': element 5 is NaN; weights must be finite");
  sd = qgru_test::random_pytorch_gru({2, 2, 1, 1}, 101);
  sd["bias_ih_l0"].data<float>()[0] = -std::numeric_limits<float>::infinity();
  CHECK(import_error(sd) == "m.safetensors: tensor 'bias_ih_l0': element 0 is infinite; weights must be finite");
  sd = qgru_test::random_pytorch_gru({2, 2, 1, 1}, 102);
  sd["weight_ih_l0"] = Tensor::from_vector<int32_t>({6, 2}, std::vector<int32_t>(12, 1));
  CHECK(import_error(sd) ==
        "m.safetensors: tensor 'weight_ih_l0': expected a float dtype (F32, F64, F16, BF16), got I32");
  sd = qgru_test::random_pytorch_gru({2, 2, 1, 1}, 103);
  sd["weight_ih_l0"] = Tensor::from_vector<double>({6, 2}, std::vector<double>(12, 1e300));
  CHECK(import_error(sd) == "m.safetensors: tensor 'weight_ih_l0': element 0 is infinite; weights must be finite");
}

TEST_CASE("layout detection refuses files with no GRU, two GRUs or both layouts") {
  TensorMap none;
  none["head.weight"] = with_shape({10, 4});
  CHECK(import_error(none).rfind("m.safetensors: no GRU tensors found", 0) == 0);
  CHECK(import_error(none, WeightLayout::Haste).rfind("m.safetensors: no haste GRU tensors found", 0) == 0);

  auto two = qgru_test::random_pytorch_gru({2, 2, 1, 1}, 110, "a.");
  for (auto& [name, tensor] : qgru_test::random_pytorch_gru({2, 2, 1, 1}, 111, "b.")) two[name] = tensor;
  CHECK(import_error(two) ==
        "m.safetensors: GRU tensors under several prefixes ('a.', 'b.'); pick one with --prefix");

  auto both = qgru_test::random_pytorch_gru({2, 2, 1, 1}, 112);
  both["W"] = with_shape({2, 6});
  both["R"] = with_shape({2, 6});
  CHECK(import_error(both).rfind("m.safetensors: both PyTorch", 0) == 0);
  // An explicit layout picks one and ignores the other's tensors.
  CHECK(qgru::float_gru_from_tensors(both, WeightLayout::PyTorch, "m").source_layout == "pytorch");
  CHECK(qgru::float_gru_from_tensors(both, WeightLayout::Haste, "m").source_layout == "haste");

  TensorMap duplicate;
  duplicate["W"] = with_shape({2, 6});
  duplicate["W_l0"] = with_shape({2, 6});
  duplicate["R"] = with_shape({2, 6});
  CHECK(import_error(duplicate) == "m.safetensors: tensors 'W' and 'W_l0' name the same GRU parameter");
}

TEST_CASE("--prefix picks one GRU of a full state dict, with or without its trailing dot") {
  auto two = qgru_test::random_pytorch_gru({3, 2, 1, 1}, 120, "encoder.rnn.");
  for (auto& [name, tensor] : qgru_test::random_pytorch_gru({2, 4, 2, 2}, 121, "decoder.rnn.")) two[name] = tensor;
  two["head.weight"] = with_shape({10, 4});
  const auto dec = qgru::float_gru_from_tensors(two, WeightLayout::Auto, "m", "decoder.rnn");
  CHECK(dec.input_size == 2);
  CHECK(dec.hidden_size == 4);
  CHECK(dec.num_layers == 2);
  CHECK(dec.num_directions == 2);
  const auto enc = qgru::float_gru_from_tensors(two, WeightLayout::Auto, "m", "encoder.rnn.");
  CHECK(enc.input_size == 3);
  CHECK(enc.hidden_size == 2);
  // The same weights as the encoder's tensors alone (the seed makes them again without the prefix).
  const auto alone = qgru::float_gru_from_tensors(qgru_test::random_pytorch_gru({3, 2, 1, 1}, 120, ""), WeightLayout::Auto, "m");
  CHECK(enc.cell(0, 0).W == alone.cell(0, 0).W);
  CHECK(enc.cell(0, 0).br == alone.cell(0, 0).br);
  try {
    qgru::float_gru_from_tensors(two, WeightLayout::Auto, "m.safetensors", "encoder");
    FAIL("a prefix without a GRU was accepted");
  } catch (const qgru::Error& e) {
    CHECK(std::string(e.what()) == "m.safetensors: --prefix 'encoder' holds no PyTorch GRU; the file's GRUs are under "
                                   "'decoder.rnn.', 'encoder.rnn.'");
  }
}

TEST_CASE("parse_weight_layout accepts the three names only") {
  CHECK(qgru::parse_weight_layout("auto") == WeightLayout::Auto);
  CHECK(qgru::parse_weight_layout("pytorch") == WeightLayout::PyTorch);
  CHECK(qgru::parse_weight_layout("haste") == WeightLayout::Haste);
  CHECK_THROWS_WITH_AS(qgru::parse_weight_layout("cudnn"),
                       "weight layout 'cudnn': expected auto, pytorch or haste", qgru::Error);
}
