// The float-equivalent of a quantized GRU (qgru/export/dequantized_gru.h).
#include "qgru/export/dequantized_gru.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "qgru/base/error.h"

namespace qgru {
namespace {

// The newest artifact version whose cell variants the export knows: version 1 holds linear_before_reset = 1 cells
// only, version 2 names the cell in its "linear_before_reset" (qgru/runtime/artifact.h). Deliberately not
// kArtifactVersion: a later format may add a variant, and the export must be taught it (dequantized_float_gru's
// linear_before_reset) before it writes such an artifact.
constexpr int kExportableArtifactVersion = 2;

// code · 2^-shift as float32. Exact for |code| < 2^24 and a result inside float32's normal range, which the
// artifact reader guarantees (16-bit codes, shifts in [-80, 80]); anything else is an internal error, never a
// silently rounded weight.
float exact_dequantized(int32_t code, int32_t shift, const char* tensor, int layer, int direction, size_t index) {
  const double value = std::ldexp(static_cast<double>(code), -shift);
  const float as_float = static_cast<float>(value);
  if (static_cast<double>(as_float) != value || (value != 0.0 && std::fabs(as_float) < 1.17549435e-38f)) {
    throw Error(std::string("internal: ") + tensor + " of cell (layer " + std::to_string(layer) + ", direction " +
                std::to_string(direction) + ") element " + std::to_string(index) + ": code " + std::to_string(code) +
                " at shift " + std::to_string(shift) + " is not exactly a float32");
  }
  return as_float;
}

// Per output channel c (row of `columns` values): code · 2^-shifts[c].
std::vector<float> dequantize_rows(const std::vector<int32_t>& codes, const std::vector<int32_t>& shifts, size_t columns,
                                   const char* tensor, int layer, int direction) {
  std::vector<float> values(codes.size());
  for (size_t i = 0; i < codes.size(); ++i) {
    values[i] = exact_dequantized(codes[i], shifts.at(i / columns), tensor, layer, direction, i);
  }
  return values;
}

}  // namespace

FloatGruModel dequantized_float_gru(const QuantizedGru& model) {
  FloatGruModel result;
  result.input_size = model.input_size;
  result.hidden_size = model.hidden_size;
  result.num_layers = model.num_layers;
  result.num_directions = model.num_directions;
  result.source_layout = "qgru artifact";
  result.linear_before_reset = model.linear_before_reset();  // the artifact's cell (require_exportable_cell_variant)
  for (const GruCellQuantParams& p : model.cells) {
    if (p.multiplier_scales) {  // code · 2^-shift would drop the mantissa (require_exportable_cell_variant says so first)
      throw Error("export: layer " + std::to_string(p.layer) + " direction " + std::to_string(p.direction) +
                  " has multiplier scales (docs/FIXED_POINT.md §1a); only power-of-two artifacts are exported");
    }
    GruCellWeights cell;
    cell.input_size = p.input_size;
    cell.hidden_size = p.hidden_size;
    cell.W = dequantize_rows(p.q_W, p.shift_W, static_cast<size_t>(p.input_size), "W", p.layer, p.direction);
    cell.R = dequantize_rows(p.q_R, p.shift_R, static_cast<size_t>(p.hidden_size), "R", p.layer, p.direction);
    cell.bw = dequantize_rows(p.q_bw, p.shift_bw, 1, "bw", p.layer, p.direction);
    cell.br = dequantize_rows(p.q_br, p.shift_br, 1, "br", p.layer, p.direction);
    result.cells.push_back(std::move(cell));
  }
  return result;
}

void require_exportable_cell_variant(const std::string& json_text, const std::string& source) {
  const nlohmann::json root = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object()) return;  // read_artifact says what is wrong with it
  // A key naming the cell, wherever a later artifact version may put it; the one the format has (version 2's
  // top-level boolean "linear_before_reset", checked against the version by read_artifact) is known.
  for (const char* key : {"cell", "cell_variant", "linear_before_reset"}) {
    for (const nlohmann::json* object : {&root, root.contains("shapes") ? &root["shapes"] : nullptr}) {
      if (object == nullptr || !object->is_object() || !object->contains(key)) continue;
      if (object == &root && std::string(key) == "linear_before_reset" && (*object)[key].is_boolean()) continue;
      throw Error(source + ": the artifact's cell variant (" + key + " = " + (*object)[key].dump() +
                  ") is not one this qgru exports: export --onnx writes the cells of artifact versions 1 and " +
                  std::to_string(kExportableArtifactVersion) + " (linear_before_reset = 1 or 0) only");
    }
  }
  if (root.contains("scales") && root["scales"] == "multiplier") {  // docs/FIXED_POINT.md §1a, artifact version 3
    throw Error(source + ": a multiplier-scale artifact (real scales, version 3) is not exported: export --onnx writes "
                "weights on power-of-two grids only; quantize with a power-of-two config to export");
  }
  if (root.contains("version") && root["version"].is_number_integer() && root["version"].get<int64_t>() > kExportableArtifactVersion) {
    throw Error(source + ": artifact version " + root["version"].dump() + " may hold a cell variant this qgru does not "
                "know; export --onnx writes the cells of artifact versions 1 and " +
                std::to_string(kExportableArtifactVersion) + " only");
  }
}

}  // namespace qgru
