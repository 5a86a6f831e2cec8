#include <cstdint>
#include <cstring>
#include <vector>

#include "qgru/base/sha256.h"
#include "qgru/model/float_gru.h"

namespace qgru {

namespace {

void add_int(Sha256& hash, int64_t value) {
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(static_cast<uint64_t>(value) >> (8 * i));  // little-endian
  hash.update(bytes, sizeof bytes);
}

void add_floats(Sha256& hash, const std::vector<float>& values) {
  add_int(hash, static_cast<int64_t>(values.size()));
  std::vector<uint8_t> bytes(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &values[i], sizeof bits);
    for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<uint8_t>(bits >> (8 * b));  // IEEE-754 bits, little-endian
  }
  hash.update(bytes.data(), bytes.size());
}

}  // namespace

std::string float_gru_weights_sha256(const FloatGruModel& model) {
  Sha256 hash;
  static const char kTag[] = "qgru float GRU weights 1";
  hash.update(kTag, sizeof kTag - 1);
  for (const int64_t value : {int64_t{model.input_size}, int64_t{model.hidden_size}, int64_t{model.num_layers},
                              int64_t{model.num_directions}, int64_t{model.linear_before_reset ? 1 : 0}}) {
    add_int(hash, value);
  }
  for (const GruCellWeights& cell : model.cells) {
    add_int(hash, cell.input_size);
    add_int(hash, cell.hidden_size);
    for (const std::vector<float>* values : {&cell.W, &cell.R, &cell.bw, &cell.br}) add_floats(hash, *values);
  }
  return hash.hex_digest();
}

}  // namespace qgru
