#pragma once
// Reading float GRU weights as people have them (PyTorch nn.GRU / nn.GRUCell state dicts, haste layouts) into
// qgru's internal layout (qgru/model/float_gru.h).
#include <map>
#include <string>
#include <vector>

#include "qgru/base/output_policy.h"
#include "qgru/base/tensor.h"
#include "qgru/model/float_gru.h"

namespace qgru {

enum class WeightLayout { Auto, PyTorch, Haste };

// Parse "auto" | "pytorch" | "haste"; throws qgru::Error otherwise.
WeightLayout parse_weight_layout(const std::string& text);

// Accepted names, under one optional common prefix (e.g. "encoder.rnn."; other tensors are ignored):
//   pytorch: nn.GRU weight_ih_l{k}[_reverse] [3H, C], weight_hh_l{k} [3H, H], bias_ih_l{k}, bias_hh_l{k} [3H]
//            (gates r, z, n), or nn.GRUCell weight_ih, weight_hh, bias_ih, bias_hh;
//   haste:   W [C, 3H], R [H, 3H], bx, br [3H] (gates z, r, n), W_l{k}[_reverse] ... for several layers, or
//            haste_pytorch.GRU's kernel, recurrent_kernel, bias, recurrent_bias (the prefix ends with '.').
// Biases are optional (zeros). Auto detection refuses a file holding names of both layouts.
// Build a model from named tensors (as read from a safetensors file). `source` names the file in errors.
// Inconsistent shapes are refused with a message naming the tensor, its shape and the expected shape.
// `prefix` (--prefix) picks one GRU of a state dict holding several (a full model's: "encoder.rnn." or
// "encoder.rnn"); empty: the file must hold one. A missing bias is logged (info) and read as zeros.
FloatGruModel float_gru_from_tensors(const std::map<std::string, Tensor>& tensors, WeightLayout layout,
                                     const std::string& source, const std::string& prefix = "");

// Where a float model comes from, as the CLI's --model / --layout / --prefix / --node give it.
struct FloatModelSource {
  std::string path;                          // .safetensors or .onnx: recognised by the first bytes
  WeightLayout layout = WeightLayout::Auto;  // safetensors only
  std::string prefix;                        // safetensors only: the GRU's name prefix in a full state dict
  std::string node;                          // ONNX only: the GRU node a layer stack starts at
};

// Read the file and build the model. Files that are neither safetensors nor ONNX are refused with one line
// saying what they are and what to do (qgru/import/model_file_kind.h).
FloatGruModel load_float_gru(const FloatModelSource& source);
FloatGruModel load_float_gru(const std::string& path, WeightLayout layout = WeightLayout::Auto);

// A float model read by a command, as inputs to the output policy (qgru/base/output_policy.h): the file, and for
// an ONNX model every external data file its tensors name (`flag` + " (its external data)"), so that no output
// can replace weights stored beside the graph.
void add_model_input(std::vector<CommandFile>& inputs, const std::string& flag, const std::string& model_path);

}  // namespace qgru
