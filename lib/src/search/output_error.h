#pragma once
// The range search's score: the squared error of a quantized model's output against the float model's on
// fixed held-in sequences. The float outputs are computed once; every evaluation quantizes the float model
// with the given ranges (quantize_gru, overflow proof included) and runs the fast integer executor.
#include <string>
#include <vector>

#include "qgru/io/sequence_io.h"
#include "qgru/model/float_gru.h"
#include "qgru/runtime/bitwidth_config.h"
#include "qgru/runtime/cell_quant_params.h"

namespace qgru::search {

struct OutputError {
  double sum_sq_error = 0;  // Σ (y_int − y_float)², over every output value of every held-in sequence
  std::string refused;      // quantize's reason when it refuses the ranges (sum_sq_error is then +inf)
  bool accepted() const { return refused.empty(); }
};

class OutputErrorScorer {
 public:
  // held_in: batches [T, N, C]; the float model runs on each once here.
  OutputErrorScorer(const FloatGruModel& model, std::vector<SequenceBatch> held_in, int threads);

  // ranges: per cell (layer * D + direction); x must be equal across the directions of a layer.
  OutputError evaluate(const BitwidthConfig& config, const std::vector<CellRanges>& ranges) const;
  // 10·log10(Σ y_float² / error); +inf for no error.
  double sqnr_db(double sum_sq_error) const;
  int sequences() const;

 private:
  const FloatGruModel& model_;
  std::vector<SequenceBatch> held_in_;
  std::vector<std::vector<float>> float_outputs_;  // per batch [T, N, D*H]
  double sum_sq_reference_ = 0;
  int threads_;
};

// The first `max_sequences` sequences of `data` (file by file), as batches of at most that many in all.
std::vector<SequenceBatch> first_sequences(const std::vector<SequenceBatch>& data, int max_sequences);

}  // namespace qgru::search
