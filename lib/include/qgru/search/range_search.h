#pragma once
// Range method `search`: the float ranges of the observed tensors chosen to minimise the quantized model's
// OUTPUT error on calibration sequences, instead of each tensor's own fit to its histogram (which does not
// see how an error propagates through the recurrence). docs/CALIBRATION.md "The range search".
//
// 1. Candidates per coordinate. A coordinate is one observed tensor of one cell (layer, direction), except x,
//    which the directions of a layer share (one coordinate per layer, ranges united over the directions as
//    quantize_gru does). Its candidates are the range of every method of options.methods (select_range on
//    the statistics) and each of them scaled by 1/2 and by 2 about zero: under quant_from_range that is the
//    same zero point one shift finer (both ends clip in proportion) and one shift coarser. Candidates that
//    map to the same (shift, zp) are evaluated once (the first in that order is kept).
// 2. Score: the squared error Σ(y_int − y_float)² of the model's output [T, N, D·H] over the held-in
//    sequences (the first max_sequences of the data), y_int dequantized from the fast integer executor (the
//    same codes as the reference), y_float from the float GRU. Reported as SQNR = 10·log10(Σy_float² / Σerr²).
//    A candidate that quantize refuses (the overflow proof) is skipped.
// 3. Start: every method of options.methods applied to all searched tensors; the best is the start.
// 4. Coordinate descent in data-flow order (layer, then x, then per direction h, the linears, the gates),
//    each coordinate set to its best candidate when that beats the current score by at least min_gain_db
//    (ties and smaller gains keep the current range); passes repeat until one changes nothing or the budget
//    is spent. Deterministic: the same inputs and budget give the same ranges (a time budget makes the
//    number of evaluations depend on the machine; the evaluation budget does not).
// 5. Widening (optional): each activation tensor of the config alone at 16 bits (ranges minmax or
//    minmax+pow2, the better), scored the same way; the gain over the searched 8-bit model is reported as a
//    mixed-precision suggestion. A widening the config refuses (e.g. a gate table fed by a 16-bit input) is
//    listed with the reason.
//
// Tensors whose resolved range method is not "search" (a per-tensor method in the config) keep that method
// and are not searched.
#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "qgru/calib/calibration_stats.h"
#include "qgru/io/sequence_io.h"
#include "qgru/model/float_gru.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/quant/quantize_with_stats.h"
#include "qgru/runtime/bitwidth_config.h"

namespace qgru {

constexpr const char* kRangeSearchMethodName = "search";

// The single methods the search starts from and takes candidates of.
const std::vector<std::string>& range_search_methods();

struct RangeSearchOptions {
  std::vector<std::string> methods = range_search_methods();  // start methods and candidate sources
  int max_sequences = 256;      // held-in subset: the first sequences of the data, file by file
  int max_evaluations = 2000;   // every model evaluation counts (starts, candidates, widenings); >= 1
  double max_seconds = 0;       // 0: no time limit; otherwise stop starting evaluations after this long
  double min_gain_db = 0.01;    // a coordinate changes only when the output SQNR gains at least this much
  bool suggest_widening = true; // also score each activation tensor widened to 16 bits
  int threads = 1;              // fast executor threads (0: all cores)
};

// One accepted change of the descent (or the start).
struct RangeSearchStep {
  int evaluation = 0;  // how many evaluations had been made when it was accepted
  int pass = 0;        // 0: the start
  int layer = 0;
  int direction = -1;  // -1: x of the layer (shared by its directions), or the start
  GruTensor tensor = GruTensor::x;
  std::string candidate;  // e.g. "kl+pow2", "mse (one shift finer)"; the start: the method
  int shift = 0;
  int32_t zp = 0;
  double min = 0, max = 0;
  double sqnr_db = 0;     // output SQNR after the change
};

struct WideningResult {
  GruTensor tensor = GruTensor::h;
  bool possible = false;
  std::string reason;      // why not, when !possible
  std::string method;      // the 16-bit tensor's range method (minmax or minmax+pow2)
  double sqnr_db = 0;      // output SQNR with the tensor at 16 bits
  double gain_db = 0;      // against the searched model at the config's widths
  BitwidthConfig config;   // the widened config (the suggestion a user can accept)
};

struct RangeSearchResult {
  int sequences = 0;                    // held-in sequences scored
  int num_directions = 1;               // of the model (ranges' cell index: layer * num_directions + direction)
  std::vector<std::pair<std::string, double>> method_sqnr_db;  // every start method's output SQNR
  std::string start_method;
  double start_sqnr_db = 0;
  double sqnr_db = 0;                   // the searched ranges' output SQNR on the held-in sequences
  int evaluations = 0;
  int passes = 0;
  double seconds = 0;
  std::string stopped_by;               // "converged", "evaluation budget", "time budget"
  std::vector<RangeSearchStep> history; // the start, then every accepted change in order
  std::vector<CellRanges> ranges;       // per cell (layer * D + direction): every observed tensor's range
  std::vector<std::string> searched;    // tensor names searched (resolved method "search")
  std::vector<WideningResult> widening; // one per activation tensor tried, in tensor order

  // The best possible widening, or nullptr when none gains.
  const WideningResult* best_widening() const;
  // The ranges as quantize_gru's callback (the range method argument is ignored).
  RangeProvider provider() const;
};

// Whether `method` (a config's, --range-method's or the statistics' method string) names the search.
bool is_range_search_method(const std::string& method);

// Tensors whose method resolves to "search" under `config` with `override_method` (quantize --range-method,
// may be empty) and the statistics' default method; empty when none does.
std::vector<GruTensor> range_search_tensors(const BitwidthConfig& config, const std::string& override_method,
                                            const std::string& stats_method);

// Run the search. `data`: calibration batches [T, N, C] (time-major) for the model's C. Non-searched tensors
// take their resolved method (override_method, else the config's, else the statistics'). `progress` gets a
// line now and then (passes, improvements), nullptr for none. Throws qgru::Error when no start method gives a
// model quantize accepts or the data hold no sequence.
RangeSearchResult search_ranges(const FloatGruModel& model, const BitwidthConfig& config,
                                const CalibrationStats& stats, const std::vector<SequenceBatch>& data,
                                const std::string& override_method, const RangeSearchOptions& options,
                                const std::function<void(const std::string&)>& progress = nullptr);

// The searched tensors' ranges for quantize_with_stats: a tensor's whose resolved method is "search" comes
// from `search`; nullptr when there is no search. The result refers to `search`, which must outlive it.
DecidedRange searched_ranges(const std::optional<RangeSearchResult>& search);

// The result for the artifact's provenance and the report: options, every start method's score, the
// history, the chosen range/shift/zp per tensor, the widening results.
nlohmann::json range_search_json(const RangeSearchResult& result, const RangeSearchOptions& options);
// A few lines for the log: start, final score, the best widening.
std::string range_search_summary(const RangeSearchResult& result);

}  // namespace qgru
