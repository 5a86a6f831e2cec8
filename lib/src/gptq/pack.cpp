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

namespace {

// A 1 in every field of a word: the clients' v1 offset for 2, 4 and 8 bits (0x55555555, 0x11111111,
// 0x01010101). 3-bit fields straddle words and are shifted one by one instead.
uint32_t ones_in_every_field(int bits) {
  uint32_t ones = 0;
  for (int shift = 0; shift < 32; shift += bits) ones |= uint32_t{1} << shift;
  return ones;
}

// The stream of fields as stored (v2: zero points; v1 3-bit: (zero − 1) mod 8) before the word-wise offset.
std::vector<int32_t> pack_fields(const std::vector<int32_t>& values, int64_t G, int64_t N, int bits) {
  const int64_t cols = N * bits / 32;
  std::vector<int32_t> packed(static_cast<size_t>(G * cols), 0);
  auto* words = reinterpret_cast<uint32_t*>(packed.data());
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t n = 0; n < N; ++n) {
      put_code(words + g * cols, 1, n, bits, static_cast<uint32_t>(values[static_cast<size_t>(g * N + n)]));
    }
  }
  return packed;
}

std::vector<int32_t> unpack_fields(const std::vector<int32_t>& qzeros, int64_t G, int64_t N, int bits) {
  const int64_t cols = N * bits / 32;
  std::vector<int32_t> fields(static_cast<size_t>(G * N));
  const auto* words = reinterpret_cast<const uint32_t*>(qzeros.data());
  for (int64_t g = 0; g < G; ++g) {
    for (int64_t n = 0; n < N; ++n) {
      fields[static_cast<size_t>(g * N + n)] = static_cast<int32_t>(get_code(words + g * cols, 1, n, bits));
    }
  }
  return fields;
}

// word + offset (mod 2^32) on every word: uint32 arithmetic wraps by definition, as torch's int32 += does.
void add_to_words(std::vector<int32_t>& packed, uint32_t offset) {
  for (int32_t& word : packed) word = static_cast<int32_t>(static_cast<uint32_t>(word) + offset);
}

}  // namespace

const char* v1_zero_rule_name(V1ZeroRule rule) {
  return rule == V1ZeroRule::kClients ? "the clients' v1 arithmetic (whole-word for 2, 4, 8 bits)"
                                      : "qgru's earlier per-field v1 arithmetic";
}

std::vector<int32_t> pack_qzeros(const std::vector<int32_t>& zeros, int64_t G, int64_t N, int bits,
                                 CheckpointFormat format, const std::string& what) {
  check_stream(N, bits, what, "N (output features)");
  const int64_t maxq = max_code(bits);
  for (int32_t zero : zeros) {
    if (zero < 0 || zero > maxq) throw Error(what + ": zero point " + std::to_string(zero) + " out of range");
  }
  if (format == CheckpointFormat::kGptqV2) return pack_fields(zeros, G, N, bits);
  if (bits == 3) {  // (zero − 1) mod 8 per field
    std::vector<int32_t> shifted(zeros.size());
    for (size_t i = 0; i < zeros.size(); ++i) shifted[i] = static_cast<int32_t>((zeros[i] - 1) & maxq);
    return pack_fields(shifted, G, N, bits);
  }
  std::vector<int32_t> packed = pack_fields(zeros, G, N, bits);
  add_to_words(packed, ~ones_in_every_field(bits) + 1u);  // − ONES mod 2^32
  return packed;
}

std::vector<int32_t> unpack_qzeros(const std::vector<int32_t>& qzeros, int64_t G, int64_t N, int bits,
                                   CheckpointFormat format, V1ZeroRule rule) {
  check_stream(N, bits, "qzeros", "N (output features)");
  if (format == CheckpointFormat::kGptqV2) return unpack_fields(qzeros, G, N, bits);
  const int32_t maxq = static_cast<int32_t>(max_code(bits));
  if (bits == 3 || rule == V1ZeroRule::kPerField) {  // (stored + 1) mod 2^bits per field
    std::vector<int32_t> zeros = unpack_fields(qzeros, G, N, bits);
    for (int32_t& zero : zeros) zero = (zero + 1) & maxq;
    return zeros;
  }
  std::vector<int32_t> words = qzeros;
  add_to_words(words, ones_in_every_field(bits));
  return unpack_fields(words, G, N, bits);
}

V1FieldReaderMisreads v1_field_reader_misreads(const std::vector<int32_t>& zeros, const std::vector<int32_t>& qzeros,
                                               int64_t G, int64_t N, int bits) {
  check_stream(N, bits, "qzeros", "N (output features)");
  const std::vector<int32_t> fields = unpack_fields(qzeros, G, N, bits);
  V1FieldReaderMisreads misreads;
  for (size_t i = 0; i < zeros.size(); ++i) {
    if (fields[i] + 1 == zeros[i]) continue;  // read as written (fields[i] + 1 cannot overflow: fields < 256)
    if (zeros[i] == 0) {
      ++misreads.zero_points_of_zero;
    } else {
      ++misreads.neighbours;
    }
  }
  return misreads;
}

}  // namespace qgru::gptq
