// Finding a GRU's tensors by name, for the two layouts qgru reads:
//   PyTorch nn.GRU:  <prefix>weight_ih_l{k}[_reverse], weight_hh_l{k}, bias_ih_l{k}, bias_hh_l{k}
//   PyTorch nn.GRUCell: <prefix>weight_ih, weight_hh, bias_ih, bias_hh (one layer, one direction)
//   haste:           <prefix>W, R, bx, br (one layer), or W_l{k}[_reverse] ... (several layers); the
//                    prefix is empty or ends with '.'
//   haste_pytorch.GRU: <prefix>kernel, recurrent_kernel, bias, recurrent_bias (the same tensors as haste's
//                    W, R, bx, br under the module's parameter names; layer suffixes as for haste)
// Weights are required for every (layer, direction); biases are optional (zeros).
#include <algorithm>
#include <optional>
#include <regex>
#include <set>
#include <tuple>

#include "import_common.h"
#include "qgru/base/log.h"
#include "qgru/import/load_float_gru.h"

namespace qgru::model_detail {
namespace {

enum Role : int { kW = 0, kR = 1, kBw = 2, kBr = 3 };

struct KeyParts {
  std::string prefix;
  Role role = kW;
  int layer = 0;
  bool reverse = false;
  bool explicit_layer = true;  // haste's "W" and nn.GRUCell's "weight_ih" name layer 0 without a suffix
  bool module_names = false;   // haste_pytorch's "kernel", "recurrent_kernel", "bias", "recurrent_bias"
};

const char* layout_name(WeightLayout layout) { return layout == WeightLayout::Haste ? "haste" : "PyTorch"; }

std::optional<int> parse_layer(const std::string& digits) {
  if (digits.empty() || digits.size() > 6) return std::nullopt;
  return std::stoi(digits);
}

std::optional<KeyParts> parse_pytorch_key(const std::string& key) {
  static const std::regex pattern(R"(^(.*)(weight_ih|weight_hh|bias_ih|bias_hh)(?:_l([0-9]+)(_reverse)?)?$)");
  std::smatch m;
  if (!std::regex_match(key, m, pattern)) return std::nullopt;
  KeyParts parts;
  parts.prefix = m[1].str();
  const std::string role = m[2].str();
  parts.role = role == "weight_ih" ? kW : role == "weight_hh" ? kR : role == "bias_ih" ? kBw : kBr;
  parts.explicit_layer = m[3].matched;
  if (parts.explicit_layer) {
    const auto layer = parse_layer(m[3].str());
    if (!layer) return std::nullopt;
    parts.layer = *layer;
  }
  parts.reverse = m[4].matched;
  return parts;
}

std::optional<KeyParts> parse_haste_key(const std::string& key) {
  static const std::regex pattern(
      R"(^((?:.*\.)?)(W|R|bx|br|kernel|recurrent_kernel|bias|recurrent_bias)(?:_l([0-9]+))?(_reverse)?$)");
  std::smatch m;
  if (!std::regex_match(key, m, pattern)) return std::nullopt;
  KeyParts parts;
  parts.prefix = m[1].str();
  const std::string role = m[2].str();
  parts.module_names = role.size() > 2;
  parts.role = role == "W" || role == "kernel"             ? kW
               : role == "R" || role == "recurrent_kernel" ? kR
               : role == "bx" || role == "bias"            ? kBw
                                                           : kBr;
  parts.explicit_layer = m[3].matched;
  if (parts.explicit_layer) {
    const auto layer = parse_layer(m[3].str());
    if (!layer) return std::nullopt;
    parts.layer = *layer;
  }
  parts.reverse = m[4].matched;
  return parts;
}

std::optional<KeyParts> parse_key(const std::string& key, WeightLayout layout) {
  return layout == WeightLayout::Haste ? parse_haste_key(key) : parse_pytorch_key(key);
}

// The name a tensor of (role, layer, direction) has in this layout, for lookups and error messages.
std::string tensor_name(WeightLayout layout, const std::string& prefix, Role role, int layer, bool reverse,
                        bool explicit_layer, bool module_names) {
  static const char* const pytorch_roles[] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
  static const char* const haste_roles[] = {"W", "R", "bx", "br"};
  static const char* const haste_module_roles[] = {"kernel", "recurrent_kernel", "bias", "recurrent_bias"};
  std::string name = prefix;
  name += layout == WeightLayout::PyTorch ? pytorch_roles[role]
          : module_names                  ? haste_module_roles[role]
                                          : haste_roles[role];
  if (explicit_layer) name += "_l" + std::to_string(layer);
  if (reverse) name += "_reverse";
  return name;
}

bool is_weight_role(Role role) { return role == kW || role == kR; }

}  // namespace

bool has_layout_names(const std::map<std::string, Tensor>& tensors, WeightLayout layout) {
  for (const auto& entry : tensors) {
    const auto parts = parse_key(entry.first, layout);
    if (parts && is_weight_role(parts->role)) return true;
  }
  return false;
}

LayoutMatch match_layout(const std::map<std::string, Tensor>& tensors, WeightLayout layout,
                         const std::string& source, const std::string& wanted_prefix) {
  // 1. The prefix: every weight name of the layout must share one, or --prefix picks one.
  std::set<std::string> prefixes;
  for (const auto& entry : tensors) {
    const auto parts = parse_key(entry.first, layout);
    if (parts && is_weight_role(parts->role)) prefixes.insert(parts->prefix);
  }
  if (prefixes.empty()) {
    throw Error(source + ": no " + layout_name(layout) + " GRU tensors found (expected " +
                (layout == WeightLayout::Haste ? "W, R, bx, br or kernel, recurrent_kernel, bias, recurrent_bias" : "weight_ih_l0, weight_hh_l0, bias_ih_l0, bias_hh_l0") +
                ", optionally under a common prefix)");
  }
  std::string list;
  for (const auto& prefix : prefixes) list += (list.empty() ? "'" : ", '") + prefix + "'";
  if (!wanted_prefix.empty()) {
    const std::string dotted = wanted_prefix.back() == '.' ? wanted_prefix : wanted_prefix + ".";
    const bool exact = prefixes.count(wanted_prefix) > 0;
    if (!exact && prefixes.count(dotted) == 0) {
      throw Error(source + ": --prefix '" + wanted_prefix + "' holds no " + layout_name(layout) +
                  " GRU; the file's GRUs are under " + list);
    }
    prefixes = {exact ? wanted_prefix : dotted};
  }
  if (prefixes.size() > 1) {
    throw Error(source + ": GRU tensors under several prefixes (" + list + "); pick one with --prefix");
  }
  LayoutMatch match;
  match.layout = layout;
  match.prefix = *prefixes.begin();

  // 2. Every tensor of the layout under that prefix, by (role, layer, reverse); anything else is ignored.
  std::map<std::tuple<int, int, bool>, std::string> found;
  bool explicit_layer = false;
  bool module_names = false;
  int max_layer = -1;
  bool any_reverse = false;
  for (const auto& entry : tensors) {
    const auto parts = parse_key(entry.first, layout);
    if (!parts || parts->prefix != match.prefix) {
      log()->debug("{}: ignoring tensor '{}' (not a {} GRU tensor)", source, entry.first, layout_name(layout));
      continue;
    }
    const auto key = std::make_tuple(static_cast<int>(parts->role), parts->layer, parts->reverse);
    const auto inserted = found.emplace(key, entry.first);
    if (!inserted.second) {
      throw Error(source + ": tensors '" + inserted.first->second + "' and '" + entry.first +
                  "' name the same GRU parameter");
    }
    explicit_layer = explicit_layer || parts->explicit_layer;
    module_names = module_names || parts->module_names;
    if (is_weight_role(parts->role)) {
      max_layer = std::max(max_layer, parts->layer);
      any_reverse = any_reverse || parts->reverse;
    }
  }
  match.num_layers = max_layer + 1;
  match.num_directions = any_reverse ? 2 : 1;
  explicit_layer = explicit_layer || match.num_layers > 1;

  // 3. Weights are required for every cell; a bias without its cell is refused.
  auto lookup = [&](Role role, int layer, bool reverse, bool required) -> std::string {
    const auto it = found.find(std::make_tuple(static_cast<int>(role), layer, reverse));
    if (it != found.end()) return it->second;
    if (!required) return std::string();
    const std::string name = tensor_name(layout, match.prefix, role, layer, reverse, explicit_layer, module_names);
    std::string why = "the model has " + std::to_string(match.num_layers) + " layer(s)";
    if (reverse) why = "other tensors are bidirectional (_reverse): mixed directions";
    throw Error(source + ": tensor '" + name + "' missing (" + why + ")");
  };
  for (int layer = 0; layer < match.num_layers; ++layer) {
    for (int direction = 0; direction < match.num_directions; ++direction) {
      const bool reverse = direction == 1;
      CellTensorNames names;
      names.W = lookup(kW, layer, reverse, true);
      names.R = lookup(kR, layer, reverse, true);
      names.bw = lookup(kBw, layer, reverse, false);
      names.br = lookup(kBr, layer, reverse, false);
      for (const auto& [name, role] : {std::make_pair(&names.bw, kBw), std::make_pair(&names.br, kBr)}) {
        if (!name->empty()) continue;
        log()->info("{}: layer {} direction {}: no {} bias ({}): using zeros (a GRU made without biases)", source,
                    layer, direction, role == kBw ? "input" : "recurrent",
                    tensor_name(layout, match.prefix, role, layer, reverse, explicit_layer, module_names));
      }
      match.cells.push_back(names);
    }
  }
  for (const auto& entry : found) {
    const int layer = std::get<1>(entry.first);
    const bool reverse = std::get<2>(entry.first);
    if (layer >= match.num_layers || (reverse && match.num_directions == 1)) {
      throw Error(source + ": tensor '" + entry.second + "' has no weights of its layer and direction (" +
                  tensor_name(layout, match.prefix, kW, layer, reverse, explicit_layer, module_names) + " missing)");
    }
  }
  return match;
}

}  // namespace qgru::model_detail
