#pragma once
// Arrays across the Python boundary: NumPy arrays (or anything nanobind reads through DLPack or the buffer
// protocol, e.g. PyTorch CPU tensors) in as qgru tensors, and vectors out as NumPy arrays that own them.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "qgru/base/tensor.h"

namespace qgru::python {

namespace nb = nanobind;

// Any dtype, C-contiguous, in host memory, read only. The Python layer (qgru/_arrays.py) makes arrays
// contiguous before they get here, so nanobind never converts one on the way.
using HostArray = nb::ndarray<nb::ro, nb::c_contig, nb::device::cpu>;

// qgru's name of the array's dtype (F32, I8, ...), or "" for a dtype qgru has no tensor type for.
std::string dtype_text(const HostArray& array);
bool has_dtype(const HostArray& array, DType dtype);

// A copy of the array as a qgru tensor: float64/32/16, int64/32/16/8 or uint8; any other dtype is refused
// with a qgru::Error naming `source`.
Tensor tensor_from_array(const HostArray& array, const std::string& source);

// A NumPy array of `shape` that owns `values` (moved in, not copied).
template <class T>
nb::ndarray<nb::numpy, T> numpy_owning(std::vector<T>&& values, const std::vector<size_t>& shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

// A NumPy array holding a copy of a tensor (its dtype and shape; BF16, which NumPy lacks, as float32 values).
nb::object numpy_from_tensor(const Tensor& tensor);

// Extents of an array as ints for the C API, refusing what an int cannot hold (naming `what`).
int int_extent(const HostArray& array, size_t axis, const std::string& what);

}  // namespace qgru::python
