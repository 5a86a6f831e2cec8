#include "qgru/search/range_search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

#include "output_error.h"
#include "qgru/base/error.h"
#include "qgru/calib/range_selection.h"

namespace qgru {
namespace {

using Clock = std::chrono::steady_clock;

// One searched range: x of a layer (direction -1, shared by its directions) or a tensor of one cell.
struct Coordinate {
  int layer = 0;
  int direction = -1;
  GruTensor tensor = GruTensor::x;
};

struct Candidate {
  std::string label;
  FloatRange range;
  TensorQuant grid;  // quant_from_range of the range under the tensor's spec
};

std::string format_db(double db) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f dB", db);
  return text;
}

bool same_grid(const TensorQuant& a, const TensorQuant& b) { return a.shift == b.shift && a.zp == b.zp && a.mantissa == b.mantissa; }

// The grid quantize gives the range: a power of two, or the real scale of a multiplier-scale tensor.
TensorQuant grid_of(const FloatRange& range, const TensorQuant& spec, bool real_scale) {
  return real_scale ? real_quant_from_range(range.first, range.second, spec.bits, spec.is_unsigned, spec.symmetric).quant
                    : quant_from_range(range.first, range.second, spec.bits, spec.is_unsigned, spec.symmetric).quant;
}

// Everything the descent reads and changes: the model, the statistics, the current ranges and the budget.
class Search {
 public:
  Search(const FloatGruModel& model, const BitwidthConfig& config, const CalibrationStats& stats,
         const search::OutputErrorScorer& scorer, const std::string& override_method,
         const RangeSearchOptions& options, const std::function<void(const std::string&)>& progress)
      : model_(model), config_(config), stats_(stats), scorer_(scorer), override_(override_method),
        options_(options), progress_(progress), started_(Clock::now()) {}

  RangeSearchResult run() {
    RangeSearchResult result;
    result.sequences = scorer_.sequences();
    const std::vector<GruTensor> searched = range_search_tensors(config_, override_, stats_.method);
    for (GruTensor tensor : searched) result.searched.push_back(gru_tensor_name(tensor));
    for (int l = 0; l < model_.num_layers; ++l) {
      if (std::find(searched.begin(), searched.end(), GruTensor::x) != searched.end()) coordinates_.push_back({l, -1, GruTensor::x});
      for (int d = 0; d < model_.num_directions; ++d) {
        for (GruTensor tensor : searched) {
          if (tensor != GruTensor::x) coordinates_.push_back({l, d, tensor});
        }
      }
    }
    const int widening_reserve = options_.suggest_widening ? 2 * static_cast<int>(kObservedGruTensors.size()) : 0;
    descent_budget_ = std::max(1, options_.max_evaluations - widening_reserve);

    start(result);
    descend(result);
    result.ranges = ranges_;
    result.sqnr_db = scorer_.sqnr_db(error_);
    result.evaluations = evaluations_;
    if (options_.suggest_widening) widen(result);
    result.evaluations = evaluations_;
    result.seconds = elapsed();
    return result;
  }

 private:
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - started_).count(); }

  // Whether another evaluation may start; sets stopped_by_ when not.
  bool may_evaluate(int limit) {
    if (evaluations_ >= limit) {
      stopped_by_ = "evaluation budget";
      return false;
    }
    if (options_.max_seconds > 0 && elapsed() >= options_.max_seconds) {
      stopped_by_ = "time budget";
      return false;
    }
    return true;
  }

  search::OutputError evaluate(const BitwidthConfig& config, const std::vector<CellRanges>& ranges) {
    ++evaluations_;
    return scorer_.evaluate(config, ranges);
  }

  void say(const std::string& line) const {
    if (progress_) progress_(line);
  }

  std::string resolved_method(GruTensor tensor) const {
    if (!override_.empty()) return override_;
    const std::string& own = config_.range_method_of(tensor);
    return own.empty() ? stats_.method : own;
  }

  // The range `method` gives a coordinate under `spec` (x: united over the layer's directions). Remembered:
  // KL and MSE scan thousands of histogram bins, and the same ranges are asked for again and again.
  FloatRange method_range(const Coordinate& c, const std::string& method, const TensorQuant& spec) {
    const std::string key = std::to_string(c.layer) + "/" + std::to_string(c.direction) + "/" +
                            gru_tensor_name(c.tensor) + "/" + method + "/" + describe_quant(spec);
    const auto known = method_ranges_.find(key);
    if (known != method_ranges_.end()) return known->second;
    FloatRange united{0.0, 0.0};
    for (int d = 0; d < model_.num_directions; ++d) {
      if (c.direction >= 0 && d != c.direction) continue;
      const RangeChoice choice = select_range(stats_, c.layer, d, c.tensor, method, spec);
      united = d == 0 || c.direction >= 0
                   ? FloatRange{choice.min, choice.max}
                   : FloatRange{std::min(united.first, choice.min), std::max(united.second, choice.max)};
    }
    method_ranges_.emplace(key, united);
    return united;
  }

  static void set_range(std::vector<CellRanges>& ranges, int num_directions, const Coordinate& c, const FloatRange& r) {
    for (int d = 0; d < num_directions; ++d) {
      if (c.direction >= 0 && d != c.direction) continue;
      ranges[static_cast<size_t>(c.layer * num_directions + d)][static_cast<size_t>(c.tensor)] = r;
    }
  }

  const FloatRange& range_at(const Coordinate& c) const {
    return ranges_[static_cast<size_t>(c.layer * model_.num_directions + std::max(c.direction, 0))][static_cast<size_t>(c.tensor)];
  }

  // Every tensor at its resolved method; searched ones at `method`.
  std::vector<CellRanges> uniform_ranges(const std::string& method) {
    std::vector<CellRanges> ranges(static_cast<size_t>(model_.num_layers * model_.num_directions));
    for (int l = 0; l < model_.num_layers; ++l) {
      for (GruTensor tensor : kObservedGruTensors) {
        const bool is_searched = is_range_search_method(resolved_method(tensor));
        const std::string& m = is_searched ? method : resolved_method(tensor);
        for (int d = tensor == GruTensor::x ? -1 : 0; d < (tensor == GruTensor::x ? 0 : model_.num_directions); ++d) {
          const Coordinate c{l, d, tensor};
          set_range(ranges, model_.num_directions, c, method_range(c, m, config_.spec(tensor)));
        }
      }
    }
    return ranges;
  }

  void start(RangeSearchResult& result) {
    double best = std::numeric_limits<double>::infinity();
    std::string refusals;
    for (const std::string& method : options_.methods) {
      if (evaluations_ > 0 && !may_evaluate(descent_budget_)) break;  // the first start is always scored
      std::vector<CellRanges> ranges = uniform_ranges(method);
      const search::OutputError e = evaluate(config_, ranges);
      if (!e.accepted()) {
        refusals += (refusals.empty() ? "" : "; ") + method + ": " + e.refused;
        continue;
      }
      result.method_sqnr_db.emplace_back(method, scorer_.sqnr_db(e.sum_sq_error));
      if (e.sum_sq_error < best) {  // ties keep the earlier method
        best = e.sum_sq_error;
        result.start_method = method;
        ranges_ = std::move(ranges);
      }
    }
    if (!std::isfinite(best)) {
      throw Error("range search: no start method gives a model quantize accepts" +
                  (refusals.empty() ? std::string() : " (" + refusals + ")"));
    }
    error_ = best;
    result.start_sqnr_db = scorer_.sqnr_db(best);
    RangeSearchStep step;
    step.evaluation = evaluations_;
    step.candidate = result.start_method;
    step.sqnr_db = result.start_sqnr_db;
    result.history.push_back(step);
    std::string line = "range search: " + std::to_string(result.sequences) + " held-in sequences; start methods:";
    for (const auto& [method, db] : result.method_sqnr_db) line += " " + method + " " + format_db(db) + ",";
    line.back() = ';';
    say(line + " starting from " + result.start_method);
  }

  std::vector<Candidate> candidates(const Coordinate& c) {
    const TensorQuant spec = config_.spec(c.tensor);
    std::vector<Candidate> list;
    for (const std::string& method : options_.methods) {
      const FloatRange r = method_range(c, method, spec);
      const Candidate variants[] = {{method, r, {}},
                                    {method + " (one shift finer)", {r.first / 2, r.second / 2}, {}},
                                    {method + " (one shift coarser)", {r.first * 2, r.second * 2}, {}}};
      for (Candidate candidate : variants) {
        try {
          candidate.grid = grid_of(candidate.range, spec, config_.of(c.tensor).multiplier_scale);
        } catch (const Error&) {
          continue;  // a shift outside [kMinShift, kMaxShift]
        }
        const bool seen = std::any_of(list.begin(), list.end(), [&](const Candidate& other) { return same_grid(other.grid, candidate.grid); });
        if (!seen) list.push_back(std::move(candidate));
      }
    }
    return list;
  }

  void descend(RangeSearchResult& result) {
    std::vector<std::vector<Candidate>> candidate_lists;
    for (const Coordinate& c : coordinates_) candidate_lists.push_back(candidates(c));
    const double gain_factor = std::pow(10.0, -options_.min_gain_db / 10.0);
    auto last_report = Clock::now();
    stopped_by_ = "converged";
    for (int pass = 1; !coordinates_.empty(); ++pass) {
      int changes = 0;
      bool out_of_budget = false;
      for (size_t i = 0; i < coordinates_.size() && !out_of_budget; ++i) {
        const Coordinate& c = coordinates_[i];
        const TensorQuant current = grid_of(range_at(c), config_.spec(c.tensor), config_.of(c.tensor).multiplier_scale);
        const Candidate* best = nullptr;
        double best_error = error_ * gain_factor;  // a change must gain at least min_gain_db
        std::vector<CellRanges> trial = ranges_;
        for (const Candidate& candidate : candidate_lists[i]) {
          if (same_grid(candidate.grid, current)) continue;
          if (!may_evaluate(descent_budget_)) {
            out_of_budget = true;
            break;
          }
          set_range(trial, model_.num_directions, c, candidate.range);
          const search::OutputError e = evaluate(config_, trial);
          if (e.accepted() && e.sum_sq_error < best_error) {
            best_error = e.sum_sq_error;
            best = &candidate;
          }
        }
        if (best != nullptr) {
          set_range(ranges_, model_.num_directions, c, best->range);
          error_ = best_error;
          ++changes;
          RangeSearchStep step;
          step.evaluation = evaluations_;
          step.pass = pass;
          step.layer = c.layer;
          step.direction = c.direction;
          step.tensor = c.tensor;
          step.candidate = best->label;
          step.shift = best->grid.shift;
          step.zp = best->grid.zp;
          step.min = best->range.first;
          step.max = best->range.second;
          step.sqnr_db = scorer_.sqnr_db(error_);
          result.history.push_back(step);
        }
        if (std::chrono::duration<double>(Clock::now() - last_report).count() >= 2.0) {
          last_report = Clock::now();
          say("range search: pass " + std::to_string(pass) + ", coordinate " + std::to_string(i + 1) + " of " +
              std::to_string(coordinates_.size()) + ", " + std::to_string(evaluations_) + " evaluations, " +
              format_db(scorer_.sqnr_db(error_)));
        }
      }
      result.passes = pass;
      say("range search: pass " + std::to_string(pass) + ": " + format_db(scorer_.sqnr_db(error_)) + " (start " +
          format_db(result.start_sqnr_db) + "), " + std::to_string(changes) + " change(s), " +
          std::to_string(evaluations_) + " evaluations, " + std::to_string(std::lround(elapsed())) + " s");
      if (out_of_budget || changes == 0) break;
    }
    result.stopped_by = stopped_by_;
  }

  void widen(RangeSearchResult& result) {
    for (GruTensor tensor : kObservedGruTensors) {
      if (config_.of(tensor).bits >= 16) continue;
      WideningResult widening;
      widening.tensor = tensor;
      widening.config = config_;
      widening.config.of(tensor).bits = 16;
      widening.config.name = config_.name + "+" + gru_tensor_name(tensor) + "16";
      double best = std::numeric_limits<double>::infinity();
      for (const char* method : {"minmax+pow2", "minmax"}) {
        if (!may_evaluate(options_.max_evaluations)) break;
        std::vector<CellRanges> ranges = ranges_;
        for (int l = 0; l < model_.num_layers; ++l) {
          for (int d = tensor == GruTensor::x ? -1 : 0; d < (tensor == GruTensor::x ? 0 : model_.num_directions); ++d) {
            const Coordinate c{l, d, tensor};
            set_range(ranges, model_.num_directions, c, method_range(c, method, widening.config.spec(tensor)));
          }
        }
        const search::OutputError e = evaluate(widening.config, ranges);
        if (!e.accepted()) {
          widening.reason = e.refused;
          break;  // the same widths are refused whatever the ranges
        }
        if (e.sum_sq_error < best) {
          best = e.sum_sq_error;
          widening.method = method;
        }
      }
      widening.possible = std::isfinite(best);
      if (widening.possible) {
        widening.sqnr_db = scorer_.sqnr_db(best);
        widening.gain_db = widening.sqnr_db - result.sqnr_db;
      } else if (widening.reason.empty()) {
        widening.reason = "not evaluated: " + stopped_by_ + " spent";
      }
      result.widening.push_back(std::move(widening));
    }
    if (const WideningResult* best = result.best_widening()) {
      say(std::string("range search: widening ") + gru_tensor_name(best->tensor) + " alone to 16 bits gains " +
          format_db(best->gain_db) + " (" + format_db(best->sqnr_db) + ")");
    }
  }

  const FloatGruModel& model_;
  const BitwidthConfig& config_;
  const CalibrationStats& stats_;
  const search::OutputErrorScorer& scorer_;
  const std::string override_;
  const RangeSearchOptions options_;
  const std::function<void(const std::string&)> progress_;
  const Clock::time_point started_;
  std::vector<Coordinate> coordinates_;
  std::vector<CellRanges> ranges_;
  std::map<std::string, FloatRange> method_ranges_;
  double error_ = std::numeric_limits<double>::infinity();
  int evaluations_ = 0;
  int descent_budget_ = 0;
  std::string stopped_by_ = "converged";
};

}  // namespace

const std::vector<std::string>& range_search_methods() {
  static const std::vector<std::string> methods = {
      "minmax", "minmax+pow2", "ema", "ema+pow2", "kl", "kl+pow2", "percentile:99.99", "percentile:99.99+pow2",
      "percentile:99.9", "percentile:99.9+pow2", "mse", "mse+pow2", "bounds", "bounds+pow2"};
  return methods;
}

bool is_range_search_method(const std::string& method) { return method == kRangeSearchMethodName; }

DecidedRange searched_ranges(const std::optional<RangeSearchResult>& search) {
  if (!search) return nullptr;
  const RangeSearchResult* result = &*search;
  return [result](int layer, int direction, GruTensor tensor, const std::string& method,
                  const TensorQuant& spec) -> std::optional<std::pair<double, double>> {
    if (!is_range_search_method(method)) return std::nullopt;
    return result->provider()(layer, direction, tensor, method, spec);
  };
}

std::vector<GruTensor> range_search_tensors(const BitwidthConfig& config, const std::string& override_method,
                                            const std::string& stats_method) {
  std::vector<GruTensor> tensors;
  for (GruTensor tensor : kObservedGruTensors) {
    const std::string& own = config.range_method_of(tensor);
    const std::string& method = !override_method.empty() ? override_method : own.empty() ? stats_method : own;
    if (is_range_search_method(method)) tensors.push_back(tensor);
  }
  return tensors;
}

const WideningResult* RangeSearchResult::best_widening() const {
  const WideningResult* best = nullptr;
  for (const WideningResult& w : widening) {
    if (w.possible && w.gain_db > 0 && (best == nullptr || w.gain_db > best->gain_db)) best = &w;
  }
  return best;
}

RangeProvider RangeSearchResult::provider() const {
  return [this](int layer, int direction, GruTensor tensor, const std::string&, const TensorQuant&) {
    return ranges.at(static_cast<size_t>(layer * num_directions + direction))[static_cast<size_t>(tensor)];
  };
}

RangeSearchResult search_ranges(const FloatGruModel& model, const BitwidthConfig& config,
                                const CalibrationStats& stats, const std::vector<SequenceBatch>& data,
                                const std::string& override_method, const RangeSearchOptions& options,
                                const std::function<void(const std::string&)>& progress) {
  if (options.max_sequences < 1) throw Error("range search: the held-in subset needs at least 1 sequence");
  if (options.max_evaluations < 1) throw Error("range search: the evaluation budget must be at least 1");
  if (options.methods.empty()) throw Error("range search: no start method given");
  for (const std::string& method : options.methods) parse_range_method(method);  // refuses an unknown one
  std::vector<SequenceBatch> held_in = search::first_sequences(data, options.max_sequences);
  if (held_in.empty()) throw Error("range search: the calibration data hold no sequence");
  for (const SequenceBatch& batch : held_in) {
    if (batch.C != model.input_size) {
      throw Error("range search: data of C = " + std::to_string(batch.C) + " for a model of C = " +
                  std::to_string(model.input_size));
    }
  }
  const search::OutputErrorScorer scorer(model, std::move(held_in), options.threads);
  RangeSearchResult result = Search(model, config, stats, scorer, override_method, options, progress).run();
  result.num_directions = model.num_directions;
  return result;
}

}  // namespace qgru
