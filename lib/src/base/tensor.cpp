#include "qgru/base/tensor.h"

#include <cmath>

#include "qgru/half.h"

namespace qgru {
namespace {

template <class Out, class In>
void convert_all(const Tensor& tensor, std::vector<Out>& out) {
  const In* values = reinterpret_cast<const In*>(tensor.bytes.data());
  const int64_t numel = tensor.numel();
  for (int64_t i = 0; i < numel; ++i) out[static_cast<size_t>(i)] = static_cast<Out>(values[i]);
}

template <class Out>
std::vector<Out> convert_floating(const Tensor& tensor) {
  std::vector<Out> out(static_cast<size_t>(tensor.numel()));
  const auto* halves = reinterpret_cast<const uint16_t*>(tensor.bytes.data());
  switch (tensor.dtype) {
    case DType::F64: convert_all<Out, double>(tensor, out); break;
    case DType::F32: convert_all<Out, float>(tensor, out); break;
    case DType::F16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<Out>(half_bits_to_float(halves[i]));
      break;
    case DType::BF16:
      for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<Out>(bf16_bits_to_float(halves[i]));
      break;
    case DType::I64: convert_all<Out, int64_t>(tensor, out); break;
    case DType::I32: convert_all<Out, int32_t>(tensor, out); break;
    case DType::I16: convert_all<Out, int16_t>(tensor, out); break;
    case DType::I8: convert_all<Out, int8_t>(tensor, out); break;
    case DType::U8: convert_all<Out, uint8_t>(tensor, out); break;
  }
  return out;
}

}  // namespace

std::vector<float> tensor_to_f32(const Tensor& tensor) { return convert_floating<float>(tensor); }
std::vector<double> tensor_to_f64(const Tensor& tensor) { return convert_floating<double>(tensor); }

namespace {

template <class T>
void require_finite_values(const std::vector<T>& values, const std::string& prefix, const std::string& suffix) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) {
      throw Error(prefix + "element " + std::to_string(i) + " is " + (std::isnan(values[i]) ? "NaN" : "infinite") +
                  suffix);
    }
  }
}

}  // namespace

void require_finite(const std::vector<float>& values, const std::string& prefix, const std::string& suffix) {
  require_finite_values(values, prefix, suffix);
}

void require_finite(const std::vector<double>& values, const std::string& prefix, const std::string& suffix) {
  require_finite_values(values, prefix, suffix);
}

std::vector<int64_t> tensor_to_i64(const Tensor& tensor, const std::string& what) {
  std::vector<int64_t> out(static_cast<size_t>(tensor.numel()));
  switch (tensor.dtype) {
    case DType::I64: convert_all<int64_t, int64_t>(tensor, out); break;
    case DType::I32: convert_all<int64_t, int32_t>(tensor, out); break;
    case DType::I16: convert_all<int64_t, int16_t>(tensor, out); break;
    case DType::I8: convert_all<int64_t, int8_t>(tensor, out); break;
    case DType::U8: convert_all<int64_t, uint8_t>(tensor, out); break;
    default:
      throw Error(what + ": expected an integer dtype (I64, I32, I16, I8, U8), got " + dtype_name(tensor.dtype));
  }
  return out;
}

}  // namespace qgru
