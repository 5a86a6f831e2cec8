// From matched tensors to a FloatGruModel: shape checks, dtype conversion, finiteness, gate order.
#include <cmath>
#include <string>
#include <vector>

#include "import_common.h"
#include "qgru/import/load_float_gru.h"

namespace qgru::model_detail {
namespace {

std::string quoted(const std::string& name) { return "'" + name + "'"; }

// Values of a float tensor as float; integer dtypes, NaN and Inf are refused.
std::vector<float> float_values(const Tensor& tensor, const std::string& name, const std::string& source) {
  if (tensor.dtype != DType::F32 && tensor.dtype != DType::F64 && tensor.dtype != DType::F16 &&
      tensor.dtype != DType::BF16) {
    throw Error(source + ": tensor " + quoted(name) + ": expected a float dtype (F32, F64, F16, BF16), got " +
                dtype_name(tensor.dtype));
  }
  std::vector<float> values = tensor_to_f32(tensor);
  require_finite(values, source + ": tensor " + quoted(name) + ": ", "; weights must be finite");
  // F64 weights beyond float's range become infinite on conversion: refused above, as for any overflow.
  return values;
}

void expect_shape(const Tensor& tensor, const std::vector<int64_t>& expected, const std::string& name,
                  const std::string& source) {
  if (tensor.shape != expected) {
    throw Error(source + ": tensor " + quoted(name) + ": expected shape " + shape_string(expected) + ", got " +
                shape_string(tensor.shape));
  }
}

// The weight shapes of this layout for a cell with input size C and hidden size H.
std::vector<int64_t> W_shape(WeightLayout layout, int64_t C, int64_t H) {
  return layout == WeightLayout::Haste ? std::vector<int64_t>{C, 3 * H} : std::vector<int64_t>{3 * H, C};
}

// Source row of qgru gate row `row` (z, r, n order): PyTorch stores r, z, n; haste stores z, r, n.
int64_t source_row(WeightLayout layout, int64_t row, int64_t H) {
  if (layout == WeightLayout::Haste) return row;
  const int64_t gate = row / H;
  const int64_t source_gate = gate == 0 ? 1 : gate == 1 ? 0 : 2;  // z <- PyTorch's 1, r <- PyTorch's 0
  return source_gate * H + row % H;
}

// A [3H, K] matrix in qgru's layout from the file's matrix (PyTorch [3H, K] r,z,n; haste [K, 3H] z,r,n).
std::vector<float> to_gate_rows(const std::vector<float>& values, WeightLayout layout, int64_t H, int64_t K) {
  std::vector<float> out(static_cast<size_t>(3 * H * K));
  for (int64_t row = 0; row < 3 * H; ++row) {
    const int64_t from = source_row(layout, row, H);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t index = layout == WeightLayout::Haste ? k * 3 * H + from : from * K + k;
      out[static_cast<size_t>(row * K + k)] = values[static_cast<size_t>(index)];
    }
  }
  return out;
}

std::vector<float> to_gate_bias(const std::vector<float>& values, WeightLayout layout, int64_t H) {
  return to_gate_rows(values, layout, H, 1);  // a [3H] vector is a [3H, 1] matrix in either layout
}

const Tensor& tensor_named(const std::map<std::string, Tensor>& tensors, const std::string& name) {
  return tensors.at(name);  // the matcher found every name it returns
}

}  // namespace

FloatGruModel build_float_gru(const std::map<std::string, Tensor>& tensors, const LayoutMatch& match,
                              const std::string& source) {
  const WeightLayout layout = match.layout;
  const bool haste = layout == WeightLayout::Haste;
  const CellTensorNames& first = match.cells.at(0);

  // H from layer 0's recurrent matrix ([3H, H] or haste's [H, 3H]), C from its input matrix.
  const Tensor& R0 = tensor_named(tensors, first.R);
  const int64_t R_rows = R0.rank() == 2 ? R0.shape[0] : 0;
  const int64_t R_cols = R0.rank() == 2 ? R0.shape[1] : 0;
  const int64_t H = haste ? R_rows : R_cols;
  if (R0.rank() != 2 || H < 1 || (haste ? R_cols : R_rows) != 3 * H) {
    throw Error(source + ": tensor " + quoted(first.R) + ": expected shape " +
                (haste ? "[H, 3H]" : "[3H, H]") + ", got " + shape_string(R0.shape));
  }
  const Tensor& W0 = tensor_named(tensors, first.W);
  const int64_t C = W0.rank() == 2 ? W0.shape[haste ? 0 : 1] : 0;
  if (W0.rank() != 2 || C < 1 || W0.shape[haste ? 1 : 0] != 3 * H) {
    throw Error(source + ": tensor " + quoted(first.W) + ": expected shape " +
                (haste ? "[C, " + std::to_string(3 * H) + "]" : "[" + std::to_string(3 * H) + ", C]") +
                ", got " + shape_string(W0.shape));
  }
  if (H > (1 << 24) || C > (1 << 24)) {
    throw Error(source + ": GRU sizes C = " + std::to_string(C) + ", H = " + std::to_string(H) + " are too large");
  }

  FloatGruModel model;
  model.input_size = static_cast<int>(C);
  model.hidden_size = static_cast<int>(H);
  model.num_layers = match.num_layers;
  model.num_directions = match.num_directions;
  model.source_layout = haste ? "haste" : "pytorch";
  for (int layer = 0; layer < match.num_layers; ++layer) {
    const int64_t C_layer = layer == 0 ? C : match.num_directions * H;
    for (int direction = 0; direction < match.num_directions; ++direction) {
      const CellTensorNames& names = match.cells.at(static_cast<size_t>(layer * match.num_directions + direction));
      const Tensor& W = tensor_named(tensors, names.W);
      const Tensor& R = tensor_named(tensors, names.R);
      expect_shape(W, W_shape(layout, C_layer, H), names.W, source);
      expect_shape(R, W_shape(layout, H, H), names.R, source);
      GruCellWeights cell;
      cell.input_size = static_cast<int>(C_layer);
      cell.hidden_size = static_cast<int>(H);
      cell.W = to_gate_rows(float_values(W, names.W, source), layout, H, C_layer);
      cell.R = to_gate_rows(float_values(R, names.R, source), layout, H, H);
      cell.bw.assign(static_cast<size_t>(3 * H), 0.0f);
      cell.br.assign(static_cast<size_t>(3 * H), 0.0f);
      if (!names.bw.empty()) {
        const Tensor& bw = tensor_named(tensors, names.bw);
        expect_shape(bw, {3 * H}, names.bw, source);
        cell.bw = to_gate_bias(float_values(bw, names.bw, source), layout, H);
      }
      if (!names.br.empty()) {
        const Tensor& br = tensor_named(tensors, names.br);
        expect_shape(br, {3 * H}, names.br, source);
        cell.br = to_gate_bias(float_values(br, names.br, source), layout, H);
      }
      model.cells.push_back(std::move(cell));
    }
  }
  return model;
}

}  // namespace qgru::model_detail
