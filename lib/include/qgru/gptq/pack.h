#pragma once
// Bit packing of GPTQ checkpoints, as AutoGPTQ / GPTQModel (QuantLinear.pack) write them.
//
// Every width is a little-endian bit stream of 32-bit words: code i of a stream occupies bits
// [bits·i, bits·i + bits) of the stream, bit b of the stream is bit b % 32 of word b / 32. For 2, 4 and 8
// bits a code never straddles two words (32/bits codes per word, lowest code in the lowest bits); for 3 bits
// this is exactly AutoGPTQ's cross-word packing of 32 codes in 3 words (codes 10 and 21 straddle).
//   qweight [K·bits/32, N] int32: for each output n, a stream along K (words of one stream are a column).
//   qzeros  [G, N·bits/32]  int32: for each group g, a stream along N (words of one stream are a row).
// A stream must fill whole words: K·bits and N·bits multiples of 32 (otherwise qgru::Error, never a guess).
// Checkpoint formats: "gptq" (v1) stores zero − 1 in qzeros (readers add 1); "gptq_v2" stores zero.
#include <cstdint>
#include <string>
#include <vector>

namespace qgru::gptq {

enum class CheckpointFormat { kGptq, kGptqV2 };
const char* format_name(CheckpointFormat format);             // "gptq", "gptq_v2"
CheckpointFormat parse_format(const std::string& name);       // throws qgru::Error on anything else

// Put / get code `index` of the stream whose word w is words[w · word_stride].
void put_code(uint32_t* words, int64_t word_stride, int64_t index, int bits, uint32_t code);
uint32_t get_code(const uint32_t* words, int64_t word_stride, int64_t index, int bits);

// codes [N, K] → qweight [K·bits/32, N] and back. `what` names the tensor in errors.
std::vector<int32_t> pack_qweight(const std::vector<int32_t>& codes, int64_t N, int64_t K, int bits,
                                  const std::string& what);
std::vector<int32_t> unpack_qweight(const std::vector<int32_t>& qweight, int64_t N, int64_t K, int bits);

// zeros [G, N] → qzeros [G, N·bits/32]. v1 stores (zero − 1) & maxq: a zero of 0 cannot be carried (readers
// would see maxq + 1); the number of such zeros is returned in *unrepresentable (callers warn).
std::vector<int32_t> pack_qzeros(const std::vector<int32_t>& zeros, int64_t G, int64_t N, int bits,
                                 CheckpointFormat format, int64_t* unrepresentable, const std::string& what);
// qzeros → zeros [G, N]. v1: stored + 1 (so a stored maxq reads as maxq + 1, as the CUDA/exllama kernels do).
std::vector<int32_t> unpack_qzeros(const std::vector<int32_t>& qzeros, int64_t G, int64_t N, int bits,
                                   CheckpointFormat format);

}  // namespace qgru::gptq
