// libFuzzer target: the ONNX GRU importer (qgru::onnx_gru_from_bytes) on arbitrary bytes: the protobuf parse,
// the graph walk, stack chaining and the weights' conversion. External data is refused here (no model folder).
#include "fuzz_common.h"
#include "qgru/import/onnx_gru.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return qgru::fuzz::run_one([&] {
    const qgru::OnnxGraphGrus grus = qgru::inspect_onnx_gru_bytes(data, size, "fuzz.onnx", "");
    (void)qgru::describe_onnx_grus(grus);
    const qgru::FloatGruModel model = qgru::onnx_gru_from_bytes(data, size, "fuzz.onnx", "", "");
    // Every accepted model has the sizes it claims.
    const size_t H = static_cast<size_t>(model.hidden_size);
    for (const qgru::GruCellWeights& cell : model.cells) {
      if (cell.W.size() != 3 * H * static_cast<size_t>(cell.input_size) || cell.R.size() != 3 * H * H) __builtin_trap();
    }
  });
}
