#include "qgru/gptq/job.h"

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <optional>
#include <set>

#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/io/strict_json.h"
#include "qgru/base/log.h"
#include "qgru/base/sha256.h"
#include "qgru/gptq/hessian.h"
#include "qgru/gptq/quantizer.h"
#include "qgru/half.h"
#include "qgru/io/npy.h"
#include "qgru/version.h"

namespace qgru::gptq {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path[0] == '/' || base_dir.empty()) return path;
  return base_dir + "/" + path;
}

const Tensor& weight_tensor(const SafetensorsFile& file, const std::string& name, const std::string& source) {
  auto it = file.tensors.find(name);
  if (it == file.tensors.end()) throw Error(source + ": tensor '" + name + "' not found");
  const Tensor& tensor = it->second;
  if (tensor.dtype != DType::F32 && tensor.dtype != DType::F16 && tensor.dtype != DType::BF16) {
    throw Error(source + ": tensor '" + name + "' has dtype " + dtype_name(tensor.dtype) +
                ", expected F32, F16 or BF16");
  }
  if (tensor.rank() != 2 || tensor.shape[0] <= 0 || tensor.shape[1] <= 0) {
    throw Error(source + ": tensor '" + name + "' has shape " + shape_string(tensor.shape) +
                ", expected a linear weight [N, K]");
  }
  require_finite(tensor_to_f32(tensor), source + ": tensor '" + name + "': ", "; GPTQ needs finite weights");
  return tensor;
}

void check_packable(const std::string& source, const std::string& name, int64_t N, int64_t K, int bits) {
  const int64_t unit = bits == 3 ? 32 : 32 / bits;
  if (K % unit != 0 || N % unit != 0) {
    throw Error(source + ": tensor '" + name + "' is [" + std::to_string(N) + ", " + std::to_string(K) + "]; " +
                std::to_string(bits) + "-bit GPTQ checkpoints need N and K multiples of " + std::to_string(unit) +
                " (codes fill whole int32 words)");
  }
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return UINT64_MAX;  // unknown: no bound beyond what allocation allows
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(pages), static_cast<uint64_t>(page_size), &bytes)) return UINT64_MAX;
  return bytes;
}

// bytes in the largest binary unit that leaves at least 1 of it (a 64×64 Hessian's 128 KiB is not "0.0 GiB").
std::string memory_text(uint64_t bytes) {
  static const char* const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024.0 && unit + 1 < sizeof units / sizeof units[0]) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  if (unit == 0) {
    std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  }
  return text;
}

}  // namespace

void JobDevice::Hessian::refuse_device_rows(const std::string& source) {
  throw Error(source + ": rows in GPU memory need a Hessian accumulated on the GPU (device cuda)");
}

void JobDevice::Hessian::add_device_rows(uintptr_t, int64_t, int64_t, uintptr_t, const std::string& source) {
  refuse_device_rows(source);
}

uint64_t hessian_bytes_needed(int64_t K, bool save_hessian) {
  // run_job's H, gptq_quantize's copy of it, the damped copy U and the Cholesky work matrix live together
  // (act-order's permuted copy replaces one of them while it exists); --save-hessian keeps one more.
  const uint64_t matrices = save_hessian ? 5 : 4;
  uint64_t bytes = 0;
  const uint64_t order = K > 0 ? static_cast<uint64_t>(K) : 0;
  if (__builtin_mul_overflow(order, order, &bytes) || __builtin_mul_overflow(bytes, matrices * sizeof(double), &bytes)) {
    return UINT64_MAX;
  }
  return bytes;
}

std::vector<LayerJob> read_manifest(const std::string& path) {
  const nlohmann::json json = parse_strict_json(read_file_text(path), path);
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? std::string() : path.substr(0, slash);
  if (!json.is_array() || json.empty()) throw Error(path + ": expected a non-empty JSON list of layers");
  std::vector<LayerJob> layers;
  for (size_t i = 0; i < json.size(); ++i) {
    const auto& entry = json[i];
    const std::string where = path + ": entry " + std::to_string(i);
    if (!entry.is_object() || !entry.contains("tensor") || !entry["tensor"].is_string()) {
      throw Error(where + ": expected an object with a string \"tensor\"");
    }
    LayerJob job;
    job.tensor = entry["tensor"].get<std::string>();
    for (size_t earlier = 0; earlier < layers.size(); ++earlier) {
      if (layers[earlier].tensor == job.tensor) {
        throw Error(where + ": tensor '" + job.tensor + "' is already listed in entry " + std::to_string(earlier) +
                    "; each layer is quantized once");
      }
    }
    if (entry.contains("activations")) {
      if (!entry["activations"].is_array() || entry["activations"].empty()) {
        throw Error(where + " ('" + job.tensor + "'): \"activations\" must be a non-empty list of .npy paths");
      }
      for (const auto& file : entry["activations"]) {
        if (!file.is_string()) throw Error(where + " ('" + job.tensor + "'): an activation path is not a string");
        job.activations.push_back(resolve(base, file.get<std::string>()));
      }
    }
    if (entry.contains("hessian")) {
      if (!entry["hessian"].is_string()) throw Error(where + " ('" + job.tensor + "'): \"hessian\" must be a path");
      job.hessian = resolve(base, entry["hessian"].get<std::string>());
    }
    if (job.activations.empty() == job.hessian.empty()) {
      throw Error(where + " ('" + job.tensor + "'): give either \"activations\" or \"hessian\"");
    }
    layers.push_back(std::move(job));
  }
  return layers;
}

QuantizeConfig checkpoint_config(const JobOptions& options) {
  QuantizeConfig config;
  config.bits = options.gptq.bits;
  config.group_size = options.gptq.group_size;
  config.damp_percent = options.gptq.damp;
  config.desc_act = options.gptq.act_order;
  config.act_group_aware = options.gptq.group_aware && !options.gptq.act_order;
  config.static_groups = options.gptq.static_groups;
  config.sym = options.gptq.sym;
  config.format = options.format;
  return config;
}

void check_output_folder(const JobOptions& options, const QuantizeConfig& wanted) {
  const std::string config_path = quantize_config_path_beside(options.output_path);
  if (access(config_path.c_str(), F_OK) != 0) return;
  QuantizeConfig existing;
  try {
    existing = read_quantize_config(config_path);
  } catch (const Error& e) {
    throw Error(config_path + ": exists and is not a GPTQ config qgru can compare (" + e.what() + "); " +
                options.output_path + " would replace it: write into another folder");
  }
  const std::string differences = config_disagreement(existing, wanted);
  if (!differences.empty()) {
    throw Error(config_path + " describes the checkpoints already in that folder (" + differences + ") and " +
                options.output_path + " would change how they are read: write it into another folder");
  }
}

std::vector<LayerReport> run_job(const JobOptions& options, const std::function<void(const LayerReport&)>& on_layer) {
  if (options.layers.empty()) throw Error("gptq: no layers to quantize");
  // GPTQModel and transformers refuse a damp_percent outside (0, 1) when they load the checkpoint.
  if (!(options.gptq.damp > 0.0 && options.gptq.damp < 1.0)) {
    char damp[32];
    std::snprintf(damp, sizeof damp, "%g", options.gptq.damp);
    throw Error(std::string("gptq: --damp ") + damp +
                " is outside (0, 1), which GPTQModel and transformers refuse in quantize_config.json");
  }
  const QuantizeConfig config = checkpoint_config(options);
  // Before the work, and again under the folder's lock when the checkpoint is written (below): another
  // writer may have put its quantize_config.json there meanwhile. A job that writes nothing has no folder.
  if (!options.output_path.empty()) check_output_folder(options, config);
  if (!options.save_hessian_path.empty() && options.layers.size() != 1) {
    throw Error("gptq: --save-hessian needs exactly one layer (use a manifest \"hessian\" per layer instead)");
  }
  const SafetensorsFile read_input = options.weights ? SafetensorsFile() : read_safetensors(options.weights_path);
  const SafetensorsFile& input = options.weights ? *options.weights : read_input;
  const std::string& source = options.weights_path;
  // Check every layer before the long work starts, the memory its K×K matrices need included: K comes from
  // a small file (a [8, 65536] F16 weight is 1 MiB and asks for 128 GiB), so it is bounded before any of
  // them is allocated.
  const uint64_t memory_bound = options.max_hessian_bytes != 0 ? options.max_hessian_bytes : physical_memory_bytes();
  std::set<std::string> seen;
  for (const LayerJob& job : options.layers) {
    if (!seen.insert(job.tensor).second) throw Error("gptq: layer '" + job.tensor + "' is listed twice");
    const Tensor& weight = weight_tensor(input, job.tensor, source);
    check_packable(source, job.tensor, weight.shape[0], weight.shape[1], options.gptq.bits);
    const uint64_t needed = hessian_bytes_needed(weight.shape[1], !options.save_hessian_path.empty());
    if (needed > memory_bound) {
      throw Error(source + ": tensor '" + job.tensor + "' is " + shape_string(weight.shape) +
                  ": GPTQ needs its K×K float64 Hessian and work copies (" +
                  (needed == UINT64_MAX ? std::string("more than 2^64 bytes") : memory_text(needed)) + " for K = " +
                  std::to_string(weight.shape[1]) + "), more than the " + memory_text(memory_bound) +
                  (options.max_hessian_bytes != 0 ? " allowed" : " of memory this machine has"));
    }
    const bool has_activations = !job.activations.empty() || options.activation_arrays.count(job.tensor) != 0;
    const int hessian_sources = (has_activations ? 1 : 0) + (job.hessian.empty() ? 0 : 1) +
                                static_cast<int>(options.hessian_arrays.count(job.tensor));
    if (hessian_sources == 0) throw Error("gptq: layer '" + job.tensor + "' has neither activations nor a Hessian");
    if (hessian_sources > 1) {
      throw Error("gptq: layer '" + job.tensor + "' is given more than one of activations, a Hessian file and a "
                  "Hessian in memory; give one");
    }
  }

  for (const LayerJob& job : options.layers) {
    const std::string prefix = layer_prefix(job.tensor);
    for (const char* suffix : {".qweight", ".qzeros", ".scales", ".g_idx"}) {
      if (input.tensors.count(prefix + suffix)) {
        throw Error(source + ": tensor '" + prefix + suffix + "' already exists; is '" + job.tensor +
                    "' already quantized?");
      }
    }
  }

  SafetensorsFile output;
  output.metadata["format"] = "pt";
  output.metadata["quantizer"] = std::string("qgru ") + QGRU_VERSION_STRING;
  if (options.weights) {
    const std::vector<uint8_t> serialized = serialize_safetensors(input);
    output.metadata["source_sha256"] = sha256_hex(serialized.data(), serialized.size());
  } else {
    output.metadata["source_sha256"] = sha256_file_hex(options.weights_path);
  }
  std::vector<LayerReport> reports;
  std::vector<double> saved_hessian;
  for (size_t index = 0; index < options.layers.size(); ++index) {
    const LayerJob& job = options.layers[index];
    const Tensor& weight = weight_tensor(input, job.tensor, source);
    LayerReport report;
    report.tensor = job.tensor;
    report.N = weight.shape[0];
    report.K = weight.shape[1];
    log()->info("gptq: [{}/{}] {} [{}, {}]", index + 1, options.layers.size(), job.tensor, report.N, report.K);

    auto start = std::chrono::steady_clock::now();
    // H_used: the layer's Hessian, either H_read (read or accumulated here) or a shared in-memory one.
    std::vector<double> H_read;
    const std::vector<double>* H_used = &H_read;
    GptqResult result;
    std::vector<double> W;
    try {  // the memory bound above is an estimate: an allocation that still fails names the layer
      const auto given = options.hessian_arrays.find(job.tensor);
      if (given != options.hessian_arrays.end()) {
        if (!given->second.H) throw Error(given->second.name + ": no Hessian matrix (for '" + job.tensor + "')");
        check_hessian(*given->second.H, report.K, given->second.name + " (Hessian of '" + job.tensor + "')");
        H_used = given->second.H.get();
        report.tokens = given->second.tokens;
      } else if (!job.hessian.empty()) {
        H_read = load_hessian(job.hessian, report.K);
      } else {
        // Each activation file is read (memory bounded by its size) and checked against K before the
        // K×K accumulator exists, so a wrong file is refused without allocating the Hessian.
        std::optional<HessianAccumulator> accumulator;
        std::unique_ptr<JobDevice::Hessian> device_accumulator;
        const auto accumulate = [&](const Tensor& activations, const std::string& name) {
          const std::string what = name + " (activations of '" + job.tensor + "')";
          check_activations(activations, report.K, options.activations_feature_major, what);
          if (options.device.hessian) {
            if (!device_accumulator) device_accumulator = options.device.hessian(report.K);
            const std::vector<float> values =
                activation_values(activations, report.K, options.activations_feature_major, what);
            const int64_t M = activations.numel() / report.K;
            device_accumulator->add(values, M, options.activations_feature_major);
            report.tokens += M;
            return;
          }
          if (!accumulator) accumulator.emplace(report.K);
          accumulator->add_tensor(activations, options.activations_feature_major, what);
          report.tokens = accumulator->tokens();
        };
        for (const std::string& path : job.activations) accumulate(read_npy(path), path);
        const auto arrays = options.activation_arrays.find(job.tensor);
        if (arrays != options.activation_arrays.end()) {
          for (const auto& [name, activations] : arrays->second) accumulate(activations, name);
        }
        H_read = device_accumulator ? device_accumulator->finish() : accumulator->hessian();
      }
      report.hessian_seconds = seconds_since(start);
      if (!options.save_hessian_path.empty()) saved_hessian = *H_used;

      W = tensor_to_f64(weight);
      start = std::chrono::steady_clock::now();
      result = options.device.quantize ? options.device.quantize(W, report.N, report.K, *H_used, options.gptq)
                                       : gptq_quantize(W, report.N, report.K, *H_used, options.gptq);
    } catch (const std::bad_alloc&) {
      throw Error(source + ": tensor '" + job.tensor + "' is " + shape_string(weight.shape) +
                  ": out of memory for its K×K Hessian and work copies (about " +
                  memory_text(hessian_bytes_needed(report.K, !options.save_hessian_path.empty())) + ")");
    }
    report.seconds = seconds_since(start);
    const std::vector<double>& H = *H_used;
    report.damp_used = result.damp_used;
    report.dead_columns = result.dead_columns;

    const std::string prefix = layer_prefix(job.tensor);
    const QuantizedLayer layer = to_checkpoint_layer(result, source + ": '" + job.tensor + "'");
    const V1FieldReaderMisreads misreads = add_layer(output, prefix, layer, options.format);
    report.zero_points_of_zero = misreads.zero_points_of_zero;
    if (misreads.zero_points_of_zero > 0) {
      const int64_t wrapped = max_code(options.gptq.bits) + 1;
      std::string neighbours;
      if (misreads.neighbours > 0) {
        neighbours = " and " + std::to_string(misreads.neighbours) + " neighbouring zero point(s) one lower";
      }
      log()->warn("gptq: {}: {} zero point(s) are 0: GPTQModel, transformers and qgru read every zero point of "
                  "this v1 file exactly, but readers that add 1 to each {}-bit field without carrying "
                  "(vLLM's gptq kernel, exllama-style kernels) read those as {}{}; --format gptq_v2 or --sym "
                  "avoids them",
                  job.tensor, misreads.zero_points_of_zero, options.gptq.bits, wrapped, neighbours);
    }
    auto bias = input.tensors.find(prefix + ".bias");
    if (bias != input.tensors.end() && prefix != job.tensor) {  // AutoGPTQ keeps the bias in fp16
      const std::vector<float> values = tensor_to_f32(bias->second);
      Tensor half;
      half.dtype = DType::F16;
      half.shape = bias->second.shape;
      half.bytes.resize(values.size() * 2);
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t bits = float_to_half_bits(values[i]);
        std::memcpy(&half.bytes[2 * i], &bits, 2);
      }
      output.tensors[prefix + ".bias"] = std::move(half);
    }

    // Errors through H = 2·X·Xᵀ: ‖D·X‖² = ½ Σ_n D[n]·H·D[n]ᵀ, Ŵ decoded from the tensors as written (the
    // clients' reading of them), not from what was meant to be written.
    const std::vector<double> W_gptq =
        dequantize(read_layer(output, prefix, options.gptq.bits, options.format, options.output_path));
    const std::vector<double> W_rtn =
        dequantize(to_checkpoint_layer(rtn_quantize(W, report.N, report.K, options.gptq), job.tensor));
    std::vector<double> D_gptq(W.size()), D_rtn(W.size());
    for (size_t i = 0; i < W.size(); ++i) {
      D_gptq[i] = W[i] - W_gptq[i];
      D_rtn[i] = W[i] - W_rtn[i];
    }
    const double energy = output_energy(W, report.N, report.K, H);
    const double denom = energy > 0.0 ? energy : 1.0;
    report.gptq_error = output_energy(D_gptq, report.N, report.K, H) / denom;
    report.rtn_error = output_energy(D_rtn, report.N, report.K, H) / denom;
    log()->info("gptq: {} done in {:.2f} s (Hessian {:.2f} s): error {:.4g} (RTN {:.4g})", job.tensor,
                report.seconds, report.hessian_seconds, report.gptq_error, report.rtn_error);
    if (on_layer) on_layer(report);
    reports.push_back(report);
  }

  if (options.keep_other_tensors) {  // the rest of the model, unchanged, so the checkpoint loads whole
    std::set<std::string> quantized;
    for (const LayerJob& job : options.layers) quantized.insert(job.tensor);
    for (const auto& [name, tensor] : input.tensors) {
      if (quantized.count(name) || output.tensors.count(name)) continue;  // quantized, or its fp16 bias
      output.tensors[name] = tensor;
    }
  }

  if (options.checkpoint) *options.checkpoint = output;
  if (options.output_path.empty()) return reports;
  AtomicFileGroup group;
  const std::vector<uint8_t> bytes = serialize_safetensors(output);
  group.add(options.output_path).write(bytes.data(), bytes.size());
  group.add(quantize_config_path_beside(options.output_path)).write(quantize_config_json(config));
  if (!options.save_hessian_path.empty()) {
    const std::vector<uint8_t> npy = serialize_npy(Tensor::from_vector<double>({reports[0].K, reports[0].K}, saved_hessian));
    group.add(options.save_hessian_path).write(npy.data(), npy.size());
  }
  group.commit_all([&] { check_output_folder(options, config); });
  return reports;
}

}  // namespace qgru::gptq
