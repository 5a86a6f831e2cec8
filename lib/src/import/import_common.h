#pragma once
// Internal to the model area: the two steps every weight importer takes. match_layout() finds, by name,
// each cell's tensors in the file (PyTorch or haste naming); build_float_gru() checks their shapes,
// converts them to float, refuses NaN/Inf and puts them into qgru's layout (qgru/model/float_gru.h).
#include <map>
#include <string>
#include <vector>

#include "qgru/base/tensor.h"
#include "qgru/model/float_gru.h"
#include "qgru/import/load_float_gru.h"

namespace qgru::model_detail {

// The names one cell's tensors have in the file. A bias name is empty when the file has no such bias.
struct CellTensorNames {
  std::string W, R, bw, br;
};

// What a layout matcher found: the common prefix, the cells (index layer * D + direction) and their names.
// Every other tensor in the file is ignored.
struct LayoutMatch {
  WeightLayout layout = WeightLayout::PyTorch;
  std::string prefix;
  int num_layers = 0;
  int num_directions = 1;
  std::vector<CellTensorNames> cells;
};

// True when any tensor name is a weight name of the layout (automatic detection).
bool has_layout_names(const std::map<std::string, Tensor>& tensors, WeightLayout layout);

// Find every cell's tensors of `layout` (PyTorch or haste). Throws qgru::Error naming `source` when no
// tensor of the layout exists, when several prefixes hold one, or when a layer or direction is missing.
// `wanted_prefix` (non-empty) picks the GRU under that prefix when the file holds several ("enc.rnn" also
// matches "enc.rnn."); a prefix that holds no GRU is refused with the list of those that do.
LayoutMatch match_layout(const std::map<std::string, Tensor>& tensors, WeightLayout layout,
                         const std::string& source, const std::string& wanted_prefix = "");

// Check every shape (C and H come from layer 0), convert any float dtype to float, refuse NaN/Inf, reorder
// gates to z, r, n and transpose haste's [C, 3H] / [H, 3H] to [3H, C] / [3H, H].
FloatGruModel build_float_gru(const std::map<std::string, Tensor>& tensors, const LayoutMatch& match,
                              const std::string& source);

}  // namespace qgru::model_detail
