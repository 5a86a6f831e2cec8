#pragma once
// Random-access reads from a file with errors that name it. Lets the readers validate a header and then
// read each tensor straight into its own buffer, without holding the whole file twice.
#include <cstdint>
#include <fstream>
#include <string>

namespace qgru::io_detail {

class FileReader {
 public:
  explicit FileReader(std::string path);
  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  // Read exactly `size` bytes at `offset`; throws qgru::Error naming the file (saying `what` was being
  // read) when the range lies outside the file or the read fails.
  void read_at(uint64_t offset, void* out, uint64_t size, const char* what);

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

}  // namespace qgru::io_detail
