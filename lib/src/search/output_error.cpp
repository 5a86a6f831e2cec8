#include "output_error.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "qgru/base/error.h"
#include "qgru/base/log.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/runtime/executor.h"

namespace qgru::search {
namespace {

// quantize_gru logs per cell (all-zero rows, empty ranges); during thousands of evaluations only errors may
// reach stderr. Restores the level on exit.
class QuietLog {
 public:
  QuietLog() : level_(log()->level()) { log()->set_level(spdlog::level::err); }
  ~QuietLog() { log()->set_level(level_); }
  QuietLog(const QuietLog&) = delete;
  QuietLog& operator=(const QuietLog&) = delete;

 private:
  spdlog::level::level_enum level_;
};

}  // namespace

std::vector<SequenceBatch> first_sequences(const std::vector<SequenceBatch>& data, int max_sequences) {
  std::vector<SequenceBatch> taken;
  int remaining = max_sequences;
  for (const SequenceBatch& batch : data) {
    if (remaining <= 0) break;
    const int n = std::min(batch.N, remaining);
    SequenceBatch part;
    part.T = batch.T;
    part.N = n;
    part.C = batch.C;
    part.values.resize(static_cast<size_t>(batch.T) * static_cast<size_t>(n) * static_cast<size_t>(batch.C));
    for (int t = 0; t < batch.T; ++t) {  // [T, N, C] -> [T, n, C]: the first n sequences of every step
      std::copy_n(batch.values.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * batch.N * batch.C),
                  static_cast<size_t>(n) * batch.C,
                  part.values.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(t) * n * batch.C));
    }
    taken.push_back(std::move(part));
    remaining -= n;
  }
  return taken;
}

OutputErrorScorer::OutputErrorScorer(const FloatGruModel& model, std::vector<SequenceBatch> held_in, int threads)
    : model_(model), held_in_(std::move(held_in)), threads_(threads) {
  for (const SequenceBatch& batch : held_in_) {
    FloatGruResult result = run_float_gru(model_, batch.values.data(), batch.T, batch.N, nullptr);
    for (float y : result.output) sum_sq_reference_ += static_cast<double>(y) * static_cast<double>(y);
    float_outputs_.push_back(std::move(result.output));
  }
}

int OutputErrorScorer::sequences() const {
  int n = 0;
  for (const SequenceBatch& batch : held_in_) n += batch.N;
  return n;
}

double OutputErrorScorer::sqnr_db(double sum_sq_error) const {
  if (sum_sq_error == 0) return std::numeric_limits<double>::infinity();
  return 10.0 * std::log10(sum_sq_reference_ / sum_sq_error);
}

OutputError OutputErrorScorer::evaluate(const BitwidthConfig& config, const std::vector<CellRanges>& ranges) const {
  OutputError result;
  QuantizedGru quantized;
  {
    const QuietLog quiet;
    try {
      quantized = quantize_gru(model_, config, [&](int layer, int direction, GruTensor tensor, const std::string&,
                                                   const TensorQuant&) {
        return ranges.at(static_cast<size_t>(layer * model_.num_directions + direction))[static_cast<size_t>(tensor)];
      });
    } catch (const Error& e) {
      result.refused = e.what();
      result.sum_sq_error = std::numeric_limits<double>::infinity();
      return result;
    }
  }
  ExecutorRequest request;  // the CPU's fast executor where it applies, else the reference (the same codes)
  request.fast.threads = threads_;
  const std::unique_ptr<Executor> executor = make_executor(quantized, request);
  for (size_t b = 0; b < held_in_.size(); ++b) {
    const SequenceBatch& batch = held_in_[b];
    const QuantGruResult run = executor->run(batch.values.data(), batch.T, batch.N, nullptr);
    const std::vector<float>& reference = float_outputs_[b];
    for (size_t i = 0; i < reference.size(); ++i) {
      const double error = static_cast<double>(run.output[i]) - static_cast<double>(reference[i]);
      result.sum_sq_error += error * error;
    }
  }
  return result;
}

}  // namespace qgru::search
