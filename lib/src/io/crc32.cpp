// CRC-32 as ZIP uses it, slicing by 8 bytes (tested against the bit-by-bit definition).
#include <array>

#include "byte_order.h"
#include "qgru/io/zip.h"

namespace qgru {
namespace {

using io_detail::load_le32;

// Slicing-by-8 tables: tables[0] is the classic byte table; tables[k][b] is the CRC contribution of byte b
// followed by k zero bytes, so eight bytes are folded in per step.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;
CrcTables make_crc_tables() {
  CrcTables tables{};
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t crc = byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
    tables[0][byte] = crc;
  }
  for (size_t k = 1; k < 8; ++k) {
    for (uint32_t byte = 0; byte < 256; ++byte) {
      tables[k][byte] = (tables[k - 1][byte] >> 8) ^ tables[0][tables[k - 1][byte] & 0xFFu];
    }
  }
  return tables;
}

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  static const CrcTables kTables = make_crc_tables();
  const auto* bytes = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (; size >= 8; bytes += 8, size -= 8) {
    const uint32_t low = load_le32(bytes) ^ crc, high = load_le32(bytes + 4);
    crc = kTables[7][low & 0xFFu] ^ kTables[6][(low >> 8) & 0xFFu] ^ kTables[5][(low >> 16) & 0xFFu] ^
          kTables[4][low >> 24] ^ kTables[3][high & 0xFFu] ^ kTables[2][(high >> 8) & 0xFFu] ^
          kTables[1][(high >> 16) & 0xFFu] ^ kTables[0][high >> 24];
  }
  for (; size > 0; ++bytes, --size) crc = kTables[0][(crc ^ *bytes) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

}  // namespace qgru
