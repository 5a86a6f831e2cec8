#pragma once
// Opening a file for reading, only when it is a regular file. A FIFO would block the reader forever, a
// character device (/dev/zero, /dev/tty) yields endless or interactive bytes, a tape device rewinds when it
// is opened: so the path is checked with stat() before it is opened, opened with O_NONBLOCK (an open that
// cannot wait), and checked again with fstat() on what was opened, which refuses a file swapped in between.
#include <sys/types.h>

#include <cstdint>
#include <string>

namespace qgru {

// "a regular file", "a directory", "a FIFO", "a character device", "a block device", "a socket",
// "a symbolic link" or "a file of unknown type", for messages.
const char* file_type_name(mode_t mode);

class InputFile {
 public:
  // Throws qgru::Error naming the file when it does not exist, cannot be opened, or is not a regular file.
  explicit InputFile(std::string path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Read exactly `size` bytes at `offset` (pread); throws qgru::Error naming the file, saying `what` was
  // being read, when the range lies outside the file or the read comes back short.
  void read_at(uint64_t offset, void* out, uint64_t size, const char* what) const;
  // Read up to `size` bytes at `offset`; returns how many were read (0 at the end of the file).
  uint64_t read_some(uint64_t offset, void* out, uint64_t size) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace qgru
