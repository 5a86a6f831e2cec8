// The toolchain bound for Python: models, calibration, statistics, quantization, verification. Each function
// is the library call its CLI subcommand makes (apps/qgru/cmd_*.cpp), on files or on arrays held in memory,
// with the same defaults and the same one-line qgru::Error messages.
#include "toolchain.h"

#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/variant.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <optional>
#include <variant>

#include "arrays.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/log.h"
#include "qgru/base/output_policy.h"
#include "qgru/base/sha256.h"
#include "qgru/calib/calibrate.h"
#include "qgru/calib/range_selection.h"
#include "qgru/import/load_float_gru.h"
#include "qgru/io/npy.h"
#include "qgru/io/safetensors.h"
#include "qgru/io/sequence_io.h"
#include "qgru/io/strict_json.h"
#include "qgru/quant/artifact_write.h"
#include "qgru/quant/bitwidth_presets.h"
#include "qgru/quant/quantize_gru.h"
#include "qgru/quant/quantize_with_stats.h"
#include "qgru/quant/scale_choice.h"
#include "qgru/runtime/artifact.h"
#include "qgru/search/range_search.h"
#include "qgru/verify/calibration_report.h"
#include "qgru/verify/html_report.h"
#include "qgru/verify/verify_report.h"

namespace qgru::python {

namespace {

using Source = std::variant<std::string, HostArray>;

// A path is read as the CLI reads it (read_array: .npy, or file.npz:key) and named by it; an array is named
// `name`.
Tensor tensor_of(const Source& input, const std::string& name, std::string& source) {
  if (const auto* path = std::get_if<std::string>(&input)) {
    source = *path;
    return read_array(*path);
  }
  source = name;
  return tensor_from_array(std::get<HostArray>(input), name);
}

// Sequence lengths [N] for data of T steps and N sequences, as --lengths reads them (a path, or an array).
std::vector<int32_t> lengths_of(const Source& input, const std::string& name, int N, int T) {
  std::string source;
  const Tensor tensor = tensor_of(input, name, source);
  return sequence_lengths_from_tensor(tensor, source, N, T);
}

std::string sha256_of_text(const std::string& text) { return sha256_hex(text.data(), text.size()); }

// A model file as the CLI's --model / --layout / --prefix / --node give it (.safetensors or .onnx, told apart
// by their first bytes).
FloatModel load_model(const std::string& path, const std::string& layout, const std::string& prefix,
                      const std::string& node) {
  FloatModel model;
  model.gru = load_float_gru(FloatModelSource{path, parse_weight_layout(layout), prefix, node});
  model.path = model.source = path;
  model.sha256 = sha256_file_hex(path);
  return model;
}

FloatModel model_from_tensors(const std::map<std::string, HostArray>& arrays, const std::string& layout,
                              const std::string& source, const std::string& prefix) {
  SafetensorsFile file;
  for (const auto& [name, array] : arrays) file.tensors[name] = tensor_from_array(array, source + ": tensor '" + name + "'");
  FloatModel model;
  model.gru = float_gru_from_tensors(file.tensors, parse_weight_layout(layout), source, prefix);
  model.source = source;
  model.sha256 = float_gru_weights_sha256(model.gru);
  return model;
}

// calibrate: one array (or file) at a time, as `qgru calibrate --data A --data B ...` observes files.
class CalibrationSession {
 public:
  CalibrationSession(const FloatModel& model, const std::string& method, double percentile, bool exclude_zeros,
                     int64_t max_samples, bool batch_first)
      : model_(model.gru) {
    options_.method = calibration_method(method, percentile);
    options_.include_zeros = !exclude_zeros;
    if (max_samples < 0) throw Error("max_samples " + std::to_string(max_samples) + " is negative (0: all)");
    options_.max_samples = max_samples;
    options_.batch_first = batch_first;
    run_.emplace(model_, options_, model.path, model.sha256);
  }
  bool wants_more() const { return run_->wants_more(); }
  void add(const Source& input, const std::string& name, const std::optional<Source>& lengths) {
    std::string source;
    const Tensor values = tensor_of(input, name, source);
    const std::string sha256 = std::holds_alternative<std::string>(input) ? sha256_file_hex(array_file_path(source))
                                                                          : sha256_hex(values.bytes.data(), values.bytes.size());
    CalibrationRun::LengthsOf lengths_of_data;
    if (lengths) lengths_of_data = [&](int N, int T) { return lengths_of(*lengths, name + " lengths", N, T); };
    nb::gil_scoped_release release;
    run_->add(values, source, sha256, lengths_of_data);
  }
  Statistics finish() const {
    Statistics stats;
    stats.stats = run_->stats();
    stats.sha256 = sha256_of_text(serialize_calibration_stats(stats.stats));
    stats.source = "statistics (in memory)";
    return stats;
  }

 private:
  FloatGruModel model_;
  CalibrateOptions options_;
  std::optional<CalibrationRun> run_;
};

Statistics load_statistics(const std::string& path) {
  Statistics stats;
  stats.stats = read_calibration_stats(path);
  stats.path = stats.source = path;
  stats.sha256 = sha256_file_hex(path);
  return stats;
}

Statistics merge_statistics(const std::vector<Statistics>& shards) {
  std::vector<CalibrationStats> all;
  std::vector<std::string> sources;
  for (const Statistics& shard : shards) {
    all.push_back(shard.stats);
    sources.push_back(shard.source);
  }
  Statistics merged;
  merged.stats = merge_calibration_stats(all, sources);
  merged.sha256 = sha256_of_text(serialize_calibration_stats(merged.stats));
  merged.source = "statistics (in memory)";
  return merged;
}

// The files statistics record as read, which nothing saved from them may replace (qgru/base/output_policy.h);
// the messages name the CLI's flags.
std::vector<CommandFile> statistics_inputs(const Statistics& stats) {
  std::vector<CommandFile> inputs;
  add_model_input(inputs, "--model", stats.stats.model_path);
  for (const CalibrationDataFile& file : stats.stats.data_files) inputs.push_back({"--data", file.path});
  return inputs;
}

// `qgru calibrate -o PATH`. Saving again to the file the statistics were read from writes the same bytes.
void save_statistics(Statistics& stats, const std::string& path) {
  check_command_files(statistics_inputs(stats), {{"-o", path}});
  const std::string text = serialize_calibration_stats(stats.stats);
  write_file_atomic(path, text);
  stats.path = stats.source = path;
  stats.sha256 = sha256_of_text(text);
}

// `qgru calibrate --merge STATS --html PATH --config CONFIG`: the calibration report of these statistics.
void write_calibration_html(const Statistics& stats, const std::string& path, const std::string& config_source) {
  std::vector<CommandFile> inputs = statistics_inputs(stats);
  inputs.push_back({"--merge", stats.path});
  inputs.push_back({"--config", bitwidth_config_file(config_source)});
  check_command_files(inputs, {{"--html", path}});
  const BitwidthConfig config = load_bitwidth_config(config_source);
  CalibrationReportOptions options;
  options.stats_sources = {stats.source};
  options.config_source = config_source;
  options.config = &config;
  write_file_atomic(path, calibration_report_html(stats.stats, options));
}

// `qgru quantize`; with the range method "search" on some tensor, the search runs first on `data` (arrays or
// files, [T, N, C] or batch-first), as `qgru quantize --data` gives it.
std::unique_ptr<Artifact> quantize(const FloatModel& model, const Statistics& stats, const std::string& config_source,
                                   const std::string& range_method, const std::vector<Source>& data, bool batch_first,
                                   const RangeSearchOptions& search_options, const std::string& scales) {
  BitwidthConfig config = load_bitwidth_config(config_source);
  if (!scales.empty()) {  // as `qgru quantize --scales` (qgru/quant/scale_choice.h)
    const std::string note = apply_scale_choice(config, parse_scale_choice(scales, "scales"),
                                                bitwidth_config_file(config_source).empty());
    if (!note.empty()) log()->info("quantize: {}", note);
  }
  const QuantizeSources sources{model.path,    model.sha256, stats.path, stats.sha256,
                                config_source, model.source, stats.source};
  check_quantize_inputs(model.gru, stats.stats, config, range_method, sources, false);
  std::optional<RangeSearchResult> search;
  nlohmann::json provenance_extra = nlohmann::json::object();
  if (!range_search_tensors(config, range_method, stats.stats.method).empty()) {
    if (data.empty()) {
      throw Error("range method 'search' needs calibration data: give data= (the arrays or files the statistics "
                  "were made from)");
    }
    std::vector<SequenceBatch> batches;
    for (size_t i = 0; i < data.size(); ++i) {
      std::string source;
      const Tensor tensor = tensor_of(data[i], "data[" + std::to_string(i) + "]", source);
      batches.push_back(sequence_input_from_tensor(tensor, source, model.gru.input_size, batch_first));
    }
    nb::gil_scoped_release release;
    search = search_ranges(model.gru, config, stats.stats, batches, range_method, search_options,
                           [](const std::string& line) { log()->info("quantize: {}", line); });
    provenance_extra["range_search"] = range_search_json(*search, search_options);
  } else if (!data.empty()) {
    throw Error("data= belongs to the range method 'search', which no tensor uses here");
  }
  std::shared_ptr<QuantizedGru> quantized;
  {
    nb::gil_scoped_release release;
    quantized = std::make_shared<QuantizedGru>(
        quantize_with_stats(model.gru, stats.stats, config, range_method, sources, searched_ranges(search)));
  }
  return std::make_unique<Artifact>(std::move(quantized), "", std::move(provenance_extra));
}

// Saving checks the two files as `qgru quantize -o` does (qgru/base/output_policy.h), against the files the
// artifact records as read: the model, the statistics and the config file. The messages name the CLI's flags.
void save_artifact(Artifact& artifact, const std::string& path) {
  const QuantProvenance& provenance = artifact.model().provenance;
  std::vector<CommandFile> inputs = {{"--stats", provenance.stats_path},
                                     {"--config", bitwidth_config_file(provenance.config_source)}};
  add_model_input(inputs, "--model", provenance.model_path);
  check_command_files(inputs, {{"-o", path}, {"-o (its tensor file)", artifact_tensor_path(path)}});
  write_artifact(path, artifact.model(), artifact.provenance_extra());
  artifact.set_path(path);
}

// The provenance keys of an artifact file beyond those the reader takes into QuantProvenance.
nlohmann::json provenance_extra_of(const std::string& json_path) {
  nlohmann::json extra = nlohmann::json::object();
  const nlohmann::json root = nlohmann::json::parse(read_file_text(json_path), nullptr, false);
  if (root.is_object() && root.contains("provenance") && root["provenance"].is_object()) {
    for (const auto& [key, value] : root["provenance"].items()) {
      if (key != "model" && key != "stats" && key != "config" && key != "quantized_by") extra[key] = value;
    }
  }
  return extra;
}

std::unique_ptr<Artifact> load_artifact(const std::string& path) {
  auto model = std::make_shared<QuantizedGru>(read_artifact(path));  // every check first
  return std::make_unique<Artifact>(std::move(model), path, provenance_extra_of(path));
}

// Report: `qgru verify`'s comparison on arrays or files.
std::unique_ptr<Report> verify(const FloatModel& model, const Artifact& artifact, const Source& x_input, const std::string& x_name,
               const std::optional<Source>& h0_input, const std::string& h0_name,
               const std::optional<Source>& lengths_input, bool batch_first) {
  std::string x_source;
  const SequenceBatch x = sequence_input_from_tensor(tensor_of(x_input, x_name, x_source), x_source,
                                                     model.gru.input_size, batch_first);
  std::vector<float> h0;
  if (h0_input) {
    std::string h0_source;
    const Tensor tensor = tensor_of(*h0_input, h0_name, h0_source);
    h0 = initial_state_from_tensor(tensor, h0_source, model.gru.num_layers * model.gru.num_directions, x.N,
                                   model.gru.hidden_size);
  }
  std::vector<int32_t> lengths;
  if (lengths_input) lengths = lengths_of(*lengths_input, "lengths", x.N, x.T);
  auto report = std::make_unique<Report>();
  {
    nb::gil_scoped_release release;
    report->report = verify_gru(model.gru, artifact.model(), x.values.data(), x.T, x.N, h0.empty() ? nullptr : h0.data(),
                                {}, lengths.empty() ? nullptr : lengths.data());
  }
  report->model = artifact.shared_model();
  report->model_name = model.source;
  report->artifact_name = artifact.source();
  report->input_name = x_source;
  add_model_input(report->inputs, "--model", model.path);
  add_artifact_input(report->inputs, "--artifact", artifact.path());
  const auto add_file = [&](const std::string& flag, const Source* input) {
    const std::string* path = input ? std::get_if<std::string>(input) : nullptr;
    if (path) report->inputs.push_back({flag, array_file_path(*path)});
  };
  add_file("--input", &x_input);
  add_file("--h0", h0_input ? &*h0_input : nullptr);
  add_file("--lengths", lengths_input ? &*lengths_input : nullptr);
  return report;
}

// The JSON `qgru verify --report` writes.
std::string report_json(const Report& report) {
  nlohmann::json json = verify_report_json(report.report);
  json["model"] = report.model_name;
  json["artifact"] = report.artifact_name;
  json["input"] = report.input_name;
  return json_text(json, 2) + "\n";
}

// `qgru verify --report PATH`: the JSON, written after the output policy's check against the report's inputs.
void write_report_json(const Report& report, const std::string& path) {
  check_command_files(report.inputs, {{"--report", path}});
  write_file_atomic(path, report_json(report));
}

void write_report_html(const Report& report, const std::string& path, const Statistics* stats) {
  std::vector<CommandFile> inputs = report.inputs;
  if (stats) inputs.push_back({"--stats", stats->path});
  check_command_files(inputs, {{"--html", path}});
  HtmlReportOptions options;
  options.model_path = report.model_name;
  options.artifact_path = report.artifact_name;
  options.input_path = report.input_name;
  if (stats) {
    check_stats_match_model(stats->stats, report.model->num_layers, report.model->num_directions,
                            report.model->input_size, report.model->hidden_size, stats->source);
    options.stats = &stats->stats;
  }
  write_verify_report_html(path, report.report, *report.model, options);
}

}  // namespace

const qgru_rt::Model& Artifact::runtime() const {
  std::lock_guard<std::mutex> lock(runtime_mutex_);
  if (!runtime_) {
    const ArtifactBytes bytes = serialize_artifact(*model_, "model.qgru.safetensors", provenance_extra_);
    try {
      runtime_ = std::make_unique<qgru_rt::Model>(bytes.json, bytes.tensors.data(), bytes.tensors.size());
    } catch (const qgru_rt::Error&) {
      throw Error(source() + ": the runtime refused the artifact: " + qgru_rt_last_error());
    }
  }
  return *runtime_;
}

void bind_toolchain(nb::module_& m) {
  nb::class_<FloatModel>(m, "FloatModel")
      .def_prop_ro("input_size", [](const FloatModel& f) { return f.gru.input_size; })
      .def_prop_ro("hidden_size", [](const FloatModel& f) { return f.gru.hidden_size; })
      .def_prop_ro("num_layers", [](const FloatModel& f) { return f.gru.num_layers; })
      .def_prop_ro("num_directions", [](const FloatModel& f) { return f.gru.num_directions; })
      .def_prop_ro("layout", [](const FloatModel& f) { return f.gru.source_layout; })
      .def_ro("path", &FloatModel::path)
      .def_ro("sha256", &FloatModel::sha256)
      .def_ro("source", &FloatModel::source);
  m.def("load_model", &load_model, nb::arg("path"), nb::arg("layout"), nb::arg("prefix"), nb::arg("node"));
  // Every tensor of a .safetensors file, read and checked by the library's reader, as NumPy arrays.
  m.def("read_tensors", [](const std::string& path) {
    nb::dict tensors;
    for (const auto& [name, tensor] : read_safetensors(path).tensors) tensors[name.c_str()] = numpy_from_tensor(tensor);
    return tensors;
  }, nb::arg("path"));
  // qgru's name of an array's dtype (F32, I8, ...; "" for one qgru has no tensor type for).
  m.def("dtype_of", [](const HostArray& array) { return dtype_text(array); }, nb::arg("array"));
  // The names, dtypes and shapes of a file's tensors, from its header alone: {name: (dtype name, shape)}.
  m.def("read_tensor_layout", [](const std::string& path) {
    std::map<std::string, std::pair<std::string, std::vector<int64_t>>> layout;
    for (const auto& [name, entry] : read_safetensors_layout(path)) layout[name] = {dtype_name(entry.dtype), entry.shape};
    return layout;
  }, nb::arg("path"));
  // metadata: the file's __metadata__ (string to string; e.g. {"format": "pt"}, which transformers writes).
  m.def("write_tensors", [](const std::string& path, const std::map<std::string, HostArray>& arrays,
                            const std::map<std::string, std::string>& metadata) {
    SafetensorsFile file;
    for (const auto& [name, array] : arrays) file.tensors[name] = tensor_from_array(array, path + ": tensor '" + name + "'");
    file.metadata = metadata;
    write_safetensors(path, file);
  }, nb::arg("path"), nb::arg("tensors"), nb::arg("metadata") = std::map<std::string, std::string>());
  // A .safetensors file written tensor by tensor (SafetensorsWriter: the caller holds one tensor at a time):
  // layout {name: (dtype name, shape)}, then write(name, array) in name order, then commit(). A BF16 tensor is
  // given as its bits in an int16 array (NumPy has no bfloat16).
  nb::class_<SafetensorsWriter>(m, "TensorFileWriter")
      .def("__init__",
           [](SafetensorsWriter* self, const std::string& path,
              const std::map<std::string, std::pair<std::string, std::vector<int64_t>>>& layout,
              const std::map<std::string, std::string>& metadata) {
             std::map<std::string, TensorLayout> tensors;
             for (const auto& [name, entry] : layout) {
               DType dtype{};
               if (!dtype_from_name(entry.first, dtype)) {
                 throw Error(path + ": tensor '" + name + "': dtype '" + entry.first + "' is not one qgru writes");
               }
               tensors[name] = {dtype, entry.second};
             }
             new (self) SafetensorsWriter(path, std::move(tensors), metadata);
           },
           nb::arg("path"), nb::arg("layout"), nb::arg("metadata"))
      .def("next_name", &SafetensorsWriter::next_name)
      .def("write",
           [](SafetensorsWriter& writer, const std::string& name, const HostArray& array, bool bf16_bits) {
             Tensor tensor = tensor_from_array(array, "tensor '" + name + "'");
             if (bf16_bits) {
               if (tensor.dtype != DType::I16) throw Error("tensor '" + name + "': BF16 bits must come as int16");
               tensor.dtype = DType::BF16;
             }
             nb::gil_scoped_release release;
             writer.write(name, tensor);
           },
           nb::arg("name"), nb::arg("array"), nb::arg("bf16_bits") = false)
      .def("commit", [](SafetensorsWriter& writer) {
        nb::gil_scoped_release release;
        writer.commit();
      });
  // A text file written as every qgru output is (qgru/base/atomic_file.h: a temporary beside it, then renamed).
  m.def("write_text", [](const std::string& path, const std::string& text) { write_file_atomic(path, text); },
        nb::arg("path"), nb::arg("text"));
  m.def("model_from_tensors", &model_from_tensors, nb::arg("tensors"), nb::arg("layout"), nb::arg("source"),
        nb::arg("prefix"));

  nb::class_<Statistics>(m, "Statistics")
      .def_ro("path", &Statistics::path)
      .def_ro("sha256", &Statistics::sha256)
      .def_ro("source", &Statistics::source)
      .def_prop_ro("num_layers", [](const Statistics& s) { return s.stats.num_layers; })
      .def_prop_ro("num_directions", [](const Statistics& s) { return s.stats.num_directions; })
      .def_prop_ro("input_size", [](const Statistics& s) { return s.stats.input_size; })
      .def_prop_ro("hidden_size", [](const Statistics& s) { return s.stats.hidden_size; })
      .def_prop_ro("method", [](const Statistics& s) { return s.stats.method; })
      .def_prop_ro("total_sequences", [](const Statistics& s) { return s.stats.total_sequences(); })
      .def("to_json", [](const Statistics& s) { return serialize_calibration_stats(s.stats); })
      .def("save", &save_statistics, nb::arg("path"))
      .def("write_html", &write_calibration_html, nb::arg("path"), nb::arg("config"));
  m.def("load_statistics", &load_statistics, nb::arg("path"));
  // `qgru calibrate`'s defaults for what the Python signature leaves as None.
  m.def("calibrate_defaults", [] {
    nb::dict defaults;
    defaults["method"] = CalibrateOptions().method;
    defaults["percentile"] = RangeMethod().percentile;
    return defaults;
  });
  m.def("merge_statistics", &merge_statistics, nb::arg("shards"));

  nb::class_<CalibrationSession>(m, "CalibrationSession")
      .def(nb::init<const FloatModel&, const std::string&, double, bool, int64_t, bool>(), nb::arg("model"),
           nb::arg("method"), nb::arg("percentile"), nb::arg("exclude_zeros"), nb::arg("max_samples"),
           nb::arg("batch_first"))
      .def_prop_ro("wants_more", &CalibrationSession::wants_more)
      .def("add", &CalibrationSession::add, nb::arg("data"), nb::arg("name"), nb::arg("lengths").none())
      .def("finish", &CalibrationSession::finish);

  nb::class_<Artifact>(m, "Artifact")
      .def_prop_ro("path", &Artifact::path)
      .def_prop_ro("source", &Artifact::source)
      .def_prop_ro("input_size", [](const Artifact& a) { return a.model().input_size; })
      .def_prop_ro("hidden_size", [](const Artifact& a) { return a.model().hidden_size; })
      .def_prop_ro("num_layers", [](const Artifact& a) { return a.model().num_layers; })
      .def_prop_ro("num_directions", [](const Artifact& a) { return a.model().num_directions; })
      .def_prop_ro("config_name", [](const Artifact& a) { return a.model().config.name; })
      .def("describe", [](const Artifact& a) { return describe_quantized_gru(a.model()); })
      .def("save", &save_artifact, nb::arg("path"))
      .def("to_bytes",
           [](const Artifact& a, const std::string& tensor_file_name) {
             const ArtifactBytes bytes = serialize_artifact(a.model(), tensor_file_name, a.provenance_extra());
             return std::make_pair(nb::bytes(bytes.json.data(), bytes.json.size()),
                                   nb::bytes(bytes.tensors.data(), bytes.tensors.size()));
           },
           nb::arg("tensor_file_name"));
  nb::class_<RangeSearchOptions>(m, "RangeSearchOptions")
      .def(nb::init<>())
      .def_rw("methods", &RangeSearchOptions::methods)
      .def_rw("max_sequences", &RangeSearchOptions::max_sequences)
      .def_rw("max_evaluations", &RangeSearchOptions::max_evaluations)
      .def_rw("max_seconds", &RangeSearchOptions::max_seconds)
      .def_rw("min_gain_db", &RangeSearchOptions::min_gain_db)
      .def_rw("suggest_widening", &RangeSearchOptions::suggest_widening)
      .def_rw("threads", &RangeSearchOptions::threads);
  m.def("quantize", &quantize, nb::arg("model"), nb::arg("stats"), nb::arg("config"), nb::arg("range_method"),
        nb::arg("data"), nb::arg("batch_first"), nb::arg("search_options"), nb::arg("scales") = "");
  m.def("load_artifact", &load_artifact, nb::arg("path"));
  m.def("artifact_tensor_path", &artifact_tensor_path, nb::arg("json_path"));
  m.def("preset_names", &bitwidth_preset_names);

  nb::class_<Report>(m, "Report")
      .def("table", [](const Report& r) { return verify_report_table(r.report); })
      .def("to_json", &report_json)
      .def("write_json", &write_report_json, nb::arg("path"))
      .def("write_html", &write_report_html, nb::arg("path"), nb::arg("stats").none());
  m.def("verify", &verify, nb::arg("model"), nb::arg("artifact"), nb::arg("x"), nb::arg("x_name"), nb::arg("h0").none(),
        nb::arg("h0_name"), nb::arg("lengths").none(), nb::arg("batch_first"));
}

}  // namespace qgru::python
