#pragma once
// A host tensor: dtype, shape and little-endian C-order bytes. The common currency of the readers
// (safetensors, npy) and of everything that consumes their output.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "qgru/base/error.h"

namespace qgru {

// The dtypes qgru reads and writes (safetensors names in dtype_name()).
enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U8 };

inline size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::F64: case DType::I64: return 8;
    case DType::F32: case DType::I32: return 4;
    case DType::F16: case DType::BF16: case DType::I16: return 2;
    case DType::I8: case DType::U8: return 1;
  }
  return 0;
}

inline const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F64: return "F64";
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I64: return "I64";
    case DType::I32: return "I32";
    case DType::I16: return "I16";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
  }
  return "?";
}

// The dtype named `name` as dtype_name() names it; false for any other text.
inline bool dtype_from_name(const std::string& name, DType& out) {
  for (int code = 0; code <= static_cast<int>(DType::U8); ++code) {
    if (name == dtype_name(static_cast<DType>(code))) {
      out = static_cast<DType>(code);
      return true;
    }
  }
  return false;
}

template <class T> struct DTypeOf;
template <> struct DTypeOf<double> { static constexpr DType value = DType::F64; };
template <> struct DTypeOf<float> { static constexpr DType value = DType::F32; };
template <> struct DTypeOf<int64_t> { static constexpr DType value = DType::I64; };
template <> struct DTypeOf<int32_t> { static constexpr DType value = DType::I32; };
template <> struct DTypeOf<int16_t> { static constexpr DType value = DType::I16; };
template <> struct DTypeOf<int8_t> { static constexpr DType value = DType::I8; };
template <> struct DTypeOf<uint8_t> { static constexpr DType value = DType::U8; };

inline std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

// The number of elements of `shape`, exactly, into `numel`: 0 when any extent is 0, whatever the others are,
// otherwise the product of the extents. Returns false, leaving `numel` unspecified, for a negative extent or
// when the product of the non-zero extents exceeds INT64_MAX (NumPy refuses such shapes too, zero extent or
// not). Overflow contract: every partial product is formed with __builtin_mul_overflow over non-zero extents
// only, so nothing wraps, whatever the order of the extents.
inline bool shape_numel_checked(const std::vector<int64_t>& shape, int64_t& numel) {
  int64_t nonzero_product = 1;
  bool has_zero = false;
  for (int64_t extent : shape) {
    if (extent < 0) return false;
    if (extent == 0) {
      has_zero = true;
    } else if (__builtin_mul_overflow(nonzero_product, extent, &nonzero_product)) {
      return false;
    }
  }
  numel = has_zero ? 0 : nonzero_product;
  return true;
}

// The number of elements of `shape` (see shape_numel_checked); throws qgru::Error for a shape it refuses.
// The readers refuse such shapes with the file's name first, so here it only guards tensors built in code.
inline int64_t shape_numel(const std::vector<int64_t>& shape) {
  int64_t numel = 0;
  if (!shape_numel_checked(shape, numel)) {
    throw Error("internal: shape " + shape_string(shape) +
                " has a negative extent or more elements than int64 can count");
  }
  return numel;
}

struct Tensor {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // numel() * dtype_size(dtype) bytes, little-endian, C order

  int64_t numel() const { return shape_numel(shape); }
  int rank() const { return static_cast<int>(shape.size()); }

  template <class T> T* data() {
    check_type<T>();
    return reinterpret_cast<T*>(bytes.data());
  }
  template <class T> const T* data() const {
    check_type<T>();
    return reinterpret_cast<const T*>(bytes.data());
  }

  // A tensor of the given shape with values copied from `values` (size must equal the shape's product).
  template <class T> static Tensor from_vector(std::vector<int64_t> tensor_shape, const std::vector<T>& values) {
    Tensor tensor;
    tensor.dtype = DTypeOf<T>::value;
    tensor.shape = std::move(tensor_shape);
    if (static_cast<int64_t>(values.size()) != tensor.numel()) {
      throw Error("internal: tensor of shape " + shape_string(tensor.shape) + " given " +
                  std::to_string(values.size()) + " values");
    }
    tensor.bytes.resize(values.size() * sizeof(T));
    if (!values.empty()) std::memcpy(tensor.bytes.data(), values.data(), tensor.bytes.size());
    return tensor;
  }

 private:
  template <class T> void check_type() const {
    if (DTypeOf<T>::value != dtype) {
      throw Error(std::string("internal: tensor of dtype ") + dtype_name(dtype) + " accessed as " +
                  dtype_name(DTypeOf<T>::value));
    }
  }
};

// Value conversions of any dtype (F16/BF16 decoded exactly; I64 beyond 2^53 rounds for F64).
std::vector<float> tensor_to_f32(const Tensor& tensor);
std::vector<double> tensor_to_f64(const Tensor& tensor);

// Refuse a NaN or an infinity: throws qgru::Error "<prefix>element I is NaN<suffix>" (or "is infinite") for
// the first one, I its flat index. E.g. prefix "x.npy: ", suffix " (as float32); inputs must be finite".
void require_finite(const std::vector<float>& values, const std::string& prefix, const std::string& suffix);
void require_finite(const std::vector<double>& values, const std::string& prefix, const std::string& suffix);
// Integer dtypes to int64 (exact); a float tensor is refused with a message naming `what`.
std::vector<int64_t> tensor_to_i64(const Tensor& tensor, const std::string& what);

}  // namespace qgru
