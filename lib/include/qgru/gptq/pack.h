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
//
// Zero points. "gptq_v2" stores the zero points themselves. "gptq" (v1) stores them minus one, and the
// clients (GPTQModel >= 0.9, transformers and optimum through it; docs/GPTQ.md lists the versions checked)
// do that subtraction on whole words, so a field's borrow runs into its neighbour:
//   2, 4, 8 bits: v1 word = v2 word − ONES (mod 2^32), read back as v1 word + ONES (mod 2^32), ONES having a
//                 1 in every field (0x55555555, 0x11111111, 0x01010101). Both are bijections of uint32, so
//                 every zero point in [0, maxq] (0 included) round-trips exactly through those readers.
//   3 bits:       fields straddle words, so the clients (GPTQModel >= 7.0) shift each field instead:
//                 stored = (zero − 1) mod 8, read back as (stored + 1) mod 8. Also exact for every zero.
// Readers that add 1 to each extracted field without wrapping (vLLM's gptq kernel, exllama-style kernels) see a
// different zero point wherever a borrow or a wrap happened; v1_field_reader_misreads() counts them.
#include <cstdint>
#include <string>
#include <vector>

namespace qgru::gptq {

enum class CheckpointFormat { kGptq, kGptqV2 };
const char* format_name(CheckpointFormat format);             // "gptq", "gptq_v2"
CheckpointFormat parse_format(const std::string& name);       // throws qgru::Error on anything else

// How a v1 file's qzeros words turn into zero points.
enum class V1ZeroRule {
  kClients,   // the clients' arithmetic above (whole words for 2, 4, 8 bits; wrapped fields for 3)
  kPerField,  // qgru's earlier writer stored (zero − 1) & maxq in each field (its quantize_config.json has
              // meta.quantizer = "qgru", a plain string): read (stored + 1) & maxq, exactly what it meant
};
const char* v1_zero_rule_name(V1ZeroRule rule);

// Put / get code `index` of the stream whose word w is words[w · word_stride].
void put_code(uint32_t* words, int64_t word_stride, int64_t index, int bits, uint32_t code);
uint32_t get_code(const uint32_t* words, int64_t word_stride, int64_t index, int bits);

// codes [N, K] → qweight [K·bits/32, N] and back. `what` names the tensor in errors.
std::vector<int32_t> pack_qweight(const std::vector<int32_t>& codes, int64_t N, int64_t K, int bits,
                                  const std::string& what);
std::vector<int32_t> unpack_qweight(const std::vector<int32_t>& qweight, int64_t N, int64_t K, int bits);

// zeros [G, N] (each in [0, maxq]) → qzeros [G, N·bits/32]; v1 with the clients' arithmetic.
std::vector<int32_t> pack_qzeros(const std::vector<int32_t>& zeros, int64_t G, int64_t N, int bits,
                                 CheckpointFormat format, const std::string& what);
// qzeros → zeros [G, N]. v2: the fields. v1: by `rule` (the clients' rule unless the file says otherwise).
std::vector<int32_t> unpack_qzeros(const std::vector<int32_t>& qzeros, int64_t G, int64_t N, int bits,
                                   CheckpointFormat format, V1ZeroRule rule = V1ZeroRule::kClients);

// What readers that add 1 to each extracted field, without wrapping or carrying, make of a v1 qzeros written
// by pack_qzeros: how many zero points they read differently from `zeros`, and how many of those are the
// zero points of 0 themselves (read as maxq + 1); the rest are neighbours of a borrow (read one lower).
struct V1FieldReaderMisreads {
  int64_t zero_points_of_zero = 0;  // zeros equal to 0 (every one of them is misread)
  int64_t neighbours = 0;           // other zero points a borrow moved
};
V1FieldReaderMisreads v1_field_reader_misreads(const std::vector<int32_t>& zeros, const std::vector<int32_t>& qzeros,
                                               int64_t G, int64_t N, int bits);

}  // namespace qgru::gptq
