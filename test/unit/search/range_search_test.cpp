#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "qgru/calib/calibrate.h"
#include "qgru/calib/range_selection.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/runtime/quant_executor.h"
#include "qgru/search/range_search.h"
#include "quant_test_support.h"

namespace {

using namespace qgru;
using qgru::test::random_float_gru;
using qgru::test::random_input;

struct TinyCase {
  FloatGruModel model;
  CalibrationStats stats;
  std::vector<SequenceBatch> data;
};

// A 2-layer bidirectional GRU (C = 5, H = 7) with statistics of its own calibration data (T = 6, N = 40).
TinyCase tiny_case() {
  TinyCase c;
  c.model = random_float_gru(5, 7, 2, 2, 11);
  SequenceBatch batch;
  batch.T = 6;
  batch.N = 40;
  batch.C = 5;
  batch.values = random_input(static_cast<size_t>(batch.T * batch.N * batch.C), 12, 2.0f);
  c.stats = CalibrationStats::for_shape(2, 2, 5, 7);
  c.stats.method = "ema";
  observe_sequences(c.model, batch.values, batch.T, batch.N, "tiny", c.stats);
  c.data.push_back(std::move(batch));
  return c;
}

// The output SQNR of `ranges` computed independently of the search: the reference executor (not the fast one
// the search runs) against the float GRU, in double.
double reference_sqnr(const TinyCase& c, const BitwidthConfig& config, const RangeSearchResult& result, int sequences) {
  const QuantizedGru q = quantize_gru(c.model, config, result.provider());
  const SequenceBatch& b = c.data[0];
  std::vector<float> x(static_cast<size_t>(b.T * sequences * b.C));
  for (int t = 0; t < b.T; ++t) {
    for (int i = 0; i < sequences * b.C; ++i) x[static_cast<size_t>(t * sequences * b.C + i)] = b.values[static_cast<size_t>(t * b.N * b.C + i)];
  }
  const FloatGruResult f = run_float_gru(c.model, x.data(), b.T, sequences, nullptr);
  const QuantGruResult r = run_quantized_gru(q, x.data(), b.T, sequences, nullptr);
  double signal = 0, noise = 0;
  for (size_t i = 0; i < f.output.size(); ++i) {
    signal += static_cast<double>(f.output[i]) * f.output[i];
    noise += (static_cast<double>(r.output[i]) - f.output[i]) * (static_cast<double>(r.output[i]) - f.output[i]);
  }
  return 10.0 * std::log10(signal / noise);
}

// Methods that read min/max, the EMA and percentiles only: the histogram scans of KL and MSE cost more than
// the tiny model's evaluations.
RangeSearchOptions small_budget() {
  RangeSearchOptions options;
  options.methods = {"minmax", "minmax+pow2", "ema", "percentile:99.9", "percentile:99.9+pow2"};
  options.max_sequences = 24;
  options.max_evaluations = 160;
  options.suggest_widening = false;
  return options;
}

}  // namespace

TEST_CASE("the search ending below its best start method or misreporting its score") {
  const TinyCase c = tiny_case();
  const BitwidthConfig config = load_bitwidth_config("int8");
  const RangeSearchOptions options = small_budget();
  const RangeSearchResult result = search_ranges(c.model, config, c.stats, c.data, "search", options);
  REQUIRE(result.method_sqnr_db.size() == options.methods.size());
  // Not a structured binding: clang 14 (the sanitizer build) cannot capture one in doctest's message lambda.
  for (const auto& method_db : result.method_sqnr_db) {
    CHECK_MESSAGE(result.sqnr_db >= method_db.second, method_db.first);
    CHECK(result.start_sqnr_db >= method_db.second);
  }
  CHECK(result.sequences == 24);
  CHECK(result.evaluations <= options.max_evaluations);
  // Every accepted change improves on the one before by at least min_gain_db.
  for (size_t i = 1; i < result.history.size(); ++i) {
    CHECK(result.history[i].sqnr_db >= result.history[i - 1].sqnr_db + options.min_gain_db - 1e-9);
  }
  CHECK(result.history.back().sqnr_db == doctest::Approx(result.sqnr_db));
  // The score the search reports is the model's output SQNR on the held-in sequences, measured here by the
  // reference executor.
  CHECK(reference_sqnr(c, config, result, 24) == doctest::Approx(result.sqnr_db).epsilon(1e-9));
}

TEST_CASE("the search with multiplier scales ending below its best start method or misreporting its score") {
  // Candidates on real grids (docs/FIXED_POINT.md §1a): deduplicated by shift, zero point and mantissa.
  const TinyCase c = tiny_case();
  BitwidthConfig config = load_bitwidth_config("int8");
  for (TensorBitwidth& t : config.tensors) t.multiplier_scale = true;
  const RangeSearchOptions options = small_budget();
  const RangeSearchResult result = search_ranges(c.model, config, c.stats, c.data, "search", options);
  for (const auto& method_db : result.method_sqnr_db) CHECK_MESSAGE(result.sqnr_db >= method_db.second, method_db.first);
  CHECK(result.evaluations <= options.max_evaluations);
  CHECK(reference_sqnr(c, config, result, 24) == doctest::Approx(result.sqnr_db).epsilon(1e-9));
}

TEST_CASE("the search depending on the thread count or on the run") {
  const TinyCase c = tiny_case();
  const BitwidthConfig config = load_bitwidth_config("int8");
  RangeSearchOptions one = small_budget();
  one.threads = 1;
  RangeSearchOptions two = small_budget();
  two.threads = 2;
  const RangeSearchResult a = search_ranges(c.model, config, c.stats, c.data, "search", one);
  const RangeSearchResult b = search_ranges(c.model, config, c.stats, c.data, "search", two);
  CHECK(a.ranges == b.ranges);
  CHECK(a.evaluations == b.evaluations);
  CHECK(a.sqnr_db == b.sqnr_db);
  REQUIRE(a.history.size() == b.history.size());
  for (size_t i = 0; i < a.history.size(); ++i) CHECK(a.history[i].candidate == b.history[i].candidate);
}

TEST_CASE("the search overriding a tensor the config gives its own method, or spending past its budget") {
  const TinyCase c = tiny_case();
  BitwidthConfig config = load_bitwidth_config("int8");
  config.range_method = "search";
  config.of(GruTensor::h).range_method = "minmax";
  RangeSearchOptions options = small_budget();
  options.max_evaluations = 40;
  const RangeSearchResult result = search_ranges(c.model, config, c.stats, c.data, "", options);
  CHECK(result.evaluations == 40);
  CHECK(result.stopped_by == "evaluation budget");
  CHECK(std::find(result.searched.begin(), result.searched.end(), "h") == result.searched.end());
  CHECK(result.searched.size() == kObservedGruTensors.size() - 1);
  for (int l = 0; l < 2; ++l) {
    for (int d = 0; d < 2; ++d) {
      const RangeChoice minmax = select_range(c.stats, l, d, GruTensor::h, "minmax", config.spec(GruTensor::h));
      const FloatRange& h = result.ranges[static_cast<size_t>(l * 2 + d)][static_cast<size_t>(GruTensor::h)];
      CHECK(h.first == minmax.min);
      CHECK(h.second == minmax.max);
      // x is one range per layer, shared by the directions.
      CHECK(result.ranges[static_cast<size_t>(l * 2 + d)][static_cast<size_t>(GruTensor::x)] ==
            result.ranges[static_cast<size_t>(l * 2)][static_cast<size_t>(GruTensor::x)]);
    }
  }
}

TEST_CASE("widening suggestions that the config refuses or that misreport their gain") {
  const TinyCase c = tiny_case();
  const BitwidthConfig config = load_bitwidth_config("int8");
  RangeSearchOptions options = small_budget();
  options.suggest_widening = true;
  options.max_evaluations = 200;
  const RangeSearchResult result = search_ranges(c.model, config, c.stats, c.data, "search", options);
  REQUIRE(result.widening.size() == kObservedGruTensors.size());
  for (const WideningResult& w : result.widening) {
    if (w.tensor == GruTensor::update_gate_input) {
      // The int8 preset's gates are tables, which take inputs of at most 12 bits.
      CHECK_FALSE(w.possible);
      CHECK(!w.reason.empty());
      continue;
    }
    if (!w.possible) continue;
    CHECK(w.config.of(w.tensor).bits == 16);
    CHECK(w.gain_db == doctest::Approx(w.sqnr_db - result.sqnr_db));
  }
  const WideningResult* h = nullptr;
  for (const WideningResult& w : result.widening) {
    if (w.tensor == GruTensor::h) h = &w;
  }
  REQUIRE(h != nullptr);
  CHECK(h->possible);
  if (const WideningResult* best = result.best_widening()) {
    for (const WideningResult& w : result.widening) CHECK((!w.possible || w.gain_db <= best->gain_db));
  }
}

TEST_CASE("a search without data or budget refused with a message") {
  const TinyCase c = tiny_case();
  const BitwidthConfig config = load_bitwidth_config("int8");
  RangeSearchOptions options = small_budget();
  CHECK_THROWS_WITH_AS(search_ranges(c.model, config, c.stats, {}, "search", options),
                       doctest::Contains("hold no sequence"), Error);
  options.max_evaluations = 0;
  CHECK_THROWS_WITH_AS(search_ranges(c.model, config, c.stats, c.data, "search", options),
                       doctest::Contains("budget"), Error);
}
