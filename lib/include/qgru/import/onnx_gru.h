#pragma once
// ONNX GRU import (the ai.onnx GRU operator, opsets 7 .. 22), read with the ONNX project's own protobuf
// classes (libonnx-dev's onnx_proto over libprotobuf): no hand-written protobuf parsing.
//
// What is read, per GRU node: W [D, 3H, C], R [D, 3H, H] and B [D, 6H] (Wb then Rb) from initializers or
// Constant nodes, stored inline or in external data files beside the model; the ONNX gate order z, r, h is
// qgru's z, r, n (qgru/gru_tensors.h), so rows are taken as they are; direction forward or bidirectional;
// hidden_size; linear_before_reset (1: PyTorch's cell, 0: the ONNX default and Keras reset_after=False, see
// FloatGruModel::linear_before_reset). A layer stack is a chain of GRU nodes: layer l's Y [T, D, N, H] feeds
// layer l+1's X through layout ops (Identity, Squeeze, Unsqueeze, Transpose, Reshape, Flatten) whose composed
// effect is X = [T, N, D·H], directions concatenated (qgru/import/onnx_layer_link.h): exporters write
// Squeeze(axis 1) for one direction and Transpose(0, 2, 1, 3) + Reshape([T, N, 2H]) for two, and any other
// spelling with that effect is the same stack.
// What is refused, with the node's name: clip, activations other than Sigmoid, Tanh, direction "reverse"
// alone, a weight computed by other nodes (export with constant folding), a constant non-zero initial_h
// (qgru's h0 comes from --h0), external data outside the model's folder, sizes that disagree.
// sequence_lens and initial_h fed by the graph's inputs are the caller's --lengths and --h0 (logged).
#include <cstdint>
#include <string>
#include <vector>

#include "qgru/model/float_gru.h"

namespace qgru {

// One GRU node of a graph, as `qgru inspect` lists it.
struct OnnxGruNodeInfo {
  std::string name;             // the node's name, or "GRU#<k>" (k-th GRU node) when it has none
  int input_size = 0;           // C (0 when W is not readable)
  int hidden_size = 0;          // H
  std::string direction;        // forward, reverse, bidirectional
  int linear_before_reset = 0;
  std::vector<std::string> activations;  // as written (empty: the defaults Sigmoid, Tanh)
  bool has_clip = false;
  float clip = 0.0f;
  int layout = 0;               // 1: X and Y are batch-first
  bool has_bias = false;
  std::string sequence_lens;    // the value's name, empty when not connected
  std::string initial_h;
  std::string problem;          // why qgru cannot import this node; empty when it can
  std::string link_problem;     // why its output, going on into layout ops or a GRU, is no next layer's X
                                // (the op that breaks the chain); empty when it is, or the output ends there
  int stack = -1;               // index into OnnxGraphGrus::stacks
  int layer = 0;                // position in its stack
};

struct OnnxGraphGrus {
  std::string source;
  std::vector<OnnxGruNodeInfo> nodes;   // in graph order
  std::vector<std::vector<int>> stacks; // chains of node indices (first = layer 0)
  std::vector<std::string> other_recurrent_ops;  // LSTM, RNN, Loop, Scan nodes (named in "no GRU" errors)
};

// Parse a model (bytes of a ModelProto). `model_dir` is where external data files are looked up; empty:
// external data is refused (fuzzing). Throws qgru::Error naming `source` for anything malformed.
OnnxGraphGrus inspect_onnx_gru_bytes(const uint8_t* data, size_t size, const std::string& source,
                                     const std::string& model_dir);
OnnxGraphGrus inspect_onnx_grus(const std::string& path);

// The float model of one stack: the one stack of the graph, or the one starting at node `node` (its name as
// inspect lists it). Several stacks and no node: refused, listing them.
FloatGruModel onnx_gru_from_bytes(const uint8_t* data, size_t size, const std::string& source,
                                  const std::string& model_dir, const std::string& node);
FloatGruModel load_onnx_gru(const std::string& path, const std::string& node);

// The external data files the tensors of the ONNX model at `path` name (resolved against the model's folder,
// each once), so that no output of a command can replace one (qgru/base/output_policy.h). Empty for a file
// that is not an ONNX model or does not parse: its reader reports that.
std::vector<std::string> onnx_external_data_files(const std::string& path);

// One line per GRU node for people: name, C, H, direction, linear_before_reset, activations, stack, and why
// its output does not chain into the GRU it reaches, when it does not.
std::string describe_onnx_grus(const OnnxGraphGrus& grus);

}  // namespace qgru
