// Writing a ZIP archive of stored members, ZIP64 records where the classic fields overflow.
#include <algorithm>
#include <vector>

#include "byte_order.h"
#include "qgru/base/message_text.h"
#include "qgru/io/zip.h"
#include "zip_format.h"

namespace qgru {

using namespace zip_format;

void StoredZipWriter::emit(const std::vector<uint8_t>& bytes) {
  sink_(bytes.data(), bytes.size());
  offset_ += bytes.size();
}

void StoredZipWriter::add(const std::string& name, const std::vector<std::pair<const void*, size_t>>& pieces) {
  if (finished_) throw Error("internal: StoredZipWriter::add after finish");
  if (name.empty() || name.size() > 0xFFFF) fail(target_, "member '" + printable(name) + "': expected a name of 1 to 65535 bytes");
  uint64_t size = 0;
  uint32_t crc = 0;
  for (const auto& [data, piece_size] : pieces) {
    crc = crc32_update(crc, data, piece_size);
    size += piece_size;
  }
  // Sizes that do not fit the classic uint32_t fields go in a ZIP64 extra field (APPNOTE 4.5.3), with the
  // classic fields saturated at 0xFFFFFFFF.
  const bool zip64 = force_zip64_ || size >= kSaturated32;
  const bool ascii = std::all_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  std::vector<uint8_t> header;
  io_detail::append_le32(header, kLocalHeaderSignature);
  io_detail::append_le16(header, zip64 ? 45 : 20);  // version needed: 4.5 for ZIP64, else 2.0
  io_detail::append_le16(header, ascii ? 0 : kFlagUtf8Name);
  io_detail::append_le16(header, kMethodStored);
  io_detail::append_le16(header, 0);  // time 00:00:00
  io_detail::append_le16(header, kDosDate1980);
  io_detail::append_le32(header, crc);
  io_detail::append_le32(header, zip64 ? kSaturated32 : static_cast<uint32_t>(size));
  io_detail::append_le32(header, zip64 ? kSaturated32 : static_cast<uint32_t>(size));
  io_detail::append_le16(header, static_cast<uint16_t>(name.size()));
  io_detail::append_le16(header, zip64 ? 20 : 0);
  header.insert(header.end(), name.begin(), name.end());
  if (zip64) {
    io_detail::append_le16(header, 0x0001);
    io_detail::append_le16(header, 16);
    io_detail::append_le64(header, size);  // original size
    io_detail::append_le64(header, size);  // stored size
  }
  members_.push_back({name, crc, size, offset_});
  emit(header);
  for (const auto& [data, piece_size] : pieces) {
    sink_(data, piece_size);
    offset_ += piece_size;
  }
}

void StoredZipWriter::finish() {
  if (finished_) return;
  finished_ = true;
  const uint64_t directory_offset = offset_;
  for (const Written& member : members_) {
    const bool ascii = std::all_of(member.name.begin(), member.name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    const bool big_size = force_zip64_ || member.size >= kSaturated32;
    const bool big_offset = force_zip64_ || member.local_header_offset >= kSaturated32;
    std::vector<uint8_t> extra;
    if (big_size || big_offset) {
      io_detail::append_le16(extra, 0x0001);
      io_detail::append_le16(extra, static_cast<uint16_t>((big_size ? 16 : 0) + (big_offset ? 8 : 0)));
      if (big_size) {
        io_detail::append_le64(extra, member.size);
        io_detail::append_le64(extra, member.size);
      }
      if (big_offset) io_detail::append_le64(extra, member.local_header_offset);
    }
    std::vector<uint8_t> entry;
    io_detail::append_le32(entry, kCentralHeaderSignature);
    io_detail::append_le16(entry, (3 << 8) | 45);  // made by: Unix, version 4.5
    io_detail::append_le16(entry, extra.empty() ? 20 : 45);
    io_detail::append_le16(entry, ascii ? 0 : kFlagUtf8Name);
    io_detail::append_le16(entry, kMethodStored);
    io_detail::append_le16(entry, 0);
    io_detail::append_le16(entry, kDosDate1980);
    io_detail::append_le32(entry, member.crc32);
    io_detail::append_le32(entry, big_size ? kSaturated32 : static_cast<uint32_t>(member.size));
    io_detail::append_le32(entry, big_size ? kSaturated32 : static_cast<uint32_t>(member.size));
    io_detail::append_le16(entry, static_cast<uint16_t>(member.name.size()));
    io_detail::append_le16(entry, static_cast<uint16_t>(extra.size()));
    io_detail::append_le16(entry, 0);  // comment
    io_detail::append_le16(entry, 0);  // disk
    io_detail::append_le16(entry, 0);  // internal attributes
    io_detail::append_le32(entry, 0100644u << 16);  // external attributes: a regular file, rw-r--r--
    io_detail::append_le32(entry, big_offset ? kSaturated32 : static_cast<uint32_t>(member.local_header_offset));
    entry.insert(entry.end(), member.name.begin(), member.name.end());
    entry.insert(entry.end(), extra.begin(), extra.end());
    emit(entry);
  }
  const uint64_t directory_size = offset_ - directory_offset;
  const uint64_t count = members_.size();
  const bool zip64_end = force_zip64_ || count >= 0xFFFF || directory_size >= kSaturated32 || directory_offset >= kSaturated32;
  std::vector<uint8_t> end;
  if (zip64_end) {
    const uint64_t zip64_end_offset = offset_;
    io_detail::append_le32(end, kZip64EndSignature);
    io_detail::append_le64(end, kZip64EndBytes - 12);  // size of the rest of this record
    io_detail::append_le16(end, (3 << 8) | 45);
    io_detail::append_le16(end, 45);
    io_detail::append_le32(end, 0);  // this disk
    io_detail::append_le32(end, 0);  // disk of the directory
    io_detail::append_le64(end, count);
    io_detail::append_le64(end, count);
    io_detail::append_le64(end, directory_size);
    io_detail::append_le64(end, directory_offset);
    io_detail::append_le32(end, kZip64LocatorSignature);
    io_detail::append_le32(end, 0);
    io_detail::append_le64(end, zip64_end_offset);
    io_detail::append_le32(end, 1);  // total disks
  }
  io_detail::append_le32(end, kEndSignature);
  io_detail::append_le16(end, 0);
  io_detail::append_le16(end, 0);
  io_detail::append_le16(end, zip64_end ? 0xFFFF : static_cast<uint16_t>(count));
  io_detail::append_le16(end, zip64_end ? 0xFFFF : static_cast<uint16_t>(count));
  io_detail::append_le32(end, zip64_end ? kSaturated32 : static_cast<uint32_t>(directory_size));
  io_detail::append_le32(end, zip64_end ? kSaturated32 : static_cast<uint32_t>(directory_offset));
  io_detail::append_le16(end, 0);  // comment
  emit(end);
}

}  // namespace qgru
