// JSON form of the calibration statistics (docs/CALIBRATION.md, "Statistics format").
#include <cmath>
#include <nlohmann/json.hpp>

#include "qgru/io/strict_json.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/calib/calibration_stats.h"
#include "qgru/calib/range_selection.h"
#include "qgru/version.h"

namespace qgru {

namespace {

using nlohmann::json;
using nlohmann::ordered_json;  // writing: fields in the documented order
constexpr int kObservedCount = static_cast<int>(kObservedGruTensors.size());

// Histogram bins as runs of non-zero bins: [[first_bin, count, count, ...], ...].
ordered_json encode_runs(const std::vector<uint64_t>& bins) {
  ordered_json runs = ordered_json::array();
  size_t index = 0;
  while (index < bins.size()) {
    if (bins[index] == 0) {
      ++index;
      continue;
    }
    ordered_json run = ordered_json::array({index});
    while (index < bins.size() && bins[index] != 0) run.push_back(bins[index++]);
    runs.push_back(std::move(run));
  }
  return runs;
}

ordered_json range_or_null(double value) { return std::isfinite(value) ? ordered_json(value) : ordered_json(nullptr); }

ordered_json encode_tensor(const TensorStats& stats, int layer, int direction, GruTensor tensor) {
  ordered_json entry;
  entry["layer"] = layer;
  entry["direction"] = direction;
  entry["tensor"] = gru_tensor_name(tensor);
  entry["count"] = stats.count;
  entry["zero_count"] = stats.zero_count;
  entry["min"] = range_or_null(stats.min);
  entry["max"] = range_or_null(stats.max);
  entry["ema"] = {{"steps", stats.ema.steps},       {"min", stats.ema.min},
                  {"max", stats.ema.max},           {"first_min", stats.ema.first_min},
                  {"first_max", stats.ema.first_max}};
  entry["histogram"] = {{"exponent", stats.histogram.exponent()}, {"runs", encode_runs(stats.histogram.bins())}};
  return entry;
}

// Reading: every access names the file and the JSON path on failure.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}
  [[noreturn]] void fail(const std::string& where, const std::string& what) const {
    throw Error(source_ + ": " + where + ": " + what);
  }
  const json& field(const json& object, const std::string& key, const std::string& where) const {
    if (!object.is_object()) fail(where, "expected a JSON object");
    auto it = object.find(key);
    if (it == object.end()) fail(where, "missing field '" + key + "'");
    return *it;
  }
  int64_t integer(const json& object, const std::string& key, const std::string& where, int64_t lo, int64_t hi) const {
    const json& value = field(object, key, where);
    if (!value.is_number_integer()) fail(where + "." + key, "expected an integer");
    const int64_t number = value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)
                               ? INT64_MAX
                               : value.get<int64_t>();
    if (number < lo || number > hi) {
      fail(where + "." + key, "value " + std::to_string(number) + " outside " + std::to_string(lo) + ".." +
                                  std::to_string(hi));
    }
    return number;
  }
  uint64_t count(const json& value, const std::string& where) const {
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
      fail(where, "expected a non-negative integer count");
    }
    return value.get<uint64_t>();
  }
  double real(const json& object, const std::string& key, const std::string& where) const {
    const json& value = field(object, key, where);
    if (!value.is_number()) fail(where + "." + key, "expected a number");
    return value.get<double>();
  }
  std::string text(const json& object, const std::string& key, const std::string& where) const {
    const json& value = field(object, key, where);
    if (!value.is_string()) fail(where + "." + key, "expected a string");
    return value.get<std::string>();
  }

 private:
  std::string source_;
};

std::vector<uint64_t> decode_runs(const Reader& reader, const json& runs, const std::string& where) {
  if (!runs.is_array()) reader.fail(where, "expected an array of runs [first_bin, count, ...]");
  std::vector<uint64_t> bins(Pow2Histogram::kBins, 0);
  int64_t next_free = 0;
  for (size_t r = 0; r < runs.size(); ++r) {
    const std::string run_where = where + "[" + std::to_string(r) + "]";
    const json& run = runs[r];
    if (!run.is_array() || run.size() < 2) reader.fail(run_where, "expected [first_bin, count, ...]");
    if (!run[0].is_number_integer()) reader.fail(run_where, "first bin is not an integer");
    const int64_t first = run[0].get<int64_t>();
    // Range-check first on its own before adding the run length: a huge first bin must not wrap around.
    const int64_t run_length = static_cast<int64_t>(run.size()) - 1;
    if (first < next_free || first > Pow2Histogram::kBins || run_length > Pow2Histogram::kBins - first) {
      reader.fail(run_where, "bins starting at " + std::to_string(first) +
                                 " overlap an earlier run or lie outside 0.." + std::to_string(Pow2Histogram::kBins - 1));
    }
    const int64_t end = first + run_length;
    if (end > Pow2Histogram::kBins) {
      reader.fail(run_where, "bins " + std::to_string(first) + ".." + std::to_string(end - 1) +
                                 " overlap an earlier run or lie outside 0.." + std::to_string(Pow2Histogram::kBins - 1));
    }
    for (size_t k = 1; k < run.size(); ++k) {
      bins[static_cast<size_t>(first) + k - 1] = reader.count(run[k], run_where + "[" + std::to_string(k) + "]");
    }
    next_free = end;
  }
  return bins;
}

TensorStats decode_tensor(const Reader& reader, const json& entry, const std::string& where) {
  TensorStats stats;
  stats.count = reader.count(reader.field(entry, "count", where), where + ".count");
  stats.zero_count = reader.count(reader.field(entry, "zero_count", where), where + ".zero_count");
  if (stats.zero_count > stats.count) reader.fail(where, "zero_count exceeds count");
  const json& min = reader.field(entry, "min", where);
  const json& max = reader.field(entry, "max", where);
  if (stats.count > 0) {
    if (!min.is_number() || !max.is_number()) reader.fail(where, "min/max must be numbers when count > 0");
    stats.min = min.get<double>();
    stats.max = max.get<double>();
    if (!(stats.min <= stats.max)) reader.fail(where, "min exceeds max");
  } else if (!min.is_null() || !max.is_null()) {
    reader.fail(where, "min/max must be null when count is 0");
  }
  const json& ema = reader.field(entry, "ema", where);
  stats.ema.steps = reader.count(reader.field(ema, "steps", where + ".ema"), where + ".ema.steps");
  stats.ema.min = reader.real(ema, "min", where + ".ema");
  stats.ema.max = reader.real(ema, "max", where + ".ema");
  stats.ema.first_min = reader.real(ema, "first_min", where + ".ema");
  stats.ema.first_max = reader.real(ema, "first_max", where + ".ema");
  const json& histogram = reader.field(entry, "histogram", where);
  const int exponent = static_cast<int>(reader.integer(histogram, "exponent", where + ".histogram",
                                                       Pow2Histogram::kMinExponent, Pow2Histogram::kMaxExponent));
  stats.histogram.assign(exponent, decode_runs(reader, reader.field(histogram, "runs", where + ".histogram"),
                                               where + ".histogram.runs"));
  const uint64_t total = stats.histogram.total();
  if (total != stats.count - stats.zero_count) {
    reader.fail(where, "histogram holds " + std::to_string(total) + " values, expected count - zero_count = " +
                           std::to_string(stats.count - stats.zero_count));
  }
  if (stats.count > 0) {
    const double limit = std::ldexp(1.0, exponent);
    if (stats.min < -limit || stats.max >= limit) {
      reader.fail(where, "min/max outside the histogram range [-2^" + std::to_string(exponent) + ", 2^" +
                             std::to_string(exponent) + ")");
    }
  }
  return stats;
}

}  // namespace

std::string serialize_calibration_stats(const CalibrationStats& stats) {
  ordered_json root;
  root["schema"] = kCalibrationStatsSchema;
  root["schema_version"] = kCalibrationStatsSchemaVersion;
  root["tool_version"] = QGRU_VERSION_STRING;
  root["model"] = {{"path", stats.model_path},
                   {"sha256", stats.model_sha256},
                   {"num_layers", stats.num_layers},
                   {"num_directions", stats.num_directions},
                   {"input_size", stats.input_size},
                   {"hidden_size", stats.hidden_size}};
  root["method"] = {{"name", stats.method}, {"include_zeros", stats.include_zeros}};
  root["ema"] = {{"decay", kEmaDecay}, {"order_dependent", true}};
  root["histogram_layout"] = {{"bins", Pow2Histogram::kBins},
                              {"bins_per_side", Pow2Histogram::kBinsPerSide},
                              {"exact_zeros", "excluded (counted in zero_count)"}};
  ordered_json files = ordered_json::array();
  for (const auto& file : stats.data_files) {
    files.push_back({{"path", file.path}, {"sha256", file.sha256}, {"time_steps", file.time_steps},
                     {"sequences", file.sequences}});
  }
  root["data_files"] = std::move(files);
  root["total_sequences"] = stats.total_sequences();
  // Pretty top level, one compact line per tensor (histograms would otherwise take a line per count).
  std::string text = qgru::json_text(root, 1);
  text.resize(text.rfind('}'));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  text += ",\n \"tensors\": [";
  bool first = true;
  for (int layer = 0; layer < stats.num_layers; ++layer) {
    for (int direction = 0; direction < stats.num_directions; ++direction) {
      for (GruTensor tensor : kObservedGruTensors) {
        text += first ? "\n  " : ",\n  ";
        first = false;
        text += qgru::json_text(encode_tensor(stats.at(layer, direction, tensor), layer, direction, tensor));
      }
    }
  }
  return text + "\n ]\n}\n";
}

void write_calibration_stats(const std::string& path, const CalibrationStats& stats) {
  write_file_atomic(path, serialize_calibration_stats(stats));
}

CalibrationStats parse_calibration_stats(const std::string& json_text, const std::string& source) {
  const json root = parse_strict_json(json_text, source);
  const Reader reader(source);
  const std::string schema = reader.text(root, "schema", "top level");
  if (schema != kCalibrationStatsSchema) {
    reader.fail("schema", "'" + schema + "' is not '" + kCalibrationStatsSchema + "'");
  }
  const int64_t version = reader.integer(root, "schema_version", "top level", 0, INT32_MAX);
  if (version != kCalibrationStatsSchemaVersion) {
    reader.fail("schema_version", std::to_string(version) + " is not supported (this qgru reads version " +
                                      std::to_string(kCalibrationStatsSchemaVersion) + ")");
  }
  const json& model = reader.field(root, "model", "top level");
  const int layers = static_cast<int>(reader.integer(model, "num_layers", "model", 1, 1024));
  const int directions = static_cast<int>(reader.integer(model, "num_directions", "model", 1, 2));
  const int input_size = static_cast<int>(reader.integer(model, "input_size", "model", 1, INT32_MAX));
  const int hidden_size = static_cast<int>(reader.integer(model, "hidden_size", "model", 1, INT32_MAX));
  // Every (layer, direction, tensor) holds a histogram of kBins counts (1 MiB), so the entries are counted
  // before any is allocated: the statistics take memory in proportion to the entries the file holds, never
  // to what its model section claims (1024 layers x 2 directions would be 20 GiB). More entries than
  // expected are left to the loop below, which names the duplicate or the entry out of range.
  const json& tensors = reader.field(root, "tensors", "top level");
  if (!tensors.is_array()) reader.fail("tensors", "expected an array");
  const size_t expected_tensors =
      static_cast<size_t>(layers) * static_cast<size_t>(directions) * static_cast<size_t>(kObservedCount);
  if (tensors.size() < expected_tensors) {
    reader.fail("tensors", std::to_string(tensors.size()) + " entries, expected " + std::to_string(expected_tensors) +
                               " (" + std::to_string(layers) + " layers x " + std::to_string(directions) +
                               " directions x " + std::to_string(kObservedCount) + " tensors): entries are missing");
  }
  CalibrationStats stats = CalibrationStats::for_shape(layers, directions, input_size, hidden_size);
  stats.model_path = reader.text(model, "path", "model");
  stats.model_sha256 = reader.text(model, "sha256", "model");
  const json& method = reader.field(root, "method", "top level");
  stats.method = reader.text(method, "name", "method");
  try {
    parse_range_method(stats.method);
  } catch (const Error& e) {
    reader.fail("method.name", e.what());
  }
  const json& include_zeros = reader.field(method, "include_zeros", "method");
  if (!include_zeros.is_boolean()) reader.fail("method.include_zeros", "expected true or false");
  stats.include_zeros = include_zeros.get<bool>();
  const json& layout = reader.field(root, "histogram_layout", "top level");
  if (reader.integer(layout, "bins", "histogram_layout", 0, INT32_MAX) != Pow2Histogram::kBins) {
    reader.fail("histogram_layout.bins", "expected " + std::to_string(Pow2Histogram::kBins));
  }
  const json& files = reader.field(root, "data_files", "top level");
  if (!files.is_array()) reader.fail("data_files", "expected an array");
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string where = "data_files[" + std::to_string(i) + "]";
    CalibrationDataFile file;
    file.path = reader.text(files[i], "path", where);
    file.sha256 = reader.text(files[i], "sha256", where);
    file.time_steps = reader.integer(files[i], "time_steps", where, 0, INT64_MAX);
    file.sequences = reader.integer(files[i], "sequences", where, 0, INT64_MAX);
    stats.data_files.push_back(file);
  }
  std::vector<bool> seen(stats.tensors.size(), false);
  for (size_t i = 0; i < tensors.size(); ++i) {
    std::string where = "tensors[" + std::to_string(i) + "]";
    const json& entry = tensors[i];
    const int layer = static_cast<int>(reader.integer(entry, "layer", where, 0, layers - 1));
    const int direction = static_cast<int>(reader.integer(entry, "direction", where, 0, directions - 1));
    const std::string name = reader.text(entry, "tensor", where);
    const auto tensor = gru_tensor_from_name(name);
    if (!tensor || observed_tensor_index(*tensor) < 0) reader.fail(where + ".tensor", "'" + name + "' is not an observed tensor");
    where += " (layer " + std::to_string(layer) + ", direction " + std::to_string(direction) + ", " + name + ")";
    const size_t index = static_cast<size_t>((layer * directions + direction) * kObservedCount +
                                             observed_tensor_index(*tensor));
    if (seen[index]) reader.fail(where, "appears twice");
    seen[index] = true;
    stats.tensors[index] = decode_tensor(reader, entry, where);
  }
  for (size_t index = 0; index < seen.size(); ++index) {
    if (!seen[index]) {
      const int cell = static_cast<int>(index) / kObservedCount;
      reader.fail("tensors", std::string("missing layer ") + std::to_string(cell / directions) + ", direction " +
                                 std::to_string(cell % directions) + ", tensor " +
                                 gru_tensor_name(kObservedGruTensors[index % kObservedGruTensors.size()]));
    }
  }
  return stats;
}

CalibrationStats read_calibration_stats(const std::string& path) {
  return parse_calibration_stats(read_file_text(path), path);
}

}  // namespace qgru
