#include "file_reader.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "qgru/base/error.h"

namespace qgru::io_detail {

FileReader::FileReader(std::string path) : path_(std::move(path)) {
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0) throw Error(path_ + ": cannot open (" + std::strerror(errno) + ")");
  if (S_ISDIR(info.st_mode)) throw Error(path_ + ": is a directory, expected a file");
  in_.open(path_, std::ios::binary);
  if (!in_) throw Error(path_ + ": cannot open (" + std::strerror(errno) + ")");
  size_ = static_cast<uint64_t>(info.st_size);
}

void FileReader::read_at(uint64_t offset, void* out, uint64_t size, const char* what) {
  if (offset > size_ || size > size_ - offset) {
    throw Error(path_ + ": " + what + ": expected bytes " + std::to_string(offset) + ".." +
                std::to_string(offset + size) + " to lie in the file, got a file of " + std::to_string(size_) +
                " bytes (truncated?)");
  }
  if (size == 0) return;
  in_.clear();
  in_.seekg(static_cast<std::streamoff>(offset));
  in_.read(static_cast<char*>(out), static_cast<std::streamsize>(size));
  if (!in_ || static_cast<uint64_t>(in_.gcount()) != size) {
    throw Error(path_ + ": " + what + ": read of " + std::to_string(size) + " bytes at offset " +
                std::to_string(offset) + " failed");
  }
}

}  // namespace qgru::io_detail
