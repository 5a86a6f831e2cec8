// Built against the INSTALLED package with find_package(qgru CONFIG) and qgru::runtime (test/install/
// consume.sh): the C++ wrapper opens the artifact from memory, streams x [T, N, C] (float32 .npy) through a
// state of N streams with the float step, frames in chunks of 1, 2 and 3, and compares each dequantized output
// with `qgru run --codes` ([T, N, H] int32 .npy) dequantized by the header's rule. Exit 0 when all are equal.
#include <qgru/qgru_runtime.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "npy_file.h"

static std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  npy_array x, want;
  if (!npy_read(argv[2], &x) || !npy_read(argv[3], &want)) return 1;
  const std::string json_path = argv[1];
  const std::string tensors = slurp(json_path.substr(0, json_path.size() - 5) + ".safetensors");
  try {
    const qgru_rt::Model model(slurp(json_path), tensors.data(), tensors.size());
    const qgru_rt::Context context(model);
    const qgru_rt_shape shape = model.shape();
    const qgru_rt_quant hq = model.quant(QGRU_RT_TENSOR_H, shape.num_layers - 1, 0);
    const long T = x.shape[0], N = x.shape[1], C = shape.input_size, H = shape.hidden_size;
    qgru_rt::State state(context, static_cast<int>(N));
    std::vector<float> y(static_cast<size_t>(T * N * H));
    for (long t = 0, chunk = 1; t < T; t += chunk, chunk = chunk % 3 + 1) {
      const long frames = std::min(chunk, T - t);
      state.step(static_cast<const float*>(x.data) + t * N * C, static_cast<int>(frames), y.data() + t * N * H);
    }
    long mismatches = 0;
    for (long i = 0; i < T * N * H; ++i) {
      const int32_t code = static_cast<const int32_t*>(want.data)[i];
      mismatches += y[static_cast<size_t>(i)] != static_cast<float>(static_cast<double>(code - hq.zero_point) * hq.scale);
    }
    std::printf("consume.cpp (%s): %ld frames x %ld streams streamed, %ld values differ from qgru run --codes\n",
                context.describe().c_str(), T, N, mismatches);
    std::free(x.data);
    std::free(want.data);
    return mismatches == 0 && T > 0 ? 0 : 1;
  } catch (const qgru_rt::Error& e) {
    std::fprintf(stderr, "consume.cpp: %s\n", e.what());
    return 1;
  }
}
