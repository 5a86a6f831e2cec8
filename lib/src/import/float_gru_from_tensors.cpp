// Layout choice: explicit, or detected from the tensor names.
#include "import_common.h"
#include "qgru/base/log.h"
#include "qgru/model/float_gru.h"
#include "qgru/import/load_float_gru.h"

namespace qgru {

WeightLayout parse_weight_layout(const std::string& text) {
  if (text == "auto") return WeightLayout::Auto;
  if (text == "pytorch") return WeightLayout::PyTorch;
  if (text == "haste") return WeightLayout::Haste;
  throw Error("weight layout '" + text + "': expected auto, pytorch or haste");
}

FloatGruModel float_gru_from_tensors(const std::map<std::string, Tensor>& tensors, WeightLayout layout,
                                     const std::string& source, const std::string& prefix) {
  if (layout == WeightLayout::Auto) {
    const bool pytorch = model_detail::has_layout_names(tensors, WeightLayout::PyTorch);
    const bool haste = model_detail::has_layout_names(tensors, WeightLayout::Haste);
    if (pytorch && haste) {
      throw Error(source + ": both PyTorch (weight_ih_l0 ...) and haste (W, R ...) GRU tensor names found; "
                  "choose one with --layout pytorch|haste");
    }
    if (!pytorch && !haste) {
      throw Error(source + ": no GRU tensors found (expected PyTorch nn.GRU names weight_ih_l0, weight_hh_l0, "
                  "... or haste names W, R, bx, br / kernel, recurrent_kernel, bias, recurrent_bias, optionally under a "
                  "common prefix)");
    }
    layout = pytorch ? WeightLayout::PyTorch : WeightLayout::Haste;
  }
  const model_detail::LayoutMatch match = model_detail::match_layout(tensors, layout, source, prefix);
  FloatGruModel model = model_detail::build_float_gru(tensors, match, source);
  log()->debug("{}: {} layout, prefix '{}': C = {}, H = {}, {} layer(s), {} direction(s)", source,
               model.source_layout, match.prefix, model.input_size, model.hidden_size, model.num_layers,
               model.num_directions);
  return model;
}

}  // namespace qgru
