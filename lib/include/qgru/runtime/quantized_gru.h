#pragma once
// A quantized GRU model: the config it was made with, its shapes and the parameters of every cell.
// This is what `quantize` produces, what the artifact stores (qgru/runtime/artifact.h) and what both
// executors run. Cell (layer l, direction d) is cells[l * num_directions + d]; the x space of every cell of
// one layer is the same (its range is the union over the directions), so layer l's output codes are
// requantized once into layer l+1's x space.
#include <string>
#include <vector>

#include "qgru/runtime/bitwidth_config.h"
#include "qgru/runtime/cell_quant_params.h"

namespace qgru {

// Where an artifact came from (stored in its JSON, never used for arithmetic).
struct QuantProvenance {
  std::string model_path, model_sha256;
  std::string stats_path, stats_sha256;
  std::string config_source, config_sha256;  // a preset name or a path; sha256 of the JSON text
  std::string tool_version;                  // QGRU_VERSION_STRING of the writer
};

struct QuantizedGru {
  BitwidthConfig config;
  int input_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_directions = 1;
  std::vector<GruCellQuantParams> cells;  // layer * num_directions + direction
  QuantProvenance provenance;

  const GruCellQuantParams& cell(int layer, int direction) const {
    return cells.at(static_cast<size_t>(layer * num_directions + direction));
  }
  GruCellQuantParams& cell(int layer, int direction) {
    return cells.at(static_cast<size_t>(layer * num_directions + direction));
  }
  // x's quantization of layer 0 (the model's input space) and h's of the last layer per direction.
  const TensorQuant& input_quant() const { return cell(0, 0).q(GruTensor::x); }
  // The cell variant of the model (every cell has the same; GruCellQuantParams::linear_before_reset).
  bool linear_before_reset() const { return cells.empty() || cells.front().linear_before_reset; }
};

// True when every GEMM operand (q_W, q_x, q_R, q_h of every cell) fits int8 codes [-128, 127], i.e. a
// CUDA int8 GEMM (cublasGemmEx, int32 accumulation) can compute every GEMM.
bool gemm_operands_fit_int8(const QuantizedGru& model);

}  // namespace qgru
