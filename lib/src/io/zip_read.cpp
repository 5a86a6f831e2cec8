// Reading the central directory of a ZIP archive of stored members (ZIP64 records understood).
#include <algorithm>
#include <cstring>
#include <set>
#include <vector>

#include "byte_order.h"
#include "qgru/base/message_text.h"
#include "qgru/io/zip.h"
#include "zip_format.h"

namespace qgru {
namespace {

using io_detail::load_le16;
using io_detail::load_le32;
using io_detail::load_le64;
using namespace zip_format;

void check_method(uint16_t method, uint16_t flags, const std::string& where) {
  if (flags & kFlagEncrypted) fail(where, "expected an unencrypted member, got an encrypted one");
  if (method == kMethodDeflate) {
    fail(where, "expected stored (uncompressed) members, got deflate compression (np.savez_compressed); "
                "save the arrays with np.savez instead");
  }
  if (method != kMethodStored) {
    fail(where, "expected stored (uncompressed) members, got compression method " + std::to_string(method));
  }
}

struct EndRecord {
  uint64_t entries = 0;
  uint64_t directory_size = 0;
  uint64_t directory_offset = 0;
  uint64_t records_start = 0;  // where the end records (ZIP64 or classic) begin: the directory ends here
};

EndRecord read_end_record(const ZipReadAt& read_at, uint64_t archive_size, const std::string& source) {
  if (archive_size < kEndBytes) {
    fail(source, "expected a ZIP archive (.npz) of at least 22 bytes, got a file of " + std::to_string(archive_size) + " bytes");
  }
  // The end record is the last 22 bytes plus a comment of up to 65535 bytes.
  const uint64_t tail_size = std::min<uint64_t>(archive_size, kEndBytes + 0xFFFF);
  std::vector<uint8_t> tail(tail_size);
  read_at(archive_size - tail_size, tail.data(), tail_size);
  uint64_t found = tail_size;
  for (uint64_t i = tail_size - kEndBytes + 1; i-- > 0;) {
    if (load_le32(&tail[i]) == kEndSignature && i + kEndBytes + load_le16(&tail[i + 20]) == tail_size) {
      found = i;
      break;
    }
  }
  if (found == tail_size) {
    uint8_t head[6] = {};
    read_at(0, head, std::min<uint64_t>(archive_size, 6));
    if (std::memcmp(head, "\x93NUMPY", 6) == 0) fail(source, "expected a ZIP archive (.npz), got a .npy file");
    fail(source, "expected a ZIP archive (.npz) ending in an end-of-central-directory record, got none (truncated file?)");
  }
  const uint8_t* end = &tail[found];
  EndRecord record;
  const uint64_t end_offset = archive_size - tail_size + found;
  uint64_t disk = load_le16(end + 4), directory_disk = load_le16(end + 6), disk_entries = load_le16(end + 8);
  record.entries = load_le16(end + 10);
  record.directory_size = load_le32(end + 12);
  record.directory_offset = load_le32(end + 16);
  record.records_start = end_offset;
  if (end_offset >= kZip64LocatorBytes) {
    uint8_t locator[kZip64LocatorBytes];
    read_at(end_offset - kZip64LocatorBytes, locator, kZip64LocatorBytes);
    if (load_le32(locator) == kZip64LocatorSignature) {
      const uint64_t zip64_end_offset = load_le64(locator + 8);
      if (load_le32(locator + 4) != 0 || load_le32(locator + 16) > 1) fail(source, "expected a single-disk ZIP archive, got a multi-disk one");
      if (zip64_end_offset > end_offset - kZip64LocatorBytes || end_offset - kZip64LocatorBytes - zip64_end_offset < kZip64EndBytes) {
        fail(source, "ZIP64 end record at offset " + std::to_string(zip64_end_offset) + ": expected it before the locator, got it outside");
      }
      uint8_t zip64_end[kZip64EndBytes];
      read_at(zip64_end_offset, zip64_end, kZip64EndBytes);
      if (load_le32(zip64_end) != kZip64EndSignature) fail(source, "expected a ZIP64 end-of-central-directory record, got a bad signature");
      disk = load_le32(zip64_end + 16);
      directory_disk = load_le32(zip64_end + 20);
      disk_entries = load_le64(zip64_end + 24);
      record.entries = load_le64(zip64_end + 32);
      record.directory_size = load_le64(zip64_end + 40);
      record.directory_offset = load_le64(zip64_end + 48);
      record.records_start = zip64_end_offset;
    }
  }
  if (disk != 0 || directory_disk != 0 || disk_entries != record.entries) {
    fail(source, "expected a single-disk ZIP archive, got a multi-disk one");
  }
  if (record.directory_offset > record.records_start || record.directory_size > record.records_start - record.directory_offset) {
    fail(source, "central directory [" + std::to_string(record.directory_offset) + ", +" + std::to_string(record.directory_size) +
                     "]: expected it to lie before the end record at " + std::to_string(record.records_start) + ", got it outside");
  }
  if (record.entries > record.directory_size / kCentralHeaderBytes) {
    fail(source, "central directory: expected room for " + std::to_string(record.entries) + " entries in " +
                     std::to_string(record.directory_size) + " bytes, got too little");
  }
  return record;
}

// Fills the fields saturated at 0xFFFFFFFF from the ZIP64 extra field (id 1), in APPNOTE order.
void apply_zip64_extra(const uint8_t* extra, uint64_t extra_size, uint64_t& uncompressed, uint64_t& compressed,
                       uint64_t& local_offset, uint64_t& disk_start, const std::string& where) {
  for (uint64_t pos = 0; pos + 4 <= extra_size;) {
    const uint16_t id = load_le16(extra + pos), size = load_le16(extra + pos + 2);
    if (pos + 4 + size > extra_size) fail(where, "extra field: expected it within the directory entry, got it cut short");
    if (id == 0x0001) {
      const uint8_t* field = extra + pos + 4;
      uint64_t used = 0;
      auto take = [&](uint64_t& value, uint64_t saturated, uint64_t bytes) {
        if (value != saturated) return;
        if (used + bytes > size) fail(where, "ZIP64 extra field: expected " + std::to_string(used + bytes) + " bytes, got " + std::to_string(size));
        value = bytes == 8 ? load_le64(field + used) : load_le32(field + used);
        used += bytes;
      };
      take(uncompressed, 0xFFFFFFFFu, 8);
      take(compressed, 0xFFFFFFFFu, 8);
      take(local_offset, 0xFFFFFFFFu, 8);
      take(disk_start, 0xFFFFu, 4);
    }
    pos += 4 + size;
  }
}

}  // namespace

std::vector<ZipMember> read_zip_directory(const ZipReadAt& read_at, uint64_t archive_size, const std::string& source) {
  const EndRecord end = read_end_record(read_at, archive_size, source);
  std::vector<uint8_t> directory(end.directory_size);
  read_at(end.directory_offset, directory.data(), directory.size());
  std::vector<ZipMember> members;
  std::set<std::string> names;
  uint64_t pos = 0;
  for (uint64_t index = 0; index < end.entries; ++index) {
    if (directory.size() - pos < kCentralHeaderBytes || load_le32(&directory[pos]) != kCentralHeaderSignature) {
      fail(source, "central directory entry " + std::to_string(index) + ": expected a file header signature, got a bad or missing one");
    }
    const uint8_t* header = &directory[pos];
    const uint16_t flags = load_le16(header + 8), method = load_le16(header + 10);
    const uint32_t crc = load_le32(header + 16);
    uint64_t compressed = load_le32(header + 20), uncompressed = load_le32(header + 24);
    const uint64_t name_size = load_le16(header + 28), extra_size = load_le16(header + 30), comment_size = load_le16(header + 32);
    uint64_t disk_start = load_le16(header + 34), local_offset = load_le32(header + 42);
    if (directory.size() - pos - kCentralHeaderBytes < name_size + extra_size + comment_size) {
      fail(source, "central directory entry " + std::to_string(index) + ": expected its name and fields within the directory, got it cut short");
    }
    ZipMember member;
    member.name.assign(reinterpret_cast<const char*>(header + kCentralHeaderBytes), name_size);
    const std::string where = source + ": member '" + printable(member.name) + "'";
    apply_zip64_extra(header + kCentralHeaderBytes + name_size, extra_size, uncompressed, compressed, local_offset, disk_start, where);
    pos += kCentralHeaderBytes + name_size + extra_size + comment_size;

    check_method(method, flags, where);
    if (disk_start != 0) fail(where, "expected a single-disk ZIP archive, got a member on disk " + std::to_string(disk_start));
    if (compressed != uncompressed) {
      fail(where, "expected equal stored and original sizes, got " + std::to_string(compressed) + " and " + std::to_string(uncompressed));
    }
    if (!names.insert(member.name).second) fail(where, "expected each member name once, got it twice");

    if (local_offset > end.directory_offset || end.directory_offset - local_offset < kLocalHeaderBytes) {
      fail(where, "local header at offset " + std::to_string(local_offset) + ": expected it before the central directory at " +
                      std::to_string(end.directory_offset) + ", got it outside");
    }
    uint8_t local[kLocalHeaderBytes];
    read_at(local_offset, local, kLocalHeaderBytes);
    if (load_le32(local) != kLocalHeaderSignature) fail(where, "expected a local file header signature, got a bad one");
    check_method(load_le16(local + 8), load_le16(local + 6), where);
    const uint64_t local_name_size = load_le16(local + 26), local_extra_size = load_le16(local + 28);
    member.data_offset = local_offset + kLocalHeaderBytes + local_name_size + local_extra_size;
    member.size = uncompressed;
    member.crc32 = crc;
    if (member.data_offset > end.directory_offset || member.size > end.directory_offset - member.data_offset) {
      fail(where, "data [" + std::to_string(member.data_offset) + ", +" + std::to_string(member.size) +
                      "]: expected it before the central directory at " + std::to_string(end.directory_offset) + ", got it outside");
    }
    std::string local_name(local_name_size, '\0');
    read_at(local_offset + kLocalHeaderBytes, local_name.data(), local_name_size);
    if (local_name != member.name) {
      fail(where, "expected the local header to carry the same name, got '" + printable(local_name) + "'");
    }
    members.push_back(std::move(member));
  }
  return members;
}

}  // namespace qgru
