#include "qgru/calib/calibration_stats.h"

#include <set>

#include "qgru/base/error.h"
#include "qgru/base/log.h"

namespace qgru {

namespace {
constexpr int kObservedCount = static_cast<int>(kObservedGruTensors.size());
}

int observed_tensor_index(GruTensor tensor) {
  for (int i = 0; i < kObservedCount; ++i) {
    if (kObservedGruTensors[static_cast<size_t>(i)] == tensor) return i;
  }
  return -1;
}

CalibrationStats CalibrationStats::for_shape(int num_layers, int num_directions, int input_size, int hidden_size) {
  CalibrationStats stats;
  stats.num_layers = num_layers;
  stats.num_directions = num_directions;
  stats.input_size = input_size;
  stats.hidden_size = hidden_size;
  stats.tensors.resize(static_cast<size_t>(num_layers * num_directions * kObservedCount));
  return stats;
}

int64_t CalibrationStats::total_sequences() const {
  int64_t total = 0;
  for (const auto& file : data_files) total += file.sequences;
  return total;
}

const TensorStats& CalibrationStats::at(int layer, int direction, GruTensor tensor) const {
  const int position = observed_tensor_index(tensor);
  if (position < 0) {
    throw Error(std::string("calibration statistics hold no tensor '") + gru_tensor_name(tensor) +
                "': only activations are observed (weights are quantized from their values)");
  }
  if (layer < 0 || layer >= num_layers || direction < 0 || direction >= num_directions) {
    throw Error("calibration statistics have no layer " + std::to_string(layer) + " direction " +
                std::to_string(direction) + " (model has " + std::to_string(num_layers) + " layers, " +
                std::to_string(num_directions) + " directions)");
  }
  const size_t index = static_cast<size_t>((layer * num_directions + direction) * kObservedCount + position);
  if (index >= tensors.size()) throw Error("internal: calibration statistics hold too few tensors");
  return tensors[index];
}

TensorStats& CalibrationStats::at(int layer, int direction, GruTensor tensor) {
  return const_cast<TensorStats&>(static_cast<const CalibrationStats&>(*this).at(layer, direction, tensor));
}

void check_stats_match_model(const CalibrationStats& stats, int num_layers, int num_directions, int input_size,
                             int hidden_size, const std::string& source) {
  auto mismatch = [&](const char* what, int in_stats, int in_model) {
    if (in_stats != in_model) {
      throw Error(source + ": calibration statistics are for another model: " + what + " " +
                  std::to_string(in_stats) + " in the statistics, " + std::to_string(in_model) + " in the model");
    }
  };
  mismatch("num_layers", stats.num_layers, num_layers);
  mismatch("num_directions", stats.num_directions, num_directions);
  mismatch("input_size (C)", stats.input_size, input_size);
  mismatch("hidden_size (H)", stats.hidden_size, hidden_size);
}

CalibrationStats merge_calibration_stats(const std::vector<CalibrationStats>& shards,
                                         const std::vector<std::string>& sources) {
  if (shards.empty()) throw Error("merge: no calibration statistics given");
  auto name = [&](size_t i) { return i < sources.size() ? sources[i] : "shard " + std::to_string(i); };
  CalibrationStats merged = shards.front();
  std::set<std::string> seen_data;
  for (const auto& file : merged.data_files) seen_data.insert(file.sha256);
  for (size_t i = 1; i < shards.size(); ++i) {
    const CalibrationStats& shard = shards[i];
    check_stats_match_model(shard, merged.num_layers, merged.num_directions, merged.input_size,
                            merged.hidden_size, name(i) + " (merged with " + name(0) + ")");
    if (!merged.model_sha256.empty() && !shard.model_sha256.empty() && merged.model_sha256 != shard.model_sha256) {
      throw Error(name(i) + ": calibration statistics are for other weights (model sha256 " + shard.model_sha256 +
                  ", " + name(0) + " has " + merged.model_sha256 + ")");
    }
    if (shard.method != merged.method || shard.include_zeros != merged.include_zeros) {
      log()->warn("{}: method '{}' differs from {}'s '{}'; the merged statistics keep '{}'", name(i), shard.method,
                  name(0), merged.method, merged.method);
    }
    for (const auto& file : shard.data_files) {
      if (!file.sha256.empty() && !seen_data.insert(file.sha256).second) {
        log()->warn("{}: data file {} (sha256 {}) is already in the merge; its values count twice", name(i),
                    file.path, file.sha256);
      }
      merged.data_files.push_back(file);
    }
    for (size_t t = 0; t < merged.tensors.size(); ++t) merged.tensors[t].merge(shard.tensors[t]);
  }
  return merged;
}

}  // namespace qgru
