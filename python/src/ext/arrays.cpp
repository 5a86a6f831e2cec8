#include "arrays.h"

#include <climits>
#include <cstring>

#include "qgru/base/error.h"

namespace qgru::python {

namespace {

struct DTypeMatch {
  DType dtype;
  nb::dlpack::dtype dl;
};

const DTypeMatch kMatches[] = {
    {DType::F64, nb::dtype<double>()},  {DType::F32, nb::dtype<float>()},
    {DType::F16, {static_cast<uint8_t>(nb::dlpack::dtype_code::Float), 16, 1}},
    {DType::I64, nb::dtype<int64_t>()}, {DType::I32, nb::dtype<int32_t>()},
    {DType::I16, nb::dtype<int16_t>()}, {DType::I8, nb::dtype<int8_t>()},
    {DType::U8, nb::dtype<uint8_t>()},
};

const DTypeMatch* match_of(const HostArray& array) {
  for (const DTypeMatch& match : kMatches) {
    if (array.dtype() == match.dl) return &match;
  }
  return nullptr;
}

}  // namespace

std::string dtype_text(const HostArray& array) {
  const DTypeMatch* match = match_of(array);
  return match ? dtype_name(match->dtype) : "";
}

bool has_dtype(const HostArray& array, DType dtype) {
  const DTypeMatch* match = match_of(array);
  return match && match->dtype == dtype;
}

Tensor tensor_from_array(const HostArray& array, const std::string& source) {
  const DTypeMatch* match = match_of(array);
  if (!match) {
    throw Error(source + ": an array of an unsupported dtype (code " + std::to_string(array.dtype().code) + ", " +
                std::to_string(array.dtype().bits) +
                " bits); expected float64, float32, float16, int64, int32, int16, int8 or uint8");
  }
  Tensor tensor;
  tensor.dtype = match->dtype;
  for (size_t axis = 0; axis < array.ndim(); ++axis) tensor.shape.push_back(static_cast<int64_t>(array.shape(axis)));
  tensor.bytes.resize(array.nbytes());
  if (!tensor.bytes.empty()) std::memcpy(tensor.bytes.data(), array.data(), tensor.bytes.size());
  return tensor;
}

nb::object numpy_from_tensor(const Tensor& tensor) {
  if (tensor.dtype == DType::BF16) return numpy_from_tensor(Tensor::from_vector(tensor.shape, tensor_to_f32(tensor)));
  std::vector<size_t> shape(tensor.shape.begin(), tensor.shape.end());
  for (const DTypeMatch& match : kMatches) {
    if (match.dtype != tensor.dtype) continue;
    auto* owned = new std::vector<uint8_t>(tensor.bytes);
    nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<uint8_t>*>(p); });
    return nb::cast(nb::ndarray<nb::numpy>(owned->data(), shape.size(), shape.data(), owner, nullptr, match.dl));
  }
  throw Error(std::string("a tensor of dtype ") + dtype_name(tensor.dtype) + " has no NumPy dtype here");
}

int int_extent(const HostArray& array, size_t axis, const std::string& what) {
  const size_t extent = array.shape(axis);
  if (extent > static_cast<size_t>(INT_MAX)) {
    throw Error(what + ": extent " + std::to_string(extent) + " of axis " + std::to_string(axis) + " is too large");
  }
  return static_cast<int>(extent);
}

}  // namespace qgru::python
