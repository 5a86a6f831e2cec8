#pragma once
// The part of ZIP (PKWARE APPNOTE 6.3) that .npz needs: archives of stored (uncompressed) members, read
// through the central directory (ZIP64 records understood), written without compression.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qgru {

// CRC-32 as ZIP uses it (reflected polynomial 0xEDB88320, initial and final XOR 0xFFFFFFFF).
// Start with crc = 0 and feed the bytes in any number of pieces.
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

struct ZipMember {
  std::string name;
  uint64_t data_offset = 0;  // where the member's bytes start in the archive
  uint64_t size = 0;         // stored: compressed size == uncompressed size
  uint32_t crc32 = 0;        // as recorded in the central directory
};

// Reads `size` bytes at `offset` of the archive into `out`, throwing qgru::Error when that is impossible.
using ZipReadAt = std::function<void(uint64_t offset, void* out, uint64_t size)>;

// Lists the members of an archive of `archive_size` bytes, in central-directory order. Refuses, naming
// `source` and the member: compressed or encrypted members (a deflated member's message says to save with
// np.savez rather than np.savez_compressed), multi-disk archives, duplicate names, members whose local
// header or data lie outside the archive.
std::vector<ZipMember> read_zip_directory(const ZipReadAt& read_at, uint64_t archive_size, const std::string& source);

// Writes a ZIP of stored members sequentially through `sink`. ZIP64 records are written where a size,
// offset or count passes the classic 32-bit / 16-bit fields (or everywhere, with force_zip64, as
// np.savez does for its local headers).
class StoredZipWriter {
 public:
  using Sink = std::function<void(const void* data, size_t size)>;
  StoredZipWriter(Sink sink, std::string target, bool force_zip64 = false)
      : sink_(std::move(sink)), target_(std::move(target)), force_zip64_(force_zip64) {}
  // One member whose bytes are the concatenation of `pieces` (pointer, size).
  void add(const std::string& name, const std::vector<std::pair<const void*, size_t>>& pieces);
  // Central directory and end record; nothing may be added afterwards.
  void finish();

 private:
  struct Written {
    std::string name;
    uint32_t crc32;
    uint64_t size;
    uint64_t local_header_offset;
  };
  void emit(const std::vector<uint8_t>& bytes);
  Sink sink_;
  std::string target_;
  bool force_zip64_ = false;
  std::vector<Written> members_;
  uint64_t offset_ = 0;
  bool finished_ = false;
};

}  // namespace qgru
