#pragma once
// The options that pick a float GRU inside a model file, shared by every subcommand that reads one
// (calibrate, quantize, run, verify): --prefix for a full PyTorch state dict holding several GRUs, --node for
// an ONNX graph holding several GRU stacks.
#include <CLI/CLI.hpp>

#include <string>

namespace qgru::cli {

inline void add_model_selection_options(CLI::App& command, std::string& prefix, std::string& node) {
  command.add_option("--prefix", prefix,
                     "safetensors: the name prefix of the GRU to read when the state dict holds several "
                     "(e.g. encoder.rnn)");
  command.add_option("--node", node,
                     "ONNX: the GRU node the layer stack starts at when the graph holds several stacks "
                     "('qgru inspect model.onnx' lists them)");
}

}  // namespace qgru::cli
