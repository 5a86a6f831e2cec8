// .npz: a ZIP of stored .npy members (what np.savez writes), read member by member with CRC-32 checks.
#include <cstring>

#include "file_reader.h"
#include "qgru/base/message_text.h"
#include "npy_detail.h"
#include "qgru/base/atomic_file.h"
#include "qgru/base/error.h"
#include "qgru/io/npy.h"
#include "qgru/io/zip.h"

namespace qgru {
namespace {

constexpr const char* kMemberSuffix = ".npy";

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string join_keys(const std::vector<std::string>& keys) {
  std::string text;
  for (const std::string& key : keys) text += (text.empty() ? "'" : ", '") + printable(key) + "'";
  return text.empty() ? "none" : text;
}

// The .npy members of an archive reachable through `read_at` (a file or a buffer).
class NpzArchive {
 public:
  NpzArchive(ZipReadAt read_at, uint64_t size, std::string source)
      : read_at_(std::move(read_at)), source_(std::move(source)) {
    for (ZipMember& member : read_zip_directory(read_at_, size, source_)) {
      if (!ends_with(member.name, kMemberSuffix)) {
        throw Error(source_ + ": member '" + printable(member.name) +
                    "': expected .npy members only (as np.savez writes), got another file");
      }
      std::string key = member.name.substr(0, member.name.size() - std::strlen(kMemberSuffix));
      arrays_.emplace_back(std::move(key), std::move(member));
    }
  }

  const std::vector<std::pair<std::string, ZipMember>>& arrays() const { return arrays_; }
  const std::string& source() const { return source_; }

  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& entry : arrays_) out.push_back(entry.first);
    return out;
  }

  // Reads one member's array, checking the CRC-32 of its bytes against the central directory.
  Tensor read(const std::string& key, const ZipMember& member) const {
    const std::string source = source_ + ": array '" + printable(key) + "'";
    uint32_t crc = 0;
    uint64_t next = 0;
    Tensor tensor = io_detail::read_npy_bytes(
        [&](uint64_t offset, void* out, uint64_t size) {
          if (offset != next) throw Error("internal: .npy reader skipped bytes in " + source);
          read_at_(member.data_offset + offset, out, size);
          crc = crc32_update(crc, out, size);
          next = offset + size;
        },
        member.size, source);
    if (crc != member.crc32) {
      throw Error(source + ": expected CRC-32 " + std::to_string(member.crc32) + " from the archive directory, got " +
                  std::to_string(crc) + " (corrupt archive)");
    }
    return tensor;
  }

  std::map<std::string, Tensor> read_all() const {
    std::map<std::string, Tensor> out;
    for (const auto& [key, member] : arrays_) out.emplace(key, read(key, member));
    return out;
  }

 private:
  ZipReadAt read_at_;
  std::string source_;
  std::vector<std::pair<std::string, ZipMember>> arrays_;  // key (name without ".npy"), member
};

ZipReadAt file_read_at(io_detail::FileReader& reader) {
  return [&reader](uint64_t offset, void* out, uint64_t size) { reader.read_at(offset, out, size, "archive"); };
}

Tensor read_single_array(const std::string& path, const std::string* key) {
  io_detail::FileReader reader(path);
  const NpzArchive archive(file_read_at(reader), reader.size(), path);
  if (key == nullptr) {
    if (archive.arrays().size() != 1) {
      throw Error(path + ": expected exactly one array (or name one as " + path + ":KEY), got " +
                  std::to_string(archive.arrays().size()) + ": " + join_keys(archive.keys()));
    }
    return archive.read(archive.arrays()[0].first, archive.arrays()[0].second);
  }
  for (const auto& [name, member] : archive.arrays()) {
    if (name == *key) return archive.read(name, member);
  }
  throw Error(path + ": expected an array named '" + printable(*key) + "', got only " + join_keys(archive.keys()));
}

}  // namespace

std::map<std::string, Tensor> read_npz(const std::string& path) {
  io_detail::FileReader reader(path);
  return NpzArchive(file_read_at(reader), reader.size(), path).read_all();
}

std::map<std::string, Tensor> parse_npz(const std::vector<uint8_t>& bytes, const std::string& source_name) {
  const ZipReadAt read_at = [&](uint64_t offset, void* out, uint64_t size) {
    if (offset > bytes.size() || size > bytes.size() - offset) {
      throw Error(source_name + ": expected bytes " + std::to_string(offset) + ".." + std::to_string(offset + size) +
                  " to lie in the archive, got " + std::to_string(bytes.size()) + " bytes (truncated?)");
    }
    if (size > 0) std::memcpy(out, bytes.data() + offset, size);
  };
  return NpzArchive(read_at, bytes.size(), source_name).read_all();
}

void write_npz(const std::string& path, const std::map<std::string, Tensor>& arrays) {
  // Every header first, so a dtype .npy cannot hold is refused before the file is created.
  std::vector<std::vector<uint8_t>> headers;
  for (const auto& [key, tensor] : arrays) {
    if (key.empty()) throw Error(path + ": expected non-empty array names, got an empty one");
    headers.push_back(io_detail::npy_header_bytes(tensor, path + ": array '" + key + "'"));
  }
  AtomicFile out(path);
  StoredZipWriter zip([&out](const void* data, size_t size) { out.write(data, size); }, path);
  size_t index = 0;
  for (const auto& [key, tensor] : arrays) {
    const std::vector<uint8_t>& header = headers[index++];
    zip.add(key + kMemberSuffix, {{header.data(), header.size()}, {tensor.bytes.data(), tensor.bytes.size()}});
  }
  zip.finish();
  out.commit();
}

namespace {

// "file.npz:key" split at its last ".npz:", or npos when the spec names no key.
size_t key_split(const std::string& spec) {
  if (ends_with(spec, ".npy") || ends_with(spec, ".npz")) return std::string::npos;
  return spec.rfind(".npz:");
}

}  // namespace

std::string array_file_path(const std::string& path_or_path_key) {
  const size_t split = key_split(path_or_path_key);
  return split == std::string::npos ? path_or_path_key : path_or_path_key.substr(0, split + 4);
}

Tensor read_array(const std::string& path_or_path_key) {
  const std::string& spec = path_or_path_key;
  if (ends_with(spec, ".npy")) return read_npy(spec);
  if (ends_with(spec, ".npz")) return read_single_array(spec, nullptr);
  const size_t split = key_split(spec);
  if (split != std::string::npos) {
    const std::string path = array_file_path(spec);
    const std::string key = spec.substr(split + 5);
    if (key.empty()) throw Error(spec + ": expected an array name after ':', got none");
    return read_single_array(path, &key);
  }
  // No telling extension: go by the magic bytes.
  io_detail::FileReader reader(spec);
  uint8_t head[6] = {};
  if (reader.size() >= 6) reader.read_at(0, head, 6, "magic");
  if (std::memcmp(head, "\x93NUMPY", 6) == 0) return read_npy(spec);
  if (std::memcmp(head, "PK", 2) == 0) return read_single_array(spec, nullptr);
  throw Error(spec + ": expected a .npy or .npz file (or FILE.npz:KEY), got neither by name nor by content");
}

}  // namespace qgru
