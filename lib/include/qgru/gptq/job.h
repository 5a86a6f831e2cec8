#pragma once
// `qgru gptq` as one library call: read the float weights (safetensors, F32/F16/BF16), accumulate each layer's
// Hessian from its activation files (or load a saved one), run GPTQ and round-to-nearest, measure both, and
// write the checkpoint (safetensors + quantize_config.json beside it) atomically, all layers or nothing.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "qgru/base/tensor.h"
#include "qgru/gptq/checkpoint.h"
#include "qgru/gptq/gptq.h"

namespace qgru::gptq {

struct LayerJob {
  std::string tensor;                    // name of the [N, K] weight in the input file
  std::vector<std::string> activations;  // .npy files, [M, K] (or [..., K]); [K, M] with feature-major input
  std::string hessian;                   // instead of activations: a saved H (.npy float64 [K, K])
};

// A manifest: a JSON list of {"tensor": NAME, "activations": [paths...]} or {"tensor": NAME, "hessian": path};
// relative paths are relative to the manifest's folder.
std::vector<LayerJob> read_manifest(const std::string& path);

// Where a job's Hessians are accumulated and GPTQ runs, when not on the CPU: `qgru gptq --device cuda` fills it
// from qgru_cuda_gptq (qgru_cuda/gptq_device.h), which this library does not link. The results are the CPU
// path's algorithm on another device (docs/GPTQ.md, "On the GPU").
struct JobDevice {
  std::string name;  // "cuda": named in the log
  // A Hessian accumulator for K features: add(values, M, feature_major) takes float32 activations as
  // activation_values gives them ([M, K], or [K, M] when feature_major); finish() returns the symmetric H.
  struct Hessian {
    virtual ~Hessian() = default;
    virtual void add(const std::vector<float>& values, int64_t M, bool feature_major) = 0;
    // Rows already in the device's memory: [M, K] float32, row stride `ld` >= K elements, at `rows` (a device
    // address), written by work on `producer_stream` in __cuda_array_interface__'s convention (0: nothing to
    // wait for; 1: the legacy default stream; 2: the per-thread default stream; otherwise a cudaStream_t). The
    // accumulation waits for that stream and add_device_rows returns once the rows have been read, so the caller
    // may free or overwrite them. A device without its own memory refuses (qgru::Error, naming `source`).
    virtual void add_device_rows(uintptr_t rows, int64_t M, int64_t ld, uintptr_t producer_stream,
                                 const std::string& source);
    // The refusal of rows in GPU memory by an accumulator without device memory (the one line, naming `source`).
    [[noreturn]] static void refuse_device_rows(const std::string& source);
    virtual std::vector<double> finish() = 0;
  };
  std::function<std::unique_ptr<Hessian>(int64_t K)> hessian;
  std::function<GptqResult(const std::vector<double>& W, int64_t N, int64_t K, const std::vector<double>& H,
                           const GptqOptions& options)>
      quantize;
};

struct JobOptions {
  std::string weights_path;
  // Refused unless damp is in (0, 1) (the clients refuse other values in quantize_config.json).
  std::vector<LayerJob> layers;
  bool activations_feature_major = false;  // --activations-kmajor
  GptqOptions gptq = recommended_options();
  CheckpointFormat format = CheckpointFormat::kGptq;
  std::string output_path;                 // the .safetensors; quantize_config.json goes beside it
  std::string save_hessian_path;           // one layer only: write its H here
  bool keep_other_tensors = false;         // copy every input tensor not quantized (embeddings, norms...) as is
  // Bound on the K×K float64 matrices one layer holds at once (the Hessian, its copies and its Cholesky
  // factor: hessian_bytes_needed). A layer over it is refused, naming the tensor, before anything is
  // allocated or any activation read. 0: the machine's physical memory.
  uint64_t max_hessian_bytes = 0;
  // In memory instead of files (the Python package): when `weights` is set it is the input, and weights_path
  // only names it in messages (source_sha256 is then that of its serialized form); activation_arrays[tensor]
  // are activations of that layer like its files, each with the name messages give it (after the files). An
  // empty output_path writes nothing; `checkpoint`, when set, receives the checkpoint's tensors either way.
  const SafetensorsFile* weights = nullptr;
  std::map<std::string, std::vector<std::pair<std::string, Tensor>>> activation_arrays;
  // Instead of activations, an accumulated Hessian per layer (hessian_arrays[tensor]): the Python package's
  // qgru.Hessian, one matrix shared by the layers that read the same input (q, k and v), so a whole-model walk
  // holds K×K float64 per input group instead of every input row. Checked as a saved one is (shape, finite,
  // diagonal >= 0); a layer given one takes no activations and no "hessian" file.
  struct HessianArray {
    std::string name;                                 // names it in messages
    std::shared_ptr<const std::vector<double>> H;     // symmetric [K, K], row-major
    int64_t tokens = 0;                               // rows it was accumulated from (the report's tokens)
  };
  std::map<std::string, HessianArray> hessian_arrays;
  SafetensorsFile* checkpoint = nullptr;
  // Unset (no quantize): the CPU. Errors, the round-to-nearest baseline and the checkpoint are on the CPU either way.
  JobDevice device;
};

// Bytes of the K×K float64 matrices GPTQ holds at once for one layer of input size K (4 matrices, 5 with
// --save-hessian); UINT64_MAX when that does not fit in 64 bits.
uint64_t hessian_bytes_needed(int64_t K, bool save_hessian);

struct LayerReport {
  std::string tensor;
  int64_t N = 0, K = 0, tokens = 0;  // tokens: activation rows seen (0 when H was loaded)
  double gptq_error = 0.0;           // ‖(W − Ŵ)X‖² / ‖WX‖², Ŵ as the checkpoint stores it (fp16 scales)
  double rtn_error = 0.0;            // the same for round-to-nearest on the same grid
  double seconds = 0.0;              // GPTQ itself (Hessian accumulation excluded)
  double hessian_seconds = 0.0;
  double damp_used = 0.0;
  int64_t dead_columns = 0;
  int64_t zero_points_of_zero = 0;   // v1: zero points of 0 (exact for the clients; warned about other readers)
};

// The quantize_config.json a job writes.
QuantizeConfig checkpoint_config(const JobOptions& options);

// Runs every layer; `on_layer` is called after each (for the caller's report). Nothing is written unless
// every layer succeeds. Refused before any work when the output's folder already holds a
// quantize_config.json that disagrees with this job's (config_disagreement): it describes the checkpoints
// already there, and replacing it would change how they are read. Checked again under the folder's lock
// (FolderLock) just before the checkpoint is renamed into place, so that a config another writer put there
// during the work is never replaced either. A job with an empty output_path writes nothing and checks no
// folder.
std::vector<LayerReport> run_job(const JobOptions& options,
                                 const std::function<void(const LayerReport&)>& on_layer = nullptr);

}  // namespace qgru::gptq
