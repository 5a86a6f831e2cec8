#include "qgru/gptq/pack.h"

#include "qgru/base/error.h"
#include "qgru/gptq/quantizer.h"

namespace qgru::gptq {

const char* format_name(CheckpointFormat format) {
  return format == CheckpointFormat::kGptq ? "gptq" : "gptq_v2";
}

CheckpointFormat parse_format(const std::string& name) {
  if (name == "gptq") return CheckpointFormat::kGptq;
  if (name == "gptq_v2") return CheckpointFormat::kGptqV2;
  throw Error("gptq: checkpoint format '" + name + "' is not supported, expected gptq or gptq_v2");
}

void put_code(uint32_t* words, int64_t word_stride, int64_t index, int bits, uint32_t code) {
  const int64_t bit = index * bits;
  const int64_t word = bit / 32;
  const int shift = static_cast<int>(bit % 32);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  const uint64_t placed = (static_cast<uint64_t>(code) & mask) << shift;  // up to 39 bits: two words
  words[word * word_stride] |= static_cast<uint32_t>(placed);
  if (shift + bits > 32) words[(word + 1) * word_stride] |= static_cast<uint32_t>(placed >> 32);
}

uint32_t get_code(const uint32_t* words, int64_t word_stride, int64_t index, int bits) {
  const int64_t bit = index * bits;
  const int64_t word = bit / 32;
  const int shift = static_cast<int>(bit % 32);
  uint64_t value = words[word * word_stride];
  if (shift + bits > 32) value |= static_cast<uint64_t>(words[(word + 1) * word_stride]) << 32;
  return static_cast<uint32_t>((value >> shift) & ((uint64_t{1} << bits) - 1));
}

namespace {

void check_stream(int64_t count, int bits, const std::string& what, const char* axis) {
  check_bits(bits);
  if (count <= 0 || (count * bits) % 32 != 0) {
    throw Error(what + ": " + axis + " = " + std::to_string(count) + " codes of " + std::to_string(bits) +
                " bits do not fill whole int32 words; expected " + axis + " to be a multiple of " +
                std::to_string(bits == 3 ? 32 : 32 / bits));
  }
}

}  // namespace

std::vector<int32_t> pack_qweight(const std::vector<int32_t>& codes, int64_t N, int64_t K, int bits,
                                  const std::string& what) {
  check_stream(K, bits, what, "K (input features)");
  const int64_t rows = K * bits / 32;
  std::vector<int32_t> packed(static_cast<size_t>(rows * N), 0);
  auto* words = reinterpret_cast<uint32_t*>(packed.data());
  const int64_t maxq = max_code(bits);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int32_t code = codes[static_cast<size_t>(n * K + k)];
      if (code < 0 || code > maxq) throw Error(what + ": code " + std::to_string(code) + " out of range");
      put_code(words + n, N, k, bits, static_cast<uint32_t>(code));
    }
  }
  return packed;
}

std::vector<int32_t> unpack_qweight(const std::vector<int32_t>& qweight, int64_t N, int64_t K, int bits) {
  check_stream(K, bits, "qweight", "K (input features)");
  std::vector<int32_t> codes(static_cast<size_t>(N * K));
  const auto* words = reinterpret_cast<const uint32_t*>(qweight.data());
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      codes[static_cast<size_t>(n * K + k)] = static_cast<int32_t>(get_code(words + n, N, k, bits));
    }
  }
  return codes;
}

std::vector<int32_t> pack_qzeros(const std::vector<int32_t>& zeros, int64_t G, int64_t N, int bits,
                                 CheckpointFormat format, int64_t* unrepresentable, const std::string& what) {
  check_stream(N, bits, what, "N (output features)");
  const int64_t cols = N * bits / 32;
  const int64_t maxq = max_code(bits);
  std::vector<int32_t> packed(static_cast<size_t>(G * cols), 0);
  auto* words = reinterpret_cast<uint32_t*>(packed.data());
  int64_t lost = 0;
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t n = 0; n < N; ++n) {
      int64_t stored = zeros[static_cast<size_t>(g * N + n)];
      if (stored < 0 || stored > maxq) throw Error(what + ": zero point " + std::to_string(stored) + " out of range");
      if (format == CheckpointFormat::kGptq) {
        if (stored == 0) ++lost;
        stored = (stored - 1) & maxq;  // masked, so a wrapped value cannot spill into its neighbours
      }
      put_code(words + g * cols, 1, n, bits, static_cast<uint32_t>(stored));
    }
  }
  if (unrepresentable) *unrepresentable = lost;
  return packed;
}

std::vector<int32_t> unpack_qzeros(const std::vector<int32_t>& qzeros, int64_t G, int64_t N, int bits,
                                   CheckpointFormat format) {
  check_stream(N, bits, "qzeros", "N (output features)");
  const int64_t cols = N * bits / 32;
  std::vector<int32_t> zeros(static_cast<size_t>(G * N));
  const auto* words = reinterpret_cast<const uint32_t*>(qzeros.data());
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t n = 0; n < N; ++n) {
      const auto stored = static_cast<int32_t>(get_code(words + g * cols, 1, n, bits));
      zeros[static_cast<size_t>(g * N + n)] = format == CheckpointFormat::kGptq ? stored + 1 : stored;
    }
  }
  return zeros;
}

}  // namespace qgru::gptq
