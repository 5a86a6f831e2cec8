// The symbolic layout of a GRU layer's output on its way to the next layer (qgru/import/onnx_layer_link.h).
#include "qgru/import/onnx_layer_link.h"

#include <algorithm>
#include <cstdlib>

namespace qgru::onnx_link {
namespace {

const char* axis_name(Axis axis) {
  switch (axis) {
    case Axis::T: return "T";
    case Axis::D: return "D";
    case Axis::N: return "N";
    case Axis::H: return "H";
  }
  return "?";
}

std::string ints_text(const std::vector<int64_t>& values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

std::string op_text(const LayoutOp& op) { return op.op_type + " '" + op.name + "'"; }

constexpr size_t kMaxHypotheses = 64;

// Drops the axes `sizes` says are 1 from every dimension.
void drop_unit_axes(SymbolicTensor& tensor, const AxisSizes& sizes) {
  for (auto& dim : tensor.dims) {
    dim.erase(std::remove_if(dim.begin(), dim.end(), [&](Axis a) { return sizes.of(a) == 1; }), dim.end());
  }
}

// A negative axis counts from the end (ONNX); false when it is outside [-rank, rank).
bool normalize_axis(int64_t& axis, size_t rank) {
  const int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return false;
  if (axis < 0) axis += r;
  return true;
}

// The product of the dimension's axis sizes, or -1 when one is unknown (or the product overflows int64:
// constants in a graph are untrusted).
int64_t known_size(const std::vector<Axis>& dim, const AxisSizes& sizes) {
  int64_t product = 1;
  for (Axis a : dim) {
    if (sizes.of(a) < 0 || __builtin_mul_overflow(product, sizes.of(a), &product)) return -1;
  }
  return product;
}

// One way a Reshape's shape splits the axes: the dimensions made so far, how many axes of the flat list they
// took, and the sizes bound on the way (an unknown axis bound to 1 is taken as an empty part).
struct Split {
  std::vector<std::vector<Axis>> dims;
  size_t taken = 0;
  AxisSizes sizes;
};

// Every way the axes flat[at..] can start with one dimension of `size` (a positive constant): known axes
// multiply up to it; an unknown axis is bound to what is left of it, or to 1.
void take_constant(const std::vector<Axis>& flat, size_t at, int64_t size, int64_t product, std::vector<Axis> dim,
                   const AxisSizes& sizes, std::vector<std::pair<std::vector<Axis>, std::pair<size_t, AxisSizes>>>& out) {
  // Full: stop. (An unknown axis that follows could also be 1 here; it is left to the next dimension, which
  // can take it as 1 just as well, so that one layout is not counted as two.)
  if (product == size) {
    out.push_back({dim, {at, sizes}});
    return;
  }
  if (at == flat.size()) return;
  const Axis next = flat[at];
  const int64_t next_size = sizes.of(next);
  if (next_size > 0) {
    // product · next_size <= size <= 2^63 - 1: size is a shape constant, product divides it.
    if (next_size <= size / product && size % (product * next_size) == 0) {
      std::vector<Axis> longer = dim;
      longer.push_back(next);
      take_constant(flat, at + 1, size, product * next_size, longer, sizes, out);
    }
    return;
  }
  AxisSizes unit = sizes;  // the unknown axis is 1: it takes no room
  unit.set(next, 1);
  take_constant(flat, at + 1, size, product, dim, unit, out);
  if (size % product == 0 && size / product > 1) {
    AxisSizes bound = sizes;
    bound.set(next, size / product);
    std::vector<Axis> longer = dim;
    longer.push_back(next);
    take_constant(flat, at + 1, size, size, longer, bound, out);
  }
}

// `split` followed by each way the next dimension of `size` can be taken.
void take_dimension(const std::vector<Axis>& flat, const Split& split, int64_t size, std::vector<Split>& out) {
  std::vector<std::pair<std::vector<Axis>, std::pair<size_t, AxisSizes>>> ways;
  take_constant(flat, split.taken, size, 1, {}, split.sizes, ways);
  for (const auto& [dim, rest] : ways) {
    Split longer = split;
    longer.dims.push_back(dim);
    longer.taken = rest.first;
    longer.sizes = rest.second;
    out.push_back(longer);
  }
}

// Every way the dimensions `shape` (constants, or 0: a copy of the input's dimension `copy_of[i]`) take a
// prefix of `flat`, starting from `start`.
std::vector<Split> take_prefix(const std::vector<Axis>& flat, const std::vector<int64_t>& shape,
                               const std::vector<const std::vector<Axis>*>& copy_of, const Split& start) {
  std::vector<Split> splits = {start};
  for (size_t i = 0; i < shape.size(); ++i) {
    std::vector<Split> next;
    for (const Split& split : splits) {
      if (shape[i] == 0) {
        // A copy of the input dimension: the same size. When its axes are all known it is that constant;
        // otherwise the same axes must come next.
        const std::vector<Axis>& source = *copy_of[i];
        const int64_t size = known_size(source, split.sizes);
        if (size < 0) {
          if (split.taken + source.size() <= flat.size() &&
              std::equal(source.begin(), source.end(), flat.begin() + static_cast<std::ptrdiff_t>(split.taken))) {
            Split longer = split;
            longer.dims.push_back(source);
            longer.taken += source.size();
            next.push_back(longer);
          }
          continue;
        }
        if (size == 0) continue;
        take_dimension(flat, split, size, next);
        continue;
      }
      take_dimension(flat, split, shape[i], next);
    }
    splits.swap(next);
  }
  return splits;
}

bool same_sizes(const AxisSizes& a, const AxisSizes& b) { return a.T == b.T && a.D == b.D && a.N == b.N && a.H == b.H; }

std::string reshape(const LayoutOp& op, const Hypothesis& in, std::vector<Hypothesis>& out) {
  const SymbolicTensor& tensor = in.tensor;
  const std::string what = op_text(op) + " to " + ints_text(op.ints);
  if (!op.has_ints) return what + ": its shape is not a constant";
  const std::vector<int64_t>& shape = op.ints;
  std::vector<const std::vector<Axis>*> copy_of(shape.size(), nullptr);
  size_t wildcards = 0, wildcard = shape.size();
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < -1) return what + ": a dimension below -1";
    if (shape[i] == -1) {
      ++wildcards;
      wildcard = i;
    }
    if (shape[i] == 0 && op.allowzero) return what + ": allowzero makes a dimension of size 0";
    if (shape[i] == 0) {
      if (i >= tensor.dims.size()) return what + ": its 0 at " + std::to_string(i) + " copies no input dimension";
      copy_of[i] = &tensor.dims[i];
    }
  }
  if (wildcards > 1) return what + ": more than one -1";
  std::vector<Axis> flat;
  for (const auto& dim : tensor.dims) flat.insert(flat.end(), dim.begin(), dim.end());

  Split start;
  start.sizes = in.sizes;
  std::vector<Split> results;
  if (wildcards == 0) {
    for (Split& split : take_prefix(flat, shape, copy_of, start)) {
      // Whatever is left must be unknown axes of size 1.
      bool rest_unit = true;
      for (size_t i = split.taken; i < flat.size() && rest_unit; ++i) {
        if (split.sizes.of(flat[i]) > 1) rest_unit = false;
        if (split.sizes.of(flat[i]) < 0) split.sizes.set(flat[i], 1);
      }
      if (rest_unit) results.push_back(split);
    }
  } else {
    // The dimensions before the -1 take a prefix, those after it a suffix (taken from the reversed list), and
    // the -1 the axes in between.
    const std::vector<int64_t> left(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(wildcard));
    const std::vector<const std::vector<Axis>*> left_copy(copy_of.begin(), copy_of.begin() + static_cast<std::ptrdiff_t>(wildcard));
    std::vector<int64_t> right(shape.begin() + static_cast<std::ptrdiff_t>(wildcard) + 1, shape.end());
    std::vector<const std::vector<Axis>*> right_copy(copy_of.begin() + static_cast<std::ptrdiff_t>(wildcard) + 1, copy_of.end());
    std::reverse(right.begin(), right.end());
    std::reverse(right_copy.begin(), right_copy.end());
    std::vector<std::vector<Axis>> reversed_copies;  // a copied dimension's axes, reversed with the list
    reversed_copies.reserve(right_copy.size());
    for (auto& source : right_copy) {
      if (source == nullptr) continue;
      reversed_copies.emplace_back(source->rbegin(), source->rend());
      source = &reversed_copies.back();
    }
    for (const Split& head : take_prefix(flat, left, left_copy, start)) {
      std::vector<Axis> rest(flat.begin() + static_cast<std::ptrdiff_t>(head.taken), flat.end());
      std::reverse(rest.begin(), rest.end());
      Split from_end;
      from_end.sizes = head.sizes;
      for (const Split& tail : take_prefix(rest, right, right_copy, from_end)) {
        Split whole;
        whole.sizes = tail.sizes;
        whole.dims = head.dims;
        std::vector<Axis> middle(rest.begin() + static_cast<std::ptrdiff_t>(tail.taken), rest.end());
        std::reverse(middle.begin(), middle.end());
        whole.dims.push_back(middle);
        for (auto it = tail.dims.rbegin(); it != tail.dims.rend(); ++it) {
          whole.dims.emplace_back(it->rbegin(), it->rend());
        }
        results.push_back(whole);
      }
    }
  }
  // Different splits that come to the same tensor (an axis of size 1 taken here or there) are one.
  std::vector<Split> distinct;
  for (Split& split : results) {
    SymbolicTensor t{split.dims};
    drop_unit_axes(t, split.sizes);
    split.dims = t.dims;
    const bool seen = std::any_of(distinct.begin(), distinct.end(), [&](const Split& d) {
      return d.dims == split.dims && same_sizes(d.sizes, split.sizes);
    });
    if (!seen) distinct.push_back(split);
  }
  if (distinct.empty()) return what + ": the shape does not fit " + shape_text(tensor);
  for (const Split& split : distinct) out.push_back({SymbolicTensor{split.dims}, split.sizes});
  return "";
}

// The ops that have one result whatever T and N are.
std::string apply_one(const LayoutOp& op, SymbolicTensor& tensor, const AxisSizes& sizes);

}  // namespace

int64_t AxisSizes::of(Axis axis) const {
  switch (axis) {
    case Axis::T: return T;
    case Axis::D: return D;
    case Axis::N: return N;
    case Axis::H: return H;
  }
  return -1;
}

void AxisSizes::set(Axis axis, int64_t size) {
  switch (axis) {
    case Axis::T: T = size; break;
    case Axis::D: D = size; break;
    case Axis::N: N = size; break;
    case Axis::H: H = size; break;
  }
}

bool is_layout_op(const std::string& op_type) {
  return op_type == "Identity" || op_type == "Squeeze" || op_type == "Unsqueeze" || op_type == "Transpose" ||
         op_type == "Reshape" || op_type == "Flatten";
}

std::vector<Hypothesis> gru_output(const AxisSizes& sizes) {
  SymbolicTensor y{{{Axis::T}, {Axis::D}, {Axis::N}, {Axis::H}}};
  drop_unit_axes(y, sizes);
  return {{y, sizes}};
}

std::string apply_layout_op(const LayoutOp& op, std::vector<Hypothesis>& hypotheses) {
  std::vector<Hypothesis> next;
  std::string first_problem;
  for (const Hypothesis& h : hypotheses) {
    std::string problem;
    if (op.op_type == "Reshape") {
      problem = reshape(op, h, next);
    } else {
      Hypothesis moved = h;
      problem = apply_one(op, moved.tensor, moved.sizes);
      if (problem.empty()) next.push_back(moved);
    }
    if (first_problem.empty()) first_problem = problem;
  }
  if (next.empty()) return first_problem;
  if (next.size() > kMaxHypotheses) return op_text(op) + ": the layout has too many readings to follow";
  hypotheses.swap(next);
  return "";
}

namespace {

std::string apply_one(const LayoutOp& op, SymbolicTensor& tensor, const AxisSizes& sizes) {
  const size_t rank = tensor.dims.size();
  if (op.op_type == "Identity") return "";
  if (op.op_type == "Transpose") {
    std::vector<int64_t> perm = op.ints;
    if (!op.has_ints) {
      for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
    }
    std::vector<int64_t> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) {
      if (sorted.size() != rank || sorted[i] != static_cast<int64_t>(i)) {
        return op_text(op) + ": perm " + ints_text(perm) + " is not a permutation of " + std::to_string(rank) + " axes";
      }
    }
    SymbolicTensor out;
    for (int64_t p : perm) out.dims.push_back(tensor.dims[static_cast<size_t>(p)]);
    tensor = out;
    return "";
  }
  if (op.op_type == "Squeeze") {
    std::vector<bool> remove(rank, false);
    if (!op.has_ints || op.ints.empty()) {
      // Every dimension of size 1 at run time: one that holds T or N would go too when it is 1.
      for (size_t i = 0; i < rank; ++i) {
        if (known_size(tensor.dims[i], sizes) < 0) {
          return op_text(op) + " without axes on " + shape_text(tensor) + ": it would also remove a T or N of 1";
        }
        remove[i] = tensor.dims[i].empty();
      }
    }
    for (int64_t axis : op.ints) {
      if (!normalize_axis(axis, rank)) return op_text(op) + ": axis " + std::to_string(axis) + " outside " + shape_text(tensor);
      if (!tensor.dims[static_cast<size_t>(axis)].empty()) {
        return op_text(op) + ": axis " + std::to_string(axis) + " of " + shape_text(tensor) + " is not of size 1";
      }
      remove[static_cast<size_t>(axis)] = true;
    }
    SymbolicTensor out;
    for (size_t i = 0; i < rank; ++i) {
      if (!remove[i]) out.dims.push_back(tensor.dims[i]);
    }
    tensor = out;
    return "";
  }
  if (op.op_type == "Unsqueeze") {
    const size_t out_rank = rank + op.ints.size();
    std::vector<bool> inserted(out_rank, false);
    if (!op.has_ints || op.ints.empty()) return op_text(op) + ": no axes";
    for (int64_t axis : op.ints) {
      if (!normalize_axis(axis, out_rank) || inserted[static_cast<size_t>(axis)]) {
        return op_text(op) + ": axes " + ints_text(op.ints) + " do not fit " + shape_text(tensor);
      }
      inserted[static_cast<size_t>(axis)] = true;
    }
    SymbolicTensor out;
    size_t from = 0;
    for (size_t i = 0; i < out_rank; ++i) out.dims.push_back(inserted[i] ? std::vector<Axis>{} : tensor.dims[from++]);
    tensor = out;
    return "";
  }
  if (op.op_type == "Flatten") {
    int64_t axis = op.has_ints && !op.ints.empty() ? op.ints[0] : 1;
    if (axis != static_cast<int64_t>(rank) && !normalize_axis(axis, rank)) {
      return op_text(op) + ": axis " + std::to_string(axis) + " outside " + shape_text(tensor);
    }
    SymbolicTensor out{{{}, {}}};
    for (size_t i = 0; i < rank; ++i) {
      auto& part = out.dims[static_cast<int64_t>(i) < axis ? 0 : 1];
      part.insert(part.end(), tensor.dims[i].begin(), tensor.dims[i].end());
    }
    tensor = out;
    return "";
  }
  return op_text(op) + " is not a layout op (Identity, Squeeze, Unsqueeze, Transpose, Reshape, Flatten)";
}

}  // namespace

std::string next_layer_input_problem(const std::vector<Hypothesis>& hypotheses, AxisSizes* bound) {
  std::string arrives;
  SymbolicTensor want;
  for (const Hypothesis& h : hypotheses) {
    want = SymbolicTensor{{{Axis::T}, {Axis::N}, {Axis::D, Axis::H}}};
    drop_unit_axes(want, h.sizes);
    if (h.tensor.dims == want.dims) {
      if (bound != nullptr) *bound = h.sizes;
      return "";
    }
    arrives += (arrives.empty() ? "" : " or ") + shape_text(h.tensor);
  }
  if (hypotheses.empty()) return "no layout";
  AxisSizes generic;  // T and N as unknown, for the text
  generic.D = hypotheses[0].sizes.D;
  generic.H = hypotheses[0].sizes.H;
  want = SymbolicTensor{{{Axis::T}, {Axis::N}, {Axis::D, Axis::H}}};
  drop_unit_axes(want, generic);
  return "the layer's output arrives as " + arrives + ", not X = " + shape_text(want) + " (D = " +
         std::to_string(generic.D) + ", H = " + std::to_string(generic.H) + ")";
}

std::string shape_text(const SymbolicTensor& tensor) {
  std::string text = "[";
  for (size_t i = 0; i < tensor.dims.size(); ++i) {
    std::string dim;
    for (Axis a : tensor.dims[i]) dim += (dim.empty() ? "" : "·") + std::string(axis_name(a));
    text += (i ? ", " : "") + (dim.empty() ? std::string("1") : dim);
  }
  return text + "]";
}

}  // namespace qgru::onnx_link
