#include "qgru/base/input_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "qgru/base/error.h"

namespace qgru {
namespace {

void refuse_unless_regular(const std::string& path, mode_t mode) {
  if (!S_ISREG(mode)) throw Error(path + ": is " + file_type_name(mode) + ", expected a regular file");
}

}  // namespace

const char* file_type_name(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "a file of unknown type";
}

InputFile::InputFile(std::string path) : path_(std::move(path)) {
  struct stat info {};
  if (::stat(path_.c_str(), &info) != 0) throw Error(path_ + ": cannot open (" + std::strerror(errno) + ")");
  refuse_unless_regular(path_, info.st_mode);
  fd_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw Error(path_ + ": cannot open (" + std::strerror(errno) + ")");
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    const int saved = errno;
    ::close(fd_);
    fd_ = -1;
    if (!S_ISREG(info.st_mode)) refuse_unless_regular(path_, info.st_mode);
    throw Error(path_ + ": cannot open (" + std::strerror(saved) + ")");
  }
  size_ = static_cast<uint64_t>(info.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t InputFile::read_some(uint64_t offset, void* out, uint64_t size) const {
  while (true) {
    const size_t chunk = static_cast<size_t>(size < (uint64_t{1} << 30) ? size : (uint64_t{1} << 30));
    const ssize_t got = ::pread(fd_, out, chunk, static_cast<off_t>(offset));
    if (got >= 0) return static_cast<uint64_t>(got);
    if (errno != EINTR) throw Error(path_ + ": read failed (" + std::strerror(errno) + ")");
  }
}

void InputFile::read_at(uint64_t offset, void* out, uint64_t size, const char* what) const {
  if (offset > size_ || size > size_ - offset) {
    throw Error(path_ + ": " + what + ": expected bytes " + std::to_string(offset) + ".." +
                std::to_string(offset + size) + " to lie in the file, got a file of " + std::to_string(size_) +
                " bytes (truncated?)");
  }
  auto* bytes = static_cast<char*>(out);
  while (size > 0) {
    const uint64_t got = read_some(offset, bytes, size);
    if (got == 0) {
      throw Error(path_ + ": " + what + ": the file ended at byte " + std::to_string(offset) +
                  " (it shrank while being read?)");
    }
    bytes += got;
    offset += got;
    size -= got;
  }
}

}  // namespace qgru
