// Reading a float GRU from a safetensors file (kept apart from float_gru_from_tensors so that code
// building models from tensors in memory does not need the reader).
#include "qgru/io/safetensors.h"
#include "qgru/model/float_gru.h"
#include "qgru/import/load_float_gru.h"

namespace qgru {

FloatGruModel load_float_gru(const std::string& path, WeightLayout layout) {
  const SafetensorsFile file = read_safetensors(path);
  return float_gru_from_tensors(file.tensors, layout, path);
}

}  // namespace qgru
