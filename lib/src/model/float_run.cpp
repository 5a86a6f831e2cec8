#include "qgru/model/float_run.h"

#include <algorithm>
#include <chrono>

#include "qgru/base/atomic_file.h"
#include "qgru/io/npy.h"
#include "qgru/io/sequence_io.h"
#include "qgru/import/load_float_gru.h"

namespace qgru {

FloatRunSummary run_float_files(const FloatRunOptions& options) {
  FloatRunSummary summary;
  summary.model = load_float_gru(FloatModelSource{options.model_path, options.layout, options.model_prefix, options.model_node});
  const FloatGruModel& model = summary.model;
  const SequenceBatch x = read_sequence_input(options.input_path, model.input_size, options.batch_first);
  const int LD = model.num_layers * model.num_directions;
  std::vector<float> h0;
  if (!options.h0_path.empty()) h0 = read_initial_state(options.h0_path, LD, x.N, model.hidden_size);

  std::vector<int32_t> lengths;
  if (!options.lengths_path.empty()) lengths = read_sequence_lengths(options.lengths_path, x.N, x.T);
  const auto start = std::chrono::steady_clock::now();
  const float* h0_data = h0.empty() ? nullptr : h0.data();
  const int32_t* lengths_data = lengths.empty() ? nullptr : lengths.data();
  if (options.device_executor) summary.executor = options.device_executor_name;
  const FloatGruResult result = options.device_executor
                                    ? options.device_executor(model, x.values.data(), x.T, x.N, h0_data, lengths_data)
                                    : run_float_gru(model, x.values.data(), x.T, x.N, h0_data, nullptr, lengths_data);
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  summary.T = x.T;
  summary.N = x.N;

  const int F = model.num_directions * model.hidden_size;
  const Tensor y = sequence_output_tensor(result.output, x.T, x.N, F, options.batch_first);
  summary.output_shape = y.shape;
  double sum = 0.0;
  summary.min = result.output.front();
  summary.max = result.output.front();
  for (float v : result.output) {
    sum += v;
    summary.min = std::min(summary.min, static_cast<double>(v));
    summary.max = std::max(summary.max, static_cast<double>(v));
  }
  summary.mean = sum / static_cast<double>(result.output.size());

  AtomicFileGroup outputs;
  const std::vector<uint8_t> y_bytes = serialize_npy(y);
  outputs.add(options.output_path).write(y_bytes.data(), y_bytes.size());
  if (!options.hn_path.empty()) {
    const Tensor hn = Tensor::from_vector<float>({LD, x.N, model.hidden_size}, result.h_n);
    const std::vector<uint8_t> hn_bytes = serialize_npy(hn);
    outputs.add(options.hn_path).write(hn_bytes.data(), hn_bytes.size());
  }
  outputs.commit_all();
  return summary;
}

}  // namespace qgru
